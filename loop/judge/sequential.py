"""The `sequential` rule (the default): as few runs per proposal as the decision needs.

A night is a fixed budget of runs (benchmarks/nights.py), most proposals are clearly not
better after one run, and a kept change must be real. So each proposal is a sequential
test that stops as soon as it can:

- screen (`_screen`): the first run c0 against the best's latest R runs, unpaired; when the
  best's runs drift (`drift_suspected`: a trend, or its latest run, a refresh, far from the
  others) against its latest run only, which the engine then makes right before c0
  (`should_remeasure_best`), so a machine that slowed down does not make every idea look
  worse. p < `fast_keep_p` (and no drift suspected) -> keep on that one run. Not plausibly
  better (p >= `screen_p`, with the normal quantile: going on is a question of cost) ->
  discard after that one run (futility). Otherwise -> a pair (`runs=1, paired=True`): the
  best, then the candidate, as the `paired` rule.
- after each pair k = 1, 2, ..: the one-sided Student t of c0, c1..ck against b1..bk (the
  same mean time: a linear drift cancels). p < 1 - `confidence` -> keep (one pair can be
  enough; when the best's runs drift, when every no-op looks promising and gets these
  looks, the k-th must be k times as sure, so they do not add up to more false keeps);
  p >= `screen_p` -> discard (futility); else another pair, up to `confirm_runs` pairs,
  then discard.
- the new best needs `keep_runs` (1) runs, not R: the runs alongside its next candidates
  and a refresh every `refresh_every` proposals measure it again.
- the noise: runs within one period with their drift taken out pooled with every state's
  repeats (`Period`), so one pair can decide once the night has measured its noise.
Simplicity as the `noise` rule: a margin per net added line; a net deletion is kept when
the metric is within one standard error of the best's runs alongside. With no pair (the
best's run alongside failed) the candidate's runs are compared with the best's latest R
runs."""
from __future__ import annotations

import math
from statistics import fmean

from loop.judge.paired import AGAIN, Period, simpler
from loop.judge.stats import t_ppf
from loop.judge.verdict import (DISCARD, KEEP, RERUN, Verdict, bar, fmt, improvement,
                                own_noise, t_test, unknown_noise)


def sequential(candidate: list[float], best: list[float], direction: str, config,
               lines_added: int = 0, lines_removed: int = 0, noise_sd: float | None = None,
               noise_df: int | None = None, pairs: list | None = None,
               period_noise: list | None = None) -> Verdict:
    """The `sequential` rule on a candidate's runs so far (see the module's docstring)."""
    pairs = pairs or []
    if not pairs and len(candidate) == 1:
        return _screen(candidate, best, direction, config, lines_added, lines_removed,
                       noise_sd, noise_df)
    p = Period.of(candidate, best, direction, config, lines_added - lines_removed, pairs,
                  period_noise or [], noise_sd, noise_df, with_repeats=True)
    if p.sd is None:
        return p.unknown_noise(direction, config)
    se, pv = t_test(p.gain, p.sd, len(p.cand), len(p.ref), p.df, p.stats)
    t_crit = _keep_quantile(best, p, config)
    d, k, why, stats = p.gain, len(pairs), p.why, p.stats
    if p.net < 0:                                # simpler code: equal is good enough
        return simpler(d, se, t_crit, pv, why, p.net, stats, p.can_rerun)
    margin, threshold = bar(config, p.sd, p.net, t_crit, se, stats)
    if d > threshold:
        return Verdict(KEEP, f"better beyond noise ({fmt(d, pv)}, {why}, bar {threshold:.4g})",
                       stats)
    plausible = d - margin > _futility_z(config) * se
    if plausible and p.can_rerun:
        return Verdict(RERUN, f"maybe better ({fmt(d, pv)}, {why}, bar {threshold:.4g})",
                       stats, **AGAIN)
    if plausible:
        return Verdict(DISCARD, f"not confirmed in {k} pairs ({fmt(d, pv)}, {why}, bar "
                                f"{threshold:.4g})", stats)
    return Verdict(DISCARD, f"{'gain within noise' if d > 0 else 'not better'} "
                            f"({fmt(d, pv)}, {why}): stopped early", stats)


def _keep_quantile(best: list[float], p: Period, config) -> float:
    """Student's t quantile a keep must beat. When the best's runs drift, nearly every no-op
    looks promising on its first run and gets these looks; then the k-th look must be k
    times as sure, so they do not add up to more false keeps than 1 - confidence (the
    reason and the stats say so)."""
    k = int(p.stats["paired_runs"])
    drifting = drift_suspected(best, p.sd or 0.0)
    if drifting:
        p.why += f", the best's runs drift: look {k} must be {k}x as sure" if k > 1 else \
            ", the best's runs drift"
    p.stats["drift_suspected"] = float(drifting)
    return t_ppf(1.0 - (1.0 - config.confidence) / (max(1, k) if drifting else 1), p.df)


