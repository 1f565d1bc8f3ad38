"""What every rule shares: the verdict, the strict rule, and the pieces of the t test."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean

from loop.judge.stats import pooled_sd, t_cdf
from loop.words import Status

# a verdict's action: keep and discard are also the statuses they give (plain strings)
KEEP, DISCARD, RERUN = Status.KEEP.value, Status.DISCARD.value, "rerun"


@dataclass
class Verdict:
    action: str                                  # keep | discard | rerun
    reason: str                                  # short, for results.tsv and the commit
    stats: dict[str, float] = field(default_factory=dict)  # the numbers behind it (MLflow)
    # With `rerun`: how many more runs of the candidate the judge wants (the engine runs
    # fewer when fewer slots are free, at least one), and whether each is `paired`: a run
    # of the best right BEFORE it, handed back as the pair (candidate value, best value).
    runs: int = 0
    paired: bool = False


def improvement(candidate: float, best: float, direction: str) -> float:
    """Positive when candidate is better than best in the metric's direction; 0 for a
    difference within float rounding of them (the means of equal runs: no +1.11e-16 gain)."""
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"direction must be minimize or maximize, got {direction!r}")
    gain = best - candidate if direction == "minimize" else candidate - best
    return 0.0 if abs(gain) <= ROUNDING * max(abs(candidate), abs(best)) else gain


ROUNDING = 1e-12   # relative: far above a mean's float error, far below any measured change


def strict(candidate: list[float], best: list[float], direction: str,
           min_delta: float = 0.0) -> Verdict:
    """karpathy/autoresearch's rule: keep iff strictly better by more than min_delta."""
    cand, ref = fmean(candidate), fmean(best)
    delta = improvement(cand, ref, direction)
    stats = {"candidate_mean": cand, "best_mean": ref, "gain": delta,
             "threshold": min_delta, "candidate_runs": len(candidate), "best_runs": len(best)}
    if delta > min_delta:
        return Verdict(KEEP, f"better by {delta:.6g} (> {min_delta:g})", stats)
    if delta == 0:
        return Verdict(DISCARD, "no change in metric", stats)
    if delta > 0:
        return Verdict(DISCARD, f"better by only {delta:.6g} (<= min_delta {min_delta:g})", stats)
    return Verdict(DISCARD, f"worse by {-delta:.6g}", stats)


def unknown_noise(cand: list[float], ref: list[float], direction: str, config, stats: dict,
                  again: Verdict | None, why: str = "") -> Verdict:
    """No state has been run twice yet, so the noise is unknown: `again` (another run) while
    one is allowed, else the strict rule on what there is."""
    if again is not None:
        return again
    v = strict(cand, ref, direction, config.min_delta)
    v.reason = f"noise unknown, strict rule{', ' + why if why else ''}: {v.reason}"
    v.stats = {**stats, **v.stats}
    return v


def t_test(delta: float, sd: float, n_a: int, n_b: int, df: int | None,
           stats: dict) -> tuple[float, float]:
    """One-sided test that a mean of `n_a` runs beats a mean of `n_b` by `delta` (positive =
    better), noise `sd` with `df` degrees of freedom (None: known exactly). Returns (se, p)
    and records noise_sd, t, p_value, se and noise_df in `stats`."""
    se = sd * math.sqrt(1.0 / n_a + 1.0 / n_b)
    t = delta / se if se > 0 else math.copysign(math.inf, delta) if delta else 0.0
    p = 1.0 - t_cdf(t, df)
    stats.update(noise_sd=sd, t=t, p_value=p, se=se)
    if df is not None:
        stats["noise_df"] = df
    return se, p


def bar(config, sd: float, net: int, t_crit: float, se: float,
        stats: dict) -> tuple[float, float]:
    """(margin, threshold) for a change of `net` added lines: the gain must beat `t_crit`
    standard errors plus `simplicity_weight` noise sd per added line plus `min_delta`."""
    margin = config.simplicity_weight * sd * net + config.min_delta
    threshold = t_crit * se + margin
    stats["threshold"] = threshold
    return margin, threshold


def fmt(delta: float, p: float) -> str:
    return f"gain {delta:+.4g}, p={p:.3g}"   # gain: positive = better (loop/ui/status.py)


def own_noise(candidate, best, noise_sd, noise_df) -> tuple[float | None, int | None]:
    """The noise sd and its df: the external estimate pooled with the candidate's own runs;
    without an external one, the spread of the candidate's and the best's own runs."""
    if noise_sd is None:
        sd, df = pooled_sd([candidate, best])
        return (sd, df) if sd is not None else (None, None)
    own_sd, own_df = pooled_sd([candidate])
    if own_sd is None or noise_df is None:       # nothing to add, or noise known exactly
        return noise_sd, noise_df
    df = noise_df + own_df
    return math.sqrt((noise_sd ** 2 * noise_df + own_sd ** 2 * own_df) / df), df
