"""What a kept code change does to the tuner's history (the hybrid night, docs/proposers.md).

The tuner learns from points measured on some code. When a kept change edits the code
itself (an LLM's: not "set these constants"), the points measured before it were measured
on other code. The tuner keeps what still applies, on one assumption: **a code change that
leaves every use of the searched constants alone moves the metric by about the same amount
at every point of the space** (an added regularizer, a better data order: the landscape
shifts, its shape stays). Then the earlier points are told again, their values moved by the
gain the change was kept with; the constant values the change set itself are undone when
walking back. A change that does touch a searched constant's use (a line that mentions
it, besides its own `NAME = value`: `lr = LR * warmup(step)`, or a comment naming it; any
occurrence in the line counts, as part of a longer name too), or adds a searched constant,
changes what the constants mean: the points before it are not told at all.

Pure: the attempt's ChangeKey (the whitespace-free lines its diff removed and added,
loop/proposers/tried.py) is all it reads."""
from __future__ import annotations

from dataclasses import dataclass, field

from loop.proposers.base import Attempt
from loop.proposers.tried import CONSTANT_RE
from loop.setup.search_space import number


@dataclass
class CodeKeep:
    """A kept attempt, read as a step back through the tuner's history."""
    before: dict[str, float] = field(default_factory=dict)  # constants it set: value before
    code: bool = False          # it edits more than constants: earlier points, other code
    breaks: str = ""            # why the points before it no longer apply ("" when they do)


def _constants(lines: tuple[str, ...]) -> tuple[dict[str, float], list[str]]:
    """`NAME=value` lines with a numeric value (name -> value), and every other line."""
    values: dict[str, float] = {}
    code: list[str] = []
    for line in lines:
        m = CONSTANT_RE.match(line)
        try:
            if m is None:
                raise ValueError(line)
            values[m[1]] = number(m[2])
        except (ValueError, ZeroDivisionError):
            code.append(line)
    return values, code


def read_keep(attempt: Attempt, searched: set[str]) -> CodeKeep:
    """What walking back past this kept attempt means for the points before it."""
    key = attempt.change
    if key is None:
        return CodeKeep(code=True, breaks="its diff is unknown")
    old, old_code = _constants(key.removed)
    new, new_code = _constants(key.added)
    before = {n: v for n, v in old.items() if n in searched}
    code = old_code + new_code
    added = sorted(n for n in new if n in searched and n not in old)
    if added:          # the points before it have no value of it
        return CodeKeep(before, True, f"it adds the searched constant {added[0]}")
    if not code:
        return CodeKeep(before)
    for name in sorted(searched):   # the lines lost their spaces: `returnAifx`, so any
        if any(name in line for line in code):    # occurrence counts (wrongly, at worst,
            # the earlier points are dropped; never told on a landscape that changed)
            return CodeKeep(before, True, f"it changes how {name} is used")
    return CodeKeep(before, True)
