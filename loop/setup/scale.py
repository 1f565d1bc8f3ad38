"""A task's `scale:` key: what "at scale" means for `finalize`, which re-measures the
finalized branch against the night's start there (loop/finalize/scale.py) and says whether
the night's gain held, shrank or reversed. Pure: the key's value in, a ScaleSpec out.

    scale: 4                   # four times the night's time box
    scale:
      time_budget: 4           # times the night's time box (default 1)
      settings: {DEPTH: 12}    # a larger model: these settings of the editable files, set
                               # in both versions for the scaled runs

`finalize --scale K` sets the time factor (over the key's)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from loop.errors import TaskError

KEYS = ("time_budget", "settings")


@dataclass(frozen=True)
class ScaleSpec:
    factor: float = 1.0                                   # times the night's time box
    settings: dict[str, str] = field(default_factory=dict)   # setting -> value as written

    def label(self) -> str:
        """`x4`, `x4 DEPTH=12`, `DEPTH=12`: the scale in a few characters."""
        parts = [f"x{self.factor:g}"] if self.factor != 1.0 else []
        parts += [f"{name}={value}" for name, value in self.settings.items()]
        return " ".join(parts)


def parse(value: Any, where: str) -> ScaleSpec | None:
    """The task's `scale:` (None: the key is absent); TaskError naming the key otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        value = {"time_budget": value}
    unknown = sorted(set(map(str, value)) - set(KEYS))
    if unknown:
        raise TaskError(f"{where}: scale: unknown key '{unknown[0]}' (known: "
                        f"{', '.join(KEYS)})")
    factor = factor_of(value.get("time_budget", 1.0), f"{where}: scale.time_budget")
    settings = value.get("settings") or {}
    if not isinstance(settings, dict):
        raise TaskError(f"{where}: scale.settings must map setting names to numbers, e.g. "
                        f"{{DEPTH: 12}}")
    for name, v in settings.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise TaskError(f"{where}: scale.settings.{name} must be a number, got {v!r}")
    if factor == 1.0 and not settings:
        raise TaskError(f"{where}: scale names neither a larger time box (time_budget: K) nor "
                        f"settings: nothing would be at scale")
    return ScaleSpec(factor, {str(k): str(v) for k, v in settings.items()})


def factor_of(value: Any, what: str) -> float:
    """A time factor: a finite number > 0 (ValueError-free: TaskError naming `what`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (math.isfinite(value) and value > 0):
        raise TaskError(f"{what} must be a finite number > 0 (times the time box), got "
                        f"{value!r}")
    return float(value)
