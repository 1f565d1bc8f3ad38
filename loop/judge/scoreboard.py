"""What the loop knows of its measurements: the best state's runs, every state's runs (for
the noise estimate), the noise measured within one period (drift-proof, for the paired
judge) and how long ago the best was last run. Built the same way live and
when replaying the journal on resume, so the two can never disagree."""
from __future__ import annotations

import math
from statistics import fmean

from loop.judge import judge as judging
from loop.record import Record
from loop.judge.stats import pooled_sd
from loop.words import BASELINE


class Scoreboard:
    def __init__(self):
        self.best: Record | None = None
        self.best_samples: list[float] = []     # every run of the best state (one of history)
        self.best_curves: list[list] = []       # their loss curves over the budget, where the
                                                # task prints them (the early-stop band)
        self.history: list[list[float]] = []    # the runs of every code state measured
        self.since_best_run = 0                 # proposals since the best was last run
        self.period_noise: list[tuple[float, int]] = []  # (ss, df) of runs made in one
                                                # period: the baseline, each paired candidate
        self.kept = 0                           # keeps, the baseline included
        self.speed_moved = False                # two candidates in a row ran faster (or
                                                # slower) than the best beyond noise: the
                                                # machine, not their code; refresh the best
        self.last_move = 0                      # the previous candidate's: +1, -1 or 0
        self.throughput_history: list[list[float]] = []  # per state, its runs' throughput

    def add(self, rec: Record) -> None:
        """A finished iteration."""
        if rec.description != BASELINE and not rec.kept:
            self.note_speed(rec)
        if rec.samples:
            self.history.append(rec.samples)
        if rec.description == BASELINE and len(rec.samples) > 1:
            self.period_noise.append(judging.back_to_back(list(rec.samples)))
        if [x for x in rec.throughput if x is not None]:
            self.throughput_history.append([x for x in rec.throughput if x is not None])
        if rec.pairs:
            self.period_noise.append(judging.period_residuals(rec.samples[0], rec.pairs))
        if rec.kept:
            # a copy: re-runs of the best are not the record's runs
            self.best, self.best_samples = rec, list(rec.samples)
            self.best_curves = [c for c in rec.curves if c]
            self.kept += 1
            self.since_best_run = 0
            self.speed_moved, self.last_move = False, 0
        elif rec.description != BASELINE:
            self.since_best_run += 1

    def note_speed(self, rec: Record) -> None:
        """Two candidates in a row whose throughput moved the same way beyond its noise:
        one code change can do that, two in a row are the machine's speed (a wall-clock
        budget then moves the metric of every state alike)."""
        seen: dict = {}
        move = 0
        if self.throughput_shift(rec, seen):
            move = 1 if seen["throughput"] > seen["throughput_best"] else -1
        if move and move == self.last_move:
            self.speed_moved = True
        self.last_move = move

    def remeasured(self, value: float | None, curve: list | None = None) -> None:
        """The best state was run once more (value None: that run failed)."""
        if value is not None:
            self.best_samples.append(value)
            if curve:
                self.best_curves.append(curve)
            self.speed_moved, self.last_move = False, 0
        self.since_best_run = 0

    def best_value(self) -> float | None:
        return judging.best_value(self.best_samples) if self.best_samples else None

    def best_runs_wanted(self, config) -> int:
        """Runs of the best to make before the next proposal (0: none)."""
        if self.best is None:
            return 0
        return judging.best_runs_wanted(self.best_samples, config, self.since_best_run,
                                        judging.estimate_noise(self.history),
                                        self.speed_moved)

    def judge(self, rec: Record, direction: str, config) -> judging.Verdict:
        v = judging.judge(rec.samples, self.best_samples, direction, config,
                          rec.lines_added, rec.lines_removed,
                          noise_sd=judging.estimate_noise(self.history),
                          noise_df=judging.noise_df(self.history),
                          pairs=rec.pairs, period_noise=self.period_noise)
        note = self.throughput_shift(rec, v.stats)
        if note:
            v.reason += f"; warning: {note}"
        return v

    def throughput_shift(self, rec: Record, stats: dict) -> str | None:
        """Whether the candidate's throughput (e.g. training steps in a wall-clock budget)
        moved from the best's by more than its run-to-run noise: then the machine's speed,
        not only the code, may be behind the metric. Never when repeated runs of one code
        state always had the same throughput (tinylm's work budget on a CPU: steps are the
        code's, not the machine's). Adds `throughput_*` to `stats`."""
        cand = [x for x in rec.throughput if x is not None]
        best = [x for x in (self.best.throughput if self.best else []) if x is not None]
        if not cand or not best:
            return None
        c, b = fmean(cand), fmean(best)
        sd, df = pooled_sd(self.throughput_history + [cand])
        stats.update(throughput=c, throughput_best=b)
        if df and not sd:   # the same every run: a budget of work, which the machine's speed
            return None     # cannot move; a change in it is the code's own cost
        if sd:
            se = sd * math.sqrt(1 / len(cand) + 1 / len(best))
            stats["throughput_z"] = (c - b) / se
            moved = abs(c - b) > 3 * se
        else:                                   # no repeated runs yet: a 10% move
            moved = abs(c - b) > 0.1 * abs(b)
        if not moved:
            return None
        change = f" ({(c - b) / b:+.0%} vs the best)" if b else ""
        return (f"throughput {b:.4g} -> {c:.4g}{change}, beyond its "
                f"noise: with a wall-clock budget the metric follows the machine's speed too")
