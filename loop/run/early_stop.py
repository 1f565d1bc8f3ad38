"""Runs that stop when they are clearly worse: a run's loss curve against the best's.

A task names its progress line (`progress_pattern`: the share of the budget done, in percent,
and the training loss) and opts in with `early_stop:` (docs/tasks.md). Every run's curve is
kept (`Curve`: the loss at each point of the budget, as a share of it); the best state's
curves make a `Band` (their mean and run-to-run sd at each point). A candidate's run is
stopped (`Watcher`) once, past the warm-up share of the budget, `lines` progress lines in a
row sit above

    mean(f) + z * sd(f) * sqrt(1 + 1/n) + margin * (mean(f) - mean(end))

(the band's prediction interval for one more run of the best, n its runs, plus a margin as a
share of what the best's loss still falls from there to the end: other code can start slower
and finish better, and such a lag shrinks as the run nears its end, as the remaining fall
does). Lower loss is better. A change to the schedule's own constants
(`is_schedule_change`) is never stopped: the curve's shape moves with them.

`early_stop:` as task.yaml gives it is read at load (loop/setup/stop_settings.py). Pure
data and arithmetic, no I/O: the rule travels with a run (to a Ray node too) and is
checked on the thread reading its output (loop/run/capture.py)."""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from statistics import fmean, stdev

from loop.setup.stop_settings import Settings

GRID = 40                   # a curve is kept as its last point in each 1/GRID of the budget

Curve = list[list[float]]   # [[share of the budget, loss], ...], shares ascending


# -- curves -----------------------------------------------------------------------------------

def thin(points: list[tuple[float, float]]) -> Curve:
    """The last point in each 1/GRID of the budget: a curve small enough to journal."""
    kept: dict[int, list[float]] = {}
    for f, loss in points:
        if math.isfinite(loss):
            kept[min(GRID, int(f * GRID))] = [round(f, 4), loss]
    return [kept[b] for b in sorted(kept)]


def progress_line(curve: Curve) -> str:
    """What check-task says of a run's curve: whether `progress_pattern` read anything."""
    if not curve:
        return ("progress_pattern: no progress line matched the run's output: no loss curve, "
                "so early_stop would never stop a run")
    (f0, y0), (f1, y1) = curve[0], curve[-1]
    return (f"progress_pattern: a loss curve of {len(curve)} points, from {f0:.0%} of the "
            f"budget (loss {y0:.4g}) to {f1:.0%} (loss {y1:.4g})")


def at(curve: Curve, f: float) -> float | None:
    """The curve's loss at share f, linear between its points; None outside them."""
    if not curve or f < curve[0][0] or f > curve[-1][0]:
        return None
    for (f0, y0), (f1, y1) in zip(curve, curve[1:]):
        if f0 <= f <= f1:
            return y0 if f1 == f0 else y0 + (y1 - y0) * (f - f0) / (f1 - f0)
    return curve[-1][1]


@dataclass(frozen=True)
class Band:
    """The best's curves at each grid point: (share, mean, sd, runs)."""
    points: tuple[tuple[float, float, float, int], ...]

    @classmethod
    def of(cls, curves: list[Curve], min_runs: int = 2) -> Band | None:
        curves = [c for c in curves if c]
        if len(curves) < max(2, min_runs):
            return None
        points = []
        for i in range(1, GRID + 1):
            f = i / GRID
            ys = [y for y in (at(c, f) for c in curves) if y is not None]
            if len(ys) >= max(2, min_runs):
                points.append((f, fmean(ys), stdev(ys), len(ys)))
        return cls(tuple(points)) if points else None

    def near(self, f: float) -> tuple[float, float, int] | None:
        """(mean, sd, runs) at f, linear between grid points (a loss falls steeply early:
        the point below would be a stale mean); None outside the band."""
        for lo, hi in zip(self.points, self.points[1:]):
            if lo[0] <= f <= hi[0]:
                w = (f - lo[0]) / (hi[0] - lo[0])
                return (lo[1] + w * (hi[1] - lo[1]), lo[2] + w * (hi[2] - lo[2]),
                        min(lo[3], hi[3]))
        last = self.points[-1]
        return last[1:] if abs(f - last[0]) < 1e-9 else None


