"""What the loop knows of its measurements: the best state's runs, every state's runs (for
the noise estimate), the noise measured within one period (drift-proof, for the paired
judge) and how long ago the best was last run. Built the same way live and
when replaying the journal on resume, so the two can never disagree."""
from __future__ import annotations

from loop import judge as judging
from loop.journal import Record

BASELINE = "baseline (unmodified code)"


class Scoreboard:
    def __init__(self):
        self.best: Record | None = None
        self.best_samples: list[float] = []     # every run of the best state (one of history)
        self.history: list[list[float]] = []    # the runs of every code state measured
        self.since_best_run = 0                 # proposals since the best was last run
        self.period_noise: list[tuple[float, int]] = []  # (ss, df) of runs made in one
                                                # period: the baseline, each paired candidate
        self.kept = 0                           # keeps, the baseline included

    def add(self, rec: Record) -> None:
        """A finished iteration."""
        if rec.samples:
            self.history.append(rec.samples)
        if rec.description == BASELINE and len(rec.samples) > 1:
            self.period_noise.append(judging.back_to_back(list(rec.samples)))
        if rec.pairs:
            self.period_noise.append(judging.period_residuals(rec.samples[0], rec.pairs))
        if rec.kept:
            self.best, self.best_samples = rec, rec.samples
            self.kept += 1
            self.since_best_run = 0
        elif rec.description != BASELINE:
            self.since_best_run += 1

    def remeasured(self, value: float | None) -> None:
        """The best state was run once more (value None: that run failed)."""
        if value is not None:
            self.best_samples.append(value)
        self.since_best_run = 0

    def best_value(self) -> float | None:
        return judging.best_value(self.best_samples) if self.best_samples else None

    def needs_remeasure(self, config) -> bool:
        return self.best is not None and judging.should_remeasure_best(
            self.best_samples, config, self.since_best_run)

    def judge(self, rec: Record, direction: str, config) -> judging.Verdict:
        return judging.judge(rec.samples, self.best_samples, direction, config,
                             rec.lines_added, rec.lines_removed,
                             noise_sd=judging.estimate_noise(self.history),
                             noise_df=judging.noise_df(self.history),
                             pairs=rec.pairs, period_noise=self.period_noise)