def _screen(candidate, best, direction, config, lines_added, lines_removed, noise_sd,
            noise_df) -> Verdict:
    """The sequential rule's first look: one run of the candidate against the best's latest
    runs, unpaired (only its latest, made right before, when its runs drift). Keep, discard,
    or ask for a pair; the reason says when the drift decided what it was compared with."""
    drifting = noise_sd is not None and drift_suspected(best, noise_sd)
    recent = best[-1:] if drifting else best[-config.baseline_runs:]
    v = _first_look(candidate, recent, drifting, direction, config, lines_added,
                    lines_removed, noise_sd, noise_df)
    if drifting:
        v.reason += "; the best's runs drift: compared with its latest run only"
    return v
def _first_look(candidate, recent, drifting, direction, config, lines_added, lines_removed,
                noise_sd, noise_df) -> Verdict:
    c0, ref = candidate[0], fmean(recent)
    d = improvement(c0, ref, direction)
    sd, df = own_noise(candidate, recent, noise_sd, noise_df)
    net = lines_added - lines_removed
    stats = {"candidate_mean": c0, "best_mean": ref, "gain": d, "candidate_runs": 1,
             "best_runs": len(recent), "net_lines_added": net, "paired_runs": 0,
             "drift_suspected": float(drifting)}
    pair = config.confirm_runs > 0               # a pair may follow this run
    if sd is None:                               # not one repeated state anywhere yet
        again = Verdict(RERUN, "noise unknown: a run next to the best", stats, **AGAIN)
        return unknown_noise(candidate, recent, direction, config, stats,
                             again if pair else None)
    se, p = t_test(d, sd, 1, len(recent), df, stats)
    margin = config.simplicity_weight * sd * max(0, net) + config.min_delta
    if config.fast_keep_p > 0 and net >= 0 and not drifting:
        fast = t_ppf(1.0 - config.fast_keep_p, df) * se + margin
        stats["threshold"] = fast
        if d > fast:
            return Verdict(KEEP, f"clearly better on one run ({fmt(d, p)}, bar {fast:.4g})",
                           stats)
    if net < 0:
        plausible = d > -t_ppf(config.confidence, df) * se    # simpler: not clearly worse
    else:
        plausible = d - margin > _futility_z(config) * se
    if plausible and pair:
        return Verdict(RERUN, f"maybe better ({fmt(d, p)}): confirming next to the best",
                       stats, **AGAIN)
    if plausible and net < 0 and d >= -se:       # confirm_runs 0: one run decides
        return Verdict(KEEP, f"simpler, metric within noise on one run ({fmt(d, p)}, "
                             f"{-net} lines fewer)", stats)
    if plausible:
        one_run = t_ppf(config.confidence, df) * se + margin
        if net >= 0 and d > one_run:
            return Verdict(KEEP, f"better beyond noise on one run ({fmt(d, p)}, bar "
                                 f"{one_run:.4g})", stats)
        return Verdict(DISCARD, f"not better beyond noise on one run ({fmt(d, p)}, bar "
                                f"{one_run:.4g})", stats)
    what = "simpler but worse" if net < 0 else "gain within noise" if d > 0 else "not better"
    return Verdict(DISCARD, f"{what} ({fmt(d, p)}): stopped after one run", stats)


def _futility_z(config) -> float:
    """The sequential rule's bar for "plausibly better": the normal quantile, not Student's.
    Going on is a question of cost, not of error (the keep test has the t's caution), and
    with the few degrees of freedom of an early night Student's t would stop nearly every
    candidate after one run."""
    return t_ppf(1.0 - config.screen_p, None)


def drift_suspected(best: list[float], sd: float, z: float = 2.0,
                    shift_z: float = 2.5) -> bool:
    """Whether the best's runs, in the order they were made (its own, then the runs made
    alongside candidates and its re-measurements), drift beyond noise `sd`: a straight
    line through them against their order whose slope is more than `z` standard errors
    from zero, or the latest run more than `shift_z` standard errors from the mean of the
    others. Fewer than 4 runs: no."""
    n = len(best)
    if n < 4 or not sd:
        return False
    xm, ym = (n - 1) / 2.0, fmean(best)
    sxx = sum((i - xm) ** 2 for i in range(n))
    slope = sum((i - xm) * (y - ym) for i, y in enumerate(best)) / sxx
    if abs(slope) > z * sd / math.sqrt(sxx):
        return True
    # a step: the latest run (a refresh after many proposals without one) far from the
    # others, as when the machine slowed down while every candidate was stopped on one run
    rest = fmean(best[:-1])
    return abs(best[-1] - rest) > shift_z * sd * math.sqrt(1.0 + 1.0 / (n - 1))
