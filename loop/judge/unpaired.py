"""The `noise` rule unpaired: the candidate's runs against the best's, a one-sided t test
with the run-to-run noise measured on repeated runs of the same code states."""
from __future__ import annotations

import math
from statistics import fmean

from loop.judge.stats import t_ppf
from loop.judge.verdict import (DISCARD, KEEP, RERUN, Verdict, bar, fmt, improvement,
                                own_noise, t_test, unknown_noise)


def noise_aware(candidate: list[float], best: list[float], direction: str, config,
                lines_added: int = 0, lines_removed: int = 0,
                noise_sd: float | None = None, noise_df: int | None = None) -> Verdict:
    """The `noise` rule (see `_noise_aware`), with the runs a `rerun` wants: a candidate
    above the bar is run up to min(R, 1 + confirm_runs) times, else up to 1 + confirm_runs."""
    v = _noise_aware(candidate, best, direction, config, lines_added, lines_removed,
                     noise_sd, noise_df)
    if v.action == RERUN:
        above = v.stats.get("gain", 0) > v.stats.get("threshold", math.inf)
        upto = min(config.baseline_runs, 1 + config.confirm_runs) if above \
            else 1 + config.confirm_runs
        v.runs = upto - len(candidate)
    return v


def _noise_aware(candidate: list[float], best: list[float], direction: str, config,
                 lines_added: int = 0, lines_removed: int = 0,
                 noise_sd: float | None = None, noise_df: int | None = None) -> Verdict:
    """The `noise` rule. With sd the noise and se = sd * sqrt(1/n_cand + 1/n_best):

    - t = delta / se, p = P(T_df > t): the one-sided test of "the candidate is better".
    - net = lines_added - lines_removed. If net >= 0, the bar is
      t_crit(confidence, df) * se + simplicity_weight * sd * net + min_delta.
    - If net < 0 (simpler code): see `_simpler`.
    - Above the bar: keep once the candidate has min(R, 1 + confirm_runs) runs, else rerun.
    - Below it but plausible (p < plausible_p after the line margin) and fewer than
      1 + confirm_runs runs -> rerun. Else discard.
    - Unknown noise (no repeated state yet): rerun while allowed, then the strict rule."""
    cand, ref = fmean(candidate), fmean(best)
    delta = improvement(cand, ref, direction)
    n_c, n_b = len(candidate), len(best)
    net = lines_added - lines_removed
    can_rerun = n_c < 1 + config.confirm_runs
    sd, df = own_noise(candidate, best, noise_sd, noise_df)
    stats = {"candidate_mean": cand, "best_mean": ref, "gain": delta,
             "candidate_runs": n_c, "best_runs": n_b, "net_lines_added": net}
    if sd is None:
        again = Verdict(RERUN, "noise unknown: re-running the candidate", stats)
        return unknown_noise(candidate, best, direction, config, stats,
                             again if can_rerun else None)
    se, p = t_test(delta, sd, n_c, n_b, df, stats)
    t_crit = t_ppf(config.confidence, df)
    confirmed = n_c >= min(config.baseline_runs, 1 + config.confirm_runs)
    if net < 0:
        return _simpler(delta, se, t_crit, p, net, stats, confirmed, can_rerun)
    margin, threshold = bar(config, sd, net, t_crit, se, stats)
    if delta > threshold and not confirmed:
        return Verdict(RERUN, f"better beyond noise so far ({fmt(delta, p)}): confirming",
                       stats)
    if delta > threshold:
        return Verdict(KEEP, f"better beyond noise ({fmt(delta, p)}, bar {threshold:.4g})",
                       stats)
    plausible = delta - margin > t_ppf(1.0 - config.plausible_p, df) * se
    if plausible and can_rerun:
        return Verdict(RERUN, f"maybe better ({fmt(delta, p)}, bar {threshold:.4g}): "
                              f"re-running", stats)
    if delta > 0:
        extra = f", +{net} lines" if margin > config.min_delta else ""
        return Verdict(DISCARD, f"gain within noise ({fmt(delta, p)}, bar {threshold:.4g}"
                                f"{extra})", stats)
    return Verdict(DISCARD, f"not better ({fmt(delta, p)})", stats)


def _simpler(delta: float, se: float, t_crit: float, p: float, net: int, stats: dict,
             confirmed: bool, can_rerun: bool) -> Verdict:
    """A net deletion (`net` < 0): equal is good enough. The bar is -se, the metric within
    one standard error of the best (not worse beyond noise): kept once confirmed; re-run
    while not significantly worse; else discarded."""
    threshold = -se
    stats["threshold"] = threshold
    if delta >= threshold and not confirmed:
        return Verdict(RERUN, f"simpler, within noise so far ({fmt(delta, p)}): "
                              f"confirming", stats)
    if delta >= threshold:
        why = "better and simpler" if delta > t_crit * se else "simpler, metric within noise"
        return Verdict(KEEP, f"{why} ({fmt(delta, p)}, {-net} lines fewer)", stats)
    if delta > -t_crit * se and can_rerun:
        return Verdict(RERUN, f"simpler, maybe worse ({fmt(delta, p)}): re-running", stats)
    return Verdict(DISCARD, f"simpler but worse ({fmt(delta, p)})", stats)
