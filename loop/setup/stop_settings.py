"""A task's `early_stop:` and `progress_pattern`, as task.yaml gives them: read into
`Settings`, or refused in one line at load. The rule that uses them is loop/run/early_stop.py.
Pure."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# words of identifiers that set the schedule (the LR schedule, warm-up, the budget):
# `WARMUP_FRAC`, `FINAL_LR_FRAC`, `lr`, `warmdown_ratio`, `TIME_BUDGET`, `num_steps`
SCHEDULE_WORDS = ("lr", "lrs", "learning", "warmup", "warmdown", "cooldown", "decay",
                  "schedule", "scheduler", "anneal", "budget", "steps", "iters", "epochs")
KEYS = ("warmup", "z", "margin", "lines", "min_best_runs", "schedule", "schedule_words")


@dataclass(frozen=True)
class Settings:
    """`early_stop:` in task.yaml."""
    warmup: float = 0.3         # no stop before this share of the budget
    z: float = 3.0              # sds of the best's runs the loss may sit above their mean
    margin: float = 0.1         # and this share of the best's remaining fall, on top
    lines: int = 3              # consecutive progress lines above the line before a stop
    min_best_runs: int = 2      # the best's curves needed to know their spread
    schedule: tuple[str, ...] = ()      # more constants whose change is never stopped
    schedule_words: tuple[str, ...] = SCHEDULE_WORDS


def parse_settings(value, where: str) -> Settings | None:
    """`early_stop:` (absent/false: off; true or a mapping: on) -> Settings. Raises
    ValueError with one line."""
    if value is None or value is False:
        return None
    if value is True:
        return Settings()
    if not isinstance(value, dict):
        raise ValueError(f"{where}: early_stop must be true or a mapping such as "
                         f"{{warmup: 0.3, z: 3}}, got {value!r}")
    unknown = [k for k in value if k not in KEYS]
    if unknown:
        raise ValueError(f"{where}: early_stop: unknown key '{unknown[0]}'; allowed: "
                         f"{', '.join(KEYS)}")
    got = dict(value)
    for key in ("warmup", "z", "margin"):
        if key in got and (isinstance(got[key], bool) or not isinstance(got[key], (int, float))
                           or not math.isfinite(got[key]) or got[key] < 0):
            raise ValueError(f"{where}: early_stop.{key} must be a number >= 0")
        if key in got:
            got[key] = float(got[key])
    if not got.get("warmup", 0.3) < 1:
        raise ValueError(f"{where}: early_stop.warmup is a share of the budget, below 1")
    for key in ("lines", "min_best_runs"):
        if key in got and (isinstance(got[key], bool) or not isinstance(got[key], int)
                           or got[key] < 1):
            raise ValueError(f"{where}: early_stop.{key} must be a whole number >= 1")
    for key in ("schedule", "schedule_words"):
        if key in got:
            names = got[key]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"{where}: early_stop.{key} must be a list of names")
            got[key] = tuple(n.lower() if key == "schedule_words" else n for n in names)
    return Settings(**got)


def check_pattern(pattern: str) -> str:
    """Why `progress_pattern` cannot be read ("" when it can): it needs the loss, as the
    group `loss` or the last of two groups."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return f"is not a valid regex: {exc}"
    if "loss" not in regex.groupindex and regex.groups < 2:
        return ("needs a group named loss (and progress, the percent of the budget done), "
                "or two groups: the percent done, then the loss")
    return ""
