"""The decision: keep a candidate or not, and why. Pure: no I/O, no git, no MLflow.

Two rules (`JudgeConfig.rule`):

- `strict` (karpathy/autoresearch): one run per state, keep iff better by > min_delta.
  On a noisy metric it keeps about half of all changes that do nothing.
- `noise` (default): a one-sided Student-t test of the candidate's mean against the best's
  mean, with the run-to-run noise measured from repeated runs of the same code states.
  Significant with R = `baseline_runs` runs -> keep (a would-be keep with fewer runs is
  re-run first, so the new best is measured R times and those runs also test it);
  plausibly better (p < `plausible_p`) but not significant -> `rerun`, until the candidate
  has 1 + `confirm_runs` runs; otherwise discard. Simplicity: each net added line raises
  the bar by `simplicity_weight` noise sd; a net deletion is kept when the metric stays
  within noise. Defaults tuned with benchmarks/false_keeps.py (false keeps <= 2%).

The protocol the engine follows (benchmarks/false_keeps.py runs exactly this). Every run
gets a fresh seed in $AUTORESEARCH_SEED, so repeated runs of one state measure the noise.
`history` is the list of sample lists of every code state measured so far (the baseline,
each kept state, each discarded candidate); the current `best` is one of them (the same
list object, so its re-measurements count), the candidate under judgement is not.

    best = [run()]                                   # baseline: R runs, new seed each
    while should_remeasure_best(best, cfg): best.append(run())
    history, since = [best], 0
    for each proposal (its diff has `added` / `removed` lines):
        if should_remeasure_best(best, cfg, since): best.append(run()); since = 0
        candidate = [run()]
        while True:                                  # noise refreshed at every call
            v = judge(candidate, best, direction, cfg, added, removed,
                      noise_sd=estimate_noise(history), noise_df=noise_df(history))
            if v.action != RERUN: break
            candidate.append(run())
        history.append(candidate); since += 1
        if v.action == KEEP:                         # commit; the candidate is the new best
            best, since = candidate, 0
            while should_remeasure_best(best, cfg): best.append(run())  # only if R > 1 + C

The best's value is always `best_value(best)`, the MEAN of all its samples: a best kept on
a lucky draw is corrected as its re-measurements (`remeasure_every`) drift back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean

from loop.stats import pooled_sd, t_cdf, t_ppf

KEEP, DISCARD, RERUN = "keep", "discard", "rerun"


@dataclass
class Verdict:
    action: str                                  # keep | discard | rerun
    reason: str                                  # short, for results.tsv and the commit
    stats: dict[str, float] = field(default_factory=dict)  # the numbers behind it (MLflow)


def judge(candidate: list[float], best: list[float], direction: str, config,
          lines_added: int = 0, lines_removed: int = 0,
          noise_sd: float | None = None, noise_df: int | None = None) -> Verdict:
    """Decide on a candidate from its metric samples against the best state's samples.

    `noise_sd`/`noise_df`: the run-to-run noise measured on other states (see
    `estimate_noise`); None = unknown. `noise_df=None` with a known sd = known exactly."""
    if not candidate or not best:
        raise ValueError("judge needs at least one sample of the candidate and of the best")
    if config.rule == "strict":
        return strict(candidate, best, direction, config.min_delta)
    if config.rule == "noise":
        return noise_aware(candidate, best, direction, config, lines_added, lines_removed,
                           noise_sd, noise_df)
    raise ValueError(f"unknown judge rule {config.rule!r}")


def improvement(candidate: float, best: float, direction: str) -> float:
    """Positive when candidate is better than best in the metric's direction."""
    if direction not in ("minimize", "maximize"):
        raise ValueError(f"direction must be minimize or maximize, got {direction!r}")
    return best - candidate if direction == "minimize" else candidate - best


def strict(candidate: list[float], best: list[float], direction: str,
           min_delta: float = 0.0) -> Verdict:
    """karpathy/autoresearch's rule: keep iff strictly better by more than min_delta."""
    cand, ref = fmean(candidate), fmean(best)
    delta = improvement(cand, ref, direction)
    stats = {"candidate_mean": cand, "best_mean": ref, "delta": delta,
             "threshold": min_delta, "candidate_runs": len(candidate), "best_runs": len(best)}
    if delta > min_delta:
        return Verdict(KEEP, f"better by {delta:.6g} (> {min_delta:g})", stats)
    if delta == 0:
        return Verdict(DISCARD, "no change in metric", stats)
    if delta > 0:
        return Verdict(DISCARD, f"better by only {delta:.6g} (<= min_delta {min_delta:g})", stats)
    return Verdict(DISCARD, f"worse by {-delta:.6g}", stats)


