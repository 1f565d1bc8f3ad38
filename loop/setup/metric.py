"""A task's metric: its name, its direction, and the pattern that reads it from a run's output
(default: a line `<name>: <number>`); and the pattern of `throughput_pattern`. Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass

DIRECTIONS = ("minimize", "maximize")
# a number as printed, thousands separators read whole (`{:,.0f}` prints `18,450`: 18450, not 18)
NUMBER = (r"([-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.?\d*(?:[eE][-+]?\d+)?"
          r"|\.\d+(?:[eE][-+]?\d+)?|nan|inf|infinity))")


@dataclass(frozen=True)
class Metric:
    name: str
    direction: str = "minimize"
    pattern: str = ""  # regex with one group; default: a line "<name>: <number>"

    def __post_init__(self):
        if not self.pattern:
            object.__setattr__(self, "pattern",
                               rf"^\s*{re.escape(self.name)}\s*[:=]\s*{NUMBER}\s*$")

    def better(self, a: float, b: float) -> bool:
        """True when a is strictly better than b in this metric's direction."""
        return a < b if self.direction == "minimize" else a > b

    def improvement(self, candidate: float, best: float) -> float:
        """How much better candidate is than best (positive = better), direction-aware."""
        return best - candidate if self.direction == "minimize" else candidate - best


def throughput_regex(pattern: str) -> str:
    """`num_steps`, `num_steps:` or a regex with one group -> the regex."""
    if not pattern or re.fullmatch(r"[A-Za-z_][\w.]*\s*[:=]?", pattern.strip()):
        name = pattern.strip().rstrip(":=").strip()
        return rf"^\s*{re.escape(name)}\s*[:=]\s*{NUMBER}" if name else ""
    return pattern
