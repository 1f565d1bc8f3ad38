"""Changes already tried, told apart from new ideas.

A weak model proposes the same idea again and again ("add a warm-up, then cosine decay"),
each time a run's worth of time. A proposal repeats an earlier attempt when

  * its change is the same lines removed and added, whitespace aside;
  * it only sets constants, and sets the same constants to the same values (from whatever
    values: the base may have moved);
  * its description is nearly the earlier one's, word for word, and it adds the same lines.

The proposer refuses such a proposal before it is staged and tells the model which
iteration it repeats; the journal says in one line per idea how often it was tried
(`tried_lines`). Pure text: the engine's context computes each attempt's `ChangeKey` from
its diff (loop/engine/context.py)."""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

from loop.edits.describe import clean_description
from loop.proposers.base import Attempt

# `LR = 3e-3`, `lr: float = 3e-3`, and a YAML setting `lr: 0.003` (a flags or config file)
CONSTANT_RE = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(?:(?::\s*[\w.\[\], ]+)?=|:)\s*(\S.*?)\s*"
                         r"(?:#.*)?$")
SAME_DESCRIPTION = 0.9      # difflib ratio of normalised descriptions: "nearly verbatim"


@dataclass(frozen=True)
class ChangeKey:
    """What a change does, comparable across bases: whitespace-free lines, sorted."""
    removed: tuple[str, ...]
    added: tuple[str, ...]
    settings: frozenset[tuple[str, str]] = frozenset()   # only when it just sets constants

    def __bool__(self) -> bool:
        return bool(self.removed or self.added)


def key_of_patch(patch: str) -> ChangeKey:
    """The key of a unified diff (git's or difflib's: the order of hunks does not matter)."""
    removed: list[str] = []
    added: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line[:1] in "+-" and line[1:].strip():
            (added if line[0] == "+" else removed).append(line[1:])
    return ChangeKey(_normal(removed), _normal(added), _settings(removed, added))


def key_of_files(before: dict[str, str], after: dict[str, str]) -> ChangeKey:
    patch: list[str] = []
    for path in sorted(after):
        patch += difflib.unified_diff(before.get(path, "").splitlines(),
                                      after[path].splitlines(), lineterm="", n=0)
    return key_of_patch("\n".join(patch))


def _normal(lines: list[str]) -> tuple[str, ...]:
    return tuple(sorted("".join(l.split()) for l in lines))


def _settings(removed: list[str], added: list[str]) -> frozenset[tuple[str, str]]:
    """(name, value) of each constant the change sets, when setting constants is all it
    does; else empty."""
    new = [CONSTANT_RE.match(l) for l in added]
    old = [CONSTANT_RE.match(l) for l in removed]
    if not new or not all(new) or not all(old):
        return frozenset()
    return frozenset((m[1], "".join(m[2].split())) for m in new if m)


def same_words(a: str, b: str) -> bool:
    """Two descriptions nearly verbatim the same (case, punctuation and prefixes aside)."""
    x, y = normal_description(a), normal_description(b)
    return bool(x) and (x == y or difflib.SequenceMatcher(None, x, y).ratio()
                        >= SAME_DESCRIPTION)


def normal_description(text: str) -> str:
    return " ".join(re.sub(r"[^\w+.-]+", " ", clean_description(text, 10_000).lower()).split())


def repeated(key: ChangeKey, description: str | None,
             tried: list[Attempt]) -> Attempt | None:
    """The earliest of `tried` (Attempts with a `change`) that this change repeats, or None."""
    if not key:
        return None
    for attempt in sorted(tried, key=lambda a: a.iteration):
        other = attempt.change
        if not other:
            continue
        if (key.removed, key.added) == (other.removed, other.added):
            return attempt
        if key.settings and key.settings == other.settings:
            return attempt
        if description and same_words(description, attempt.description) \
                and key.added == other.added:
            return attempt
    return None


def tried_lines(history, limit: int = 8) -> list[str]:
    """One line per idea tried more than once, most tried first:
    `tried 7x: <description> (iterations 1-7, all discarded)`."""
    groups: dict[str, list] = {}
    for a in history:
        if a.status != "running" and a.description.strip():
            groups.setdefault(normal_description(a.description), []).append(a)
    lines = []
    for same in sorted(groups.values(), key=lambda g: (-len(g), g[0].iteration)):
        if len(same) < 2:
            continue
        numbers = sorted(a.iteration for a in same)
        statuses = Counter(_past(a.status) for a in same)
        ends = (f"all {next(iter(statuses))}" if len(statuses) == 1 else
                ", ".join(f"{n} {s}" for s, n in statuses.most_common()))
        lines.append(f"tried {len(same)}x: {clean_description(same[-1].description, 100)} "
                     f"(iterations {_ranges(numbers)}, {ends})")
    return lines[:limit]


def _past(status: str) -> str:
    return {"keep": "kept", "discard": "discarded", "crash": "crashed",
            "timeout": "timed out"}.get(status, status)


def _ranges(numbers: list[int], shown: int = 5) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'; past `shown` parts, the first ones, '…' and the last."""
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    if len(parts) > shown:
        parts = parts[:shown - 1] + ["…", parts[-1]]
    return ", ".join(parts)
