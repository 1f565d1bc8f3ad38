"""The offline proposer: perturb one numeric hyperparameter of an editable file.

Seeded and reproducible (the same seed and iteration give the same proposal), it never
proposes a value it has already tried, and it is the random-search baseline an LLM must beat."""
from __future__ import annotations

import random
import re

from loop.proposers.base import Context, Proposal

# An UPPER_CASE module-level constant assigned a plain number, e.g. `LEARNING_RATE = 3e-3  # ..`
CONSTANT = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)(?P<eq>\s*(?::\s*\w+\s*)?=\s*)"
                      r"(?P<value>[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
                      r"(?P<rest>\s*(?:#.*)?)$", re.M)
INT_FACTORS = (0.5, 0.75, 1.5, 2.0)
FLOAT_FACTORS = (0.5, 0.7, 1.4, 2.0)


def _format(value: float, like: str) -> str:
    if "e" in like.lower():
        return f"{value:.2e}".replace("e-0", "e-").replace("e+0", "e")
    return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"


def _neighbours(text: str) -> list[str]:
    """Nearby values for a constant written as `text`."""
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


def candidates(files: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """Every (file, constant name, old value, new value) this proposer could try."""
    out = []
    for path in sorted(files):
        if not path.endswith(".py"):
            continue
        for m in CONSTANT.finditer(files[path]):
            for new in _neighbours(m["value"]):
                out.append((path, m["name"], m["value"], new))
    return out


def describe(path: str, name: str, old: str, new: str) -> str:
    return f"Set {name} to {new} (was {old}) in {path}"


class MutateProposer:
    def __init__(self, seed: int = 0):
        self.seed = seed

    def propose(self, context: Context) -> Proposal:
        tried = {a.description for a in context.history}
        options = [c for c in candidates(context.files) if describe(*c) not in tried]
        if not options:
            return Proposal("no untried mutation left",
                            error="no numeric UPPER_CASE constant left to perturb in the "
                                  "editable files")
        rng = random.Random(f"{self.seed}:{context.seed}:{context.iteration}")
        path, name, old, new = rng.choice(options)
        text = context.files[path]
        pattern = re.compile(rf"^(?P<head>{re.escape(name)}(?:\s*(?::\s*\w+\s*)?=\s*))"
                             rf"{re.escape(old)}(?P<rest>\s*(?:#.*)?)$", re.M)
        new_text = pattern.sub(lambda m: m["head"] + new + m["rest"], text, count=1)
        return Proposal(describe(path, name, old, new), files={path: new_text})
