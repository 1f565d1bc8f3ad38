"""The settings a search may move, shared by mutate and tune: one `Axis` per setting (its
values drawn at random or listed for a systematic pass, written the way the file writes
them), the axes of a task's editable files, a change of settings applied and described.

Pure: reads and rewrites text through loop/script/settings.py, never touches files or git."""
from __future__ import annotations

import itertools
import math
import random
import re

from loop.proposers.base import ProposerFatal
from loop.script import settings
from loop.script.seeds import SEED_NAME
from loop.setup.search_space import Dim, implied, is_constant_name, number

SPREAD = 10.0          # an undeclared constant moves within [v / SPREAD, v * SPREAD]
GRID = 101             # points of a continuous dimension tried once random draws run dry
MAX_INT_GRID = 10_000  # an integer range up to this many values: every value is a point

Change = tuple[str, str, str, str]         # (file, constant, old text, new text)


class SpaceExhausted(ProposerFatal):
    """Every valid point of the search space was tried: a finished search, not a failure."""
    exit_code = 0


def _format(value: float, like: str) -> str:
    """`value` written the way the constant's current text `like` is written."""
    if "e" in like.lower():
        return f"{value:.2e}".replace("e-0", "e-").replace("e+0", "e")
    text = f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"
    if "." in like and not re.search(r"[.eE]", text):
        text += ".0"                                 # a float stays a float literal
    return text


def is_int(text: str) -> bool:
    return re.fullmatch(r"[-+]?\d[\d_]*", text) is not None


def same(a: str, b: str) -> bool:
    return number(a) == number(b)


class Axis:
    """One constant's values: drawn at random, or listed (finite) for the systematic pass."""

    def __init__(self, path: str, name: str, old: str, dim: Dim | None):
        self.path, self.name, self.old = path, name, old
        v = number(old)
        if "**" in old or (dim is not None and dim.kind == "pow2"):
            # `2**19`: powers of two, written the same way (declared exponents, else +-3)
            k = max(0, round(math.log2(max(v, 1))))
            lo, hi = ((int(dim.low).bit_length() - 1, int(dim.high).bit_length() - 1)
                      if dim is not None and dim.kind == "pow2" else (max(0, k - 3), k + 3))
            dim = Dim(name, "choices", float(2 ** lo), float(2 ** hi),
                      tuple(2 ** e for e in range(lo, hi + 1)), True)
        self.integer = (dim.integer if dim and dim.kind
                        else is_int(old) or bool(dim and dim.integer))
        self.choices: tuple = dim.choices if dim and dim.choices else ()
        low, high = (dim.low, dim.high) if dim else (-math.inf, math.inf)
        if not (math.isfinite(low) and math.isfinite(high)):   # undeclared: near its value
            if v > 0:
                near = (v / SPREAD, v * SPREAD)
            elif v < 0:
                near = (v * SPREAD, v / SPREAD)
            else:
                near = (1.0, SPREAD) if self.integer else (1e-4, 1.0)
            low, high = max(low, near[0]), min(high, near[1])
        if self.integer:
            low, high = math.ceil(low), math.floor(high)
            if v > 0 and not (dim and dim.kind):
                low = max(low, 1)                      # a positive count stays positive
        self.low, self.high = low, high
        self.log = low > 0 and (bool(dim and dim.kind == "log_range") or high / low >= 16
                                or not (dim and dim.kind))

    def text(self, x: float) -> str:
        if "**" in self.old:
            return f"2**{int(round(x)).bit_length() - 1}"
        if self.integer:
            return str(int(round(x)))
        return _format(x, self.old)

    def draw(self, rng: random.Random) -> str:
        if self.choices:
            return self.text(rng.choice(self.choices))
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        if self.integer:
            x = min(self.high, max(self.low, round(x)))
        return self.text(x)

    def grid(self) -> list[str]:
        """Every value (choices, an integer range) or an even grid (continuous), the current
        value excluded."""
        if self.choices:
            values = [self.text(c) for c in self.choices]
        elif self.integer and self.high - self.low < MAX_INT_GRID:
            values = [str(i) for i in range(int(self.low), int(self.high) + 1)]
        else:
            f = (lambda t: math.exp(math.log(self.low) + t * (math.log(self.high)
                                                          - math.log(self.low)))) \
                if self.log else (lambda t: self.low + t * (self.high - self.low))
            values = [self.text(f(i / (GRID - 1))) for i in range(GRID)]
        out: list[str] = []
        for t in values:
            if t not in out and not same(t, self.old) and self._inside(t):
                out.append(t)
        return out

    def _inside(self, t: str) -> bool:
        x = number(t)
        return self.low <= x <= self.high if not self.choices else True


def axes_of(files: dict[str, str], space: dict[str, Dim]) -> list[Axis]:
    """The settings that may move, in file order (loop/script/settings.py: module-level
    constants, a config's keys, the flags file's flags): the declared ones, else every
    UPPER_CASE constant but a seed."""
    rules = implied(files, space)
    out, seen = [], set()
    for s in settings.find_all(files):
        name = s.name
        if name in seen or (space and name not in space):
            continue                     # a declared space names what may change
        if not space and (s.kind != "constant" or not is_constant_name(name)
                          or SEED_NAME.search(name)):
            continue                     # undeclared: UPPER_CASE constants, seeds fixed
        seen.add(name)
        dim = space.get(name) or rules.get(name)
        out.append(Axis(s.path, name, s.text, dim))
    return out




def describe(changes: list[Change] | tuple) -> str:
    """`Set A to 2 (was 1) in train.py`; several: `Set A to 2 (was 1), B to 8 (was 4) in
    train.py` (one clause per file, joined by `; `)."""
    if isinstance(changes, tuple):           # the one-change form: describe(path, name, ..)
        changes = [changes]
    parts = []
    for path, group in itertools.groupby(changes, key=lambda c: c[0]):
        sets = ", ".join(f"{name} to {new} (was {old})" for _, name, old, new in group)
        parts.append(f"{sets} in {path}")
    return "Set " + "; ".join(parts)


def apply_setting(text: str, path: str, name: str, old: str, new: str) -> str:
    """The file's text with one setting changed (its value written `old` there)."""
    out = settings.write(text, path, name, new, old)
    return text if out is None else out
