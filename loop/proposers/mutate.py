"""The offline proposer: perturb one numeric hyperparameter of an editable file.

Seeded and reproducible (the same seed and iteration give the same proposal), it never
proposes a value it has already tried, and it is the random-search baseline an LLM must beat.
It proposes only points that can run: inside the task's declared `search_space` (then it
changes only the constants declared there), and always within what the code asserts
(`assert A % B == 0`) and what a name implies (betas in (0, 1), probabilities in [0, 1]).
It does not read program.md: steering it means declaring the space in task.yaml."""
from __future__ import annotations

import math
import random
import re

from loop.proposers.base import Context, Proposal
from loop.search_space import (CONSTANT, POWER, Dim, constants, implied, number, parse_space,
                                valid)

INT_FACTORS = (0.5, 0.75, 1.5, 2.0)
FLOAT_FACTORS = (0.5, 0.7, 1.4, 2.0)


def _format(value: float, like: str) -> str:
    if "e" in like.lower():
        return f"{value:.2e}".replace("e-0", "e-").replace("e+0", "e")
    return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"


def _neighbours(text: str) -> list[str]:
    """Nearby values for a constant written as `text`."""
    if "**" in text:                         # `2**19`: the next powers, written the same way
        k = int(text.split("**")[1])
        return [f"2**{e}" for e in (k - 2, k - 1, k + 1, k + 2) if e >= 0]
    if re.fullmatch(r"[-+]?\d[\d_]*", text):
        v = int(text.replace("_", ""))
        if v == 0:
            return ["1"]
        out = {str(max(1, round(v * f))) if v > 0 else str(round(v * f)) for f in INT_FACTORS}
        if abs(v) <= 3:
            out |= {str(v - 1), str(v + 1)}
        out.discard(str(v))
        return sorted(out, key=lambda s: int(s))
    v = float(text)
    if v == 0.0:
        return ["0.1", "0.01"]
    out = {_format(v * f, text) for f in FLOAT_FACTORS}
    out.discard(text)
    return sorted(out, key=float)


def candidates(files: dict[str, str], space: dict[str, Dim] | None = None
               ) -> list[tuple[str, str, str, str]]:
    """Every (file, constant name, old value, new value) this proposer could try: near the
    current value (and a declared range's bounds, a declared choice), valid points only."""
    values, rules = constants(files), implied(files)
    out, seen = [], set()
    for path in sorted(files):
        if not path.endswith(".py"):
            continue
        matches = sorted([*CONSTANT.finditer(files[path]), *POWER.finditer(files[path])],
                         key=lambda m: m.start())
        for m in matches:
            name, old = m["name"], m["value"]
            if name in seen or (space and name not in space):
                continue                     # a declared space names what may change
            seen.add(name)
            dim = (space or {}).get(name)
            for new in _options(old, dim):
                point = {**values, name: number(new)}
                if valid(point, rules) is None and valid(point, space or {}) is None:
                    out.append((path, name, old, new))
    return out


def _options(old: str, dim: Dim | None) -> list[str]:
    if dim is None or not dim.kind:
        return _neighbours(old)
    if dim.kind == "pow2":
        return _powers(old, dim)
    if dim.choices:
        found = [_text(c, dim.integer) for c in dim.choices]
    else:
        found = _neighbours(old) + [_format(b, old) for b in (dim.low, dim.high)]
        if dim.integer:
            found = [_text(round(number(v)), True) for v in found]
    unique = []
    for v in found:
        if v not in unique and not _same(v, old):
            unique.append(v)
    return sorted(unique, key=number)


def _powers(old: str, dim: Dim) -> list[str]:
    """Powers of two within the declared exponents: the two on each side of the current
    value and the bounds, written as `2**k` when the constant is written so."""
    lo, hi = int(dim.low).bit_length() - 1, int(dim.high).bit_length() - 1
    k = max(0, round(math.log2(max(number(old), 1))))
    exps = sorted({e for e in (k - 2, k - 1, k + 1, k + 2, lo, hi) if lo <= e <= hi})
    found = [f"2**{e}" if "**" in old else str(2 ** e) for e in exps]
    return [v for v in found if not _same(v, old)]


def _text(v, integer: bool) -> str:
    return str(int(v)) if integer else repr(v) if isinstance(v, float) else str(v)


def _same(a: str, b: str) -> bool:
    return number(a) == number(b)


def describe(path: str, name: str, old: str, new: str) -> str:
    return f"Set {name} to {new} (was {old}) in {path}"


class MutateProposer:
    def __init__(self, seed: int = 0):
        self.seed = seed

    def propose(self, context: Context) -> Proposal:
        tried = {a.description for a in context.history}
        space = parse_space(getattr(context.task, "search_space", None) or {}, "task.yaml")
        options = [c for c in candidates(context.files, space) if describe(*c) not in tried]
        if not options:
            return Proposal("no untried mutation left",
                            error="no untried valid value left for the numeric UPPER_CASE "
                                  "constants of the editable files"
                                  + (" in the declared search_space" if space else ""))
        rng = random.Random(f"{self.seed}:{context.seed}:{context.iteration}")
        path, name, old, new = rng.choice(options)
        text = context.files[path]
        pattern = re.compile(rf"^(?P<head>{re.escape(name)}(?:\s*(?::\s*\w+\s*)?=\s*))"
                             rf"{re.escape(old)}(?P<rest>\s*(?:#.*)?)$", re.M)
        new_text = pattern.sub(lambda m: m["head"] + new + m["rest"], text, count=1)
        return Proposal(describe(path, name, old, new), files={path: new_text})