# -- the rule ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class StopRule:
    """What a candidate's run is held to: the best's band and the task's settings."""
    band: Band
    settings: Settings

    def line(self, f: float) -> tuple[float, float, float] | None:
        """(limit, mean, sd) at share f: above the limit the run is clearly worse there."""
        near = self.band.near(f)
        if near is None or f < self.settings.warmup:
            return None
        mean, sd, n = near
        s = self.settings
        still = max(0.0, mean - self.band.points[-1][1])    # what the best still loses by
        return mean + s.z * sd * math.sqrt(1 + 1 / n) + s.margin * still, mean, sd


@dataclass
class Watcher:
    """One run's progress lines: its curve, and the stop reason once the rule says so.
    Called on the thread that reads the run's output (capture.py), one match at a time."""
    pattern: re.Pattern
    budget_s: float
    rule: StopRule | None = None
    points: list[tuple[float, float]] = field(default_factory=list)
    over: int = 0
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def make(cls, pattern: str, budget_s: float, rule: StopRule | None) -> Watcher:
        return cls(re.compile(pattern, re.M), budget_s, rule)

    def read(self, match: re.Match) -> tuple[float, float] | None:
        """(share of the budget, loss) from a progress line: the groups `progress` (percent)
        and `loss`, else the last two groups; no progress group: the time since start."""
        names = self.pattern.groupindex
        try:
            if "loss" in names:
                loss = float(match.group("loss"))
                pct = match.group("progress") if "progress" in names else None
            else:
                last = self.pattern.groups
                pct, loss = match.group(last - 1), float(match.group(last))
            f = float(pct) / 100 if pct is not None else \
                (time.monotonic() - self.started) / self.budget_s
        except (TypeError, ValueError, IndexError):
            return None
        return (f, loss) if math.isfinite(f) else None

    def see(self, match: re.Match) -> str | None:
        """A progress line: its point joins the curve; the reason to stop, or None."""
        point = self.read(match)
        return None if point is None else self.see_point(*point)

    def see_point(self, f: float, loss: float) -> str | None:
        """A point of the curve (benchmarks/early_stop.py feeds simulated ones here)."""
        self.points.append((f, loss))
        line = self.rule.line(f) if self.rule else None
        if line is None or not loss > line[0]:     # a NaN loss is the divergence check's
            self.over = 0
            return None
        self.over += 1
        if self.over < self.rule.settings.lines:   # type: ignore[union-attr]
            return None
        _, mean, sd = line
        return (f"stopped at {f:.0%} of its budget: loss {loss:.4g} vs the best's "
                f"{mean:.4g} ± {sd:.2g} there")

    def curve(self) -> Curve:
        return thin(self.points)


# -- which changes are never stopped --------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def words_of(identifier: str) -> list[str]:
    """`FINAL_LR_FRAC` -> final, lr, frac; `warmupSteps` -> warmup, steps."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", identifier)
    return [w.lower() for w in spaced.split("_") if w]


def schedule_names(patch: str, settings: Settings) -> list[str]:
    """The schedule's constants a diff's changed lines name (empty: not a schedule change):
    an identifier listed in `schedule`, or one with a word of `schedule_words`."""
    named = set(settings.schedule)
    words = set(settings.schedule_words)
    found: list[str] = []
    for line in patch.splitlines():
        if line[:1] not in ("+", "-") or line.startswith(("+++", "---")):
            continue
        for ident in _IDENT.findall(line[1:].split("#", 1)[0]):
            if (ident in named or words.intersection(words_of(ident))) and ident not in found:
                found.append(ident)
    return found