def noise_aware(candidate: list[float], best: list[float], direction: str, config,
                lines_added: int = 0, lines_removed: int = 0,
                noise_sd: float | None = None, noise_df: int | None = None) -> Verdict:
    """The `noise` rule. With sd the noise and se = sd * sqrt(1/n_cand + 1/n_best):

    - t = delta / se, p = P(T_df > t): the one-sided test of "the candidate is better".
    - net = lines_added - lines_removed. If net >= 0, the bar is
      t_crit(confidence, df) * se + simplicity_weight * sd * net + min_delta.
    - If net < 0 (simpler code), the bar is -se: the metric within one standard error of
      the best (not worse beyond noise) -> "simpler, metric within noise".
    - Above the bar: keep once the candidate has min(R, 1 + confirm_runs) runs, else rerun.
    - Below it but plausible (p < plausible_p after the line margin; for a deletion: not
      significantly worse) and fewer than 1 + confirm_runs runs -> rerun. Else discard.
    - Unknown noise (no repeated state yet): rerun while allowed, then the strict rule."""
    cand, ref = fmean(candidate), fmean(best)
    delta = improvement(cand, ref, direction)
    n_c, n_b = len(candidate), len(best)
    net = lines_added - lines_removed
    can_rerun = n_c < 1 + config.confirm_runs
    sd, df = _noise(candidate, best, noise_sd, noise_df)
    stats = {"candidate_mean": cand, "best_mean": ref, "delta": delta,
             "candidate_runs": n_c, "best_runs": n_b, "net_lines_added": net}
    if sd is None:                               # not one repeated state anywhere yet
        if can_rerun:
            return Verdict(RERUN, "noise unknown: re-running the candidate", stats)
        v = strict(candidate, best, direction, config.min_delta)
        v.reason, v.stats = f"noise unknown, strict rule: {v.reason}", {**stats, **v.stats}
        return v
    se = sd * math.sqrt(1.0 / n_c + 1.0 / n_b)
    t = delta / se if se > 0 else math.copysign(math.inf, delta) if delta else 0.0
    p = 1.0 - t_cdf(t, df)
    t_crit = t_ppf(config.confidence, df)
    stats.update(noise_sd=sd, t=t, p_value=p, se=se)
    if df is not None:                           # None: noise known exactly
        stats["noise_df"] = df
    confirmed = n_c >= min(config.baseline_runs, 1 + config.confirm_runs)
    if net < 0:                                  # simpler code: equal is good enough
        threshold = -se
        stats["threshold"] = threshold
        if delta >= threshold and not confirmed:
            return Verdict(RERUN, f"simpler, within noise so far ({_fmt(delta, p)}): "
                                  f"confirming", stats)
        if delta >= threshold:
            why = "better and simpler" if delta > t_crit * se else "simpler, metric within noise"
            return Verdict(KEEP, f"{why} ({_fmt(delta, p)}, {-net} lines fewer)", stats)
        if delta > -t_crit * se and can_rerun:
            return Verdict(RERUN, f"simpler, maybe worse ({_fmt(delta, p)}): re-running", stats)
        return Verdict(DISCARD, f"simpler but worse ({_fmt(delta, p)})", stats)
    margin = config.simplicity_weight * sd * net + config.min_delta
    threshold = t_crit * se + margin
    stats["threshold"] = threshold
    if delta > threshold and not confirmed:
        return Verdict(RERUN, f"better beyond noise so far ({_fmt(delta, p)}): confirming",
                       stats)
    if delta > threshold:
        return Verdict(KEEP, f"better beyond noise ({_fmt(delta, p)}, bar {threshold:.4g})",
                       stats)
    plausible = delta - margin > t_ppf(1.0 - config.plausible_p, df) * se
    if plausible and can_rerun:
        return Verdict(RERUN, f"maybe better ({_fmt(delta, p)}, bar {threshold:.4g}): "
                              f"re-running", stats)
    if delta > 0:
        extra = f", +{net} lines" if margin > config.min_delta else ""
        return Verdict(DISCARD, f"gain within noise ({_fmt(delta, p)}, bar {threshold:.4g}"
                                f"{extra})", stats)
    return Verdict(DISCARD, f"not better ({_fmt(delta, p)})", stats)


def _fmt(delta: float, p: float) -> str:
    return f"gain {delta:+.4g}, p={p:.3g}"   # gain: positive = better (loop/status.py)


def _noise(candidate, best, noise_sd, noise_df) -> tuple[float | None, int | None]:
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


def estimate_noise(groups: list[list[float]]) -> float | None:
    """Pooled within-group standard deviation of repeated runs of the same code states
    (baseline runs, confirmation runs, re-measurements of kept states); None when no
    group has 2+ samples. Its degrees of freedom: `noise_df(groups)`."""
    return pooled_sd(groups)[0]


def noise_df(groups: list[list[float]]) -> int | None:
    """Degrees of freedom of `estimate_noise(groups)`: sum of (len - 1) over the groups."""
    return pooled_sd(groups)[1] or None


def best_value(samples: list[float]) -> float:
    """The best state's value: the mean of ALL its runs, so a lucky first draw is corrected
    as re-measurements come in."""
    return fmean(samples)


def should_remeasure_best(best_samples: list[float], config,
                          proposals_since_best_run: int = 0) -> bool:
    """Whether the engine should run the current best once more (new seed) before going on.

    noise: until it has `baseline_runs` samples (after the baseline and after every keep),
    and once every `remeasure_every` proposals when that is set. strict: one run only."""
    if config.rule != "noise":
        return not best_samples
    if len(best_samples) < config.baseline_runs:
        return True
    return bool(config.remeasure_every) and proposals_since_best_run >= config.remeasure_every
