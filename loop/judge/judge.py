"""The decision: keep a candidate or not, and why. Pure: no I/O, no git, no MLflow.

Three rules (`JudgeConfig.rule`):

- `strict` (karpathy/autoresearch): one run per state, keep iff better by > min_delta.
  On a noisy metric it keeps about half of all changes that do nothing.
- `noise` (also named `paired`): a one-sided Student-t test of the candidate's mean
  against the best's mean, with the run-to-run noise measured from repeated runs of the
  same code states. Significant with R = `baseline_runs` runs -> keep (a would-be keep
  with fewer runs is re-run first, so the new best is measured R times and those runs also
  test it); plausibly better (p < `plausible_p`) but not significant -> `rerun`, until the
  candidate has 1 + `confirm_runs` runs; otherwise discard. Simplicity: each net added
  line raises the bar by `simplicity_weight` noise sd; a net deletion is kept when the
  metric stays within noise. Defaults tuned with benchmarks/false_keeps.py (false keeps <=
  2%, with and without drift).

- `sequential` (default): each proposal a sequential test that stops as soon as it can
  (one run for most and for the overwhelming, a pair of runs next to the best's at a time
  for the promising ones); the most true gain per night of runs, at the same false-keep
  rate, drift included: see `sequential` and benchmarks/nights.py.

With `paired` (the noise rule's default) the candidate is confirmed only against runs of
the best made alongside its own, so a machine whose speed drifts over the night cannot
fake a keep: see `paired_judge`. Then a `rerun` verdict carries `paired` (`also_best` =
1), and the engine runs the best once right before the candidate's next run and passes
`pairs` (candidate, best) back:

        if v.paired: b = run(best); best.append(b)              # journalled as a remeasure
        c = run(candidate); candidate.append(c)
        if v.paired: pairs.append((c, b))

The protocol the engine follows (benchmarks/false_keeps.py runs exactly this). Every run
gets a fresh seed in $AUTORESEARCH_SEED, so repeated runs of one state measure the noise.
`history` is the list of sample lists of every code state measured so far (the baseline,
each kept state, each discarded candidate); the current `best` is one of them (the same
list object, so its re-measurements count), the candidate under judgement is not.

    best = [run()]                                   # baseline: R runs, new seed each
    while judge_baseline(best, cfg).action == RERUN: best.append(run())
    history, since, period = [best], 0, [back_to_back(best)]
    for each proposal (its diff has `added` / `removed` lines):
        if should_remeasure_best(best, cfg, since, estimate_noise(history)):
            best.append(run()); since = 0            # sequential: a refresh, a drift
        candidate, pairs = [run()], []
        while True:                                  # noise refreshed at every call
            v = judge(candidate, best, direction, cfg, added, removed,
                      noise_sd=estimate_noise(history), noise_df=noise_df(history),
                      pairs=pairs, period_noise=period)   # paired: see above
            if v.action != RERUN: break
            candidate.append(run())                  # paired: as above, with the best
        history.append(candidate); since += 1
        if pairs: period.append(period_residuals(candidate[0], pairs))
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

from loop.judge.stats import pooled_parts, pooled_sd, t_cdf, t_ppf, trend_residuals
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

    @property
    def also_best(self) -> int:
        """Runs of the best the judge wants beside the candidate's (see `paired_judge`)."""
        return self.runs if self.paired else 0


def judge(candidate: list[float], best: list[float], direction: str, config,
          lines_added: int = 0, lines_removed: int = 0,
          noise_sd: float | None = None, noise_df: int | None = None,
          pairs: list | None = None, period_noise: list | None = None) -> Verdict:
    """Decide on a candidate from its metric samples against the best state's samples.

    `noise_sd`/`noise_df`: the run-to-run noise measured on other states (see
    `estimate_noise`); None = unknown. `noise_df=None` with a known sd = known exactly.
    `pairs`: None = the unpaired protocol; a list (empty at first) = the drift-proof one of
    `paired_judge`, with `period_noise` the (ss, df) of earlier periods (see there)."""
    if not candidate or not best:
        raise ValueError("judge needs at least one sample of the candidate and of the best")
    if config.rule == "strict":
        return strict(candidate, best, direction, config.min_delta)
    if config.rule == "sequential":
        return sequential(candidate, best, direction, config, lines_added, lines_removed,
                          noise_sd, noise_df, pairs, period_noise or [])
    if config.rule not in ("noise", "paired"):
        raise ValueError(f"unknown judge rule {config.rule!r}")
    if pairs is not None and (config.paired or config.rule == "paired"):
        return paired_judge(candidate, best, direction, config, lines_added, lines_removed,
                            noise_sd, noise_df, pairs, period_noise or [])
    return noise_aware(candidate, best, direction, config, lines_added, lines_removed,
                       noise_sd, noise_df)


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
    stats = {"candidate_mean": cand, "best_mean": ref, "gain": delta,
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
    stats = {"candidate_mean": cand, "best_mean": ref, "gain": delta,
             "candidate_runs": n_c, "best_runs": n_b, "net_lines_added": net}
    if sd is None:                               # not one repeated state anywhere yet
        if can_rerun:
            return Verdict(RERUN, "noise unknown: re-running the candidate", stats)
        v = strict(candidate, best, direction, config.min_delta)
        v.reason, v.stats = f"noise unknown, strict rule: {v.reason}", {**stats, **v.stats}
        return v
    se, p = _t_test(delta, sd, n_c, n_b, df, stats)
    t_crit = t_ppf(config.confidence, df)
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


def paired_judge(candidate: list[float], best: list[float], direction: str, config,
                 lines_added: int, lines_removed: int, noise_sd: float | None,
                 noise_df: int | None, pairs: list, period_noise: list) -> Verdict:
    """The drift-proof `noise` rule. A machine whose speed changes over the night moves a
    wall-clock-budgeted metric for every state alike; a candidate measured now against a
    best measured hours ago then looks better (or worse) by the drift. So:

    - screening: the candidate's first run c0 against the best's latest R runs, unpaired.
      Not plausibly better -> discard (1 run, as before). Otherwise -> `rerun` with
      `runs=1, paired=True`: the engine runs the best once, then the candidate once, and hands the
      judge the pair (candidate value, best value).
    - every later decision uses only this period: c0, b1, c1, b2, c2, ... The candidate's
      runs and the best's runs then have the same mean time, so a drift that is linear over
      the period cancels from mean(candidate) - mean(best); the test is the unpaired rule's
      one-sided Student t on that difference, with the noise measured with the drift taken
      out (`period_residuals`, pooled with `period_noise`: the (ss, df) of earlier periods
      and of the baseline, `back_to_back`).
    - keep once there are max(1, min(R, 1 + confirm_runs) - 1) pairs (the candidate then
      has as many runs as the unpaired rule asks), re-run (another pair) while plausible
      and fewer than `confirm_runs` pairs, else discard."""
    if not pairs:
        recent = best[-config.baseline_runs:]
        v = noise_aware(candidate, recent, direction, config, lines_added, lines_removed,
                        noise_sd, noise_df)
        if v.action == DISCARD or len(candidate) > config.confirm_runs:
            return v       # no pair possible (none allowed, or the best's runs failed)
        v.stats["paired_runs"] = 0
        return Verdict(RERUN, f"{v.reason.rsplit(': ', 1)[0]}: confirming next to the best",
                       v.stats, runs=1, paired=True)
    cand = [candidate[0]] + [c for c, _ in pairs]
    ref = [b for _, b in pairs]
    k, n_c, n_b = len(pairs), len(cand), len(ref)
    d = improvement(fmean(cand), fmean(ref), direction)
    df: int | None                               # None: the noise is known exactly
    sd, df = pooled_parts(list(period_noise) + [period_residuals(candidate[0], pairs)])
    if sd is None and noise_sd is not None:      # nothing measured within one period yet
        sd, df = noise_sd, noise_df
    net = lines_added - lines_removed
    need = max(1, min(config.baseline_runs, 1 + config.confirm_runs) - 1)
    can_rerun = k < config.confirm_runs and len(candidate) <= config.confirm_runs
    stats = {"candidate_mean": fmean(candidate), "best_mean": fmean(best), "gain": d,
             "paired_runs": k, "best_period_mean": fmean(ref), "candidate_runs": n_c,
             "best_runs": len(best), "net_lines_added": net}
    again: dict = {"runs": 1, "paired": True}
    why = f"against {n_b} run{'s' if n_b > 1 else ''} of the best alongside"
    if sd is None:
        if can_rerun:
            return Verdict(RERUN, "noise unknown: another run next to the best", stats, **again)
        v = strict(cand, ref, direction, config.min_delta)
        v.reason, v.stats = f"noise unknown, strict rule, {why}: {v.reason}", {**stats, **v.stats}
        return v
    se, p = _t_test(d, sd, n_c, n_b, df, stats)
    t_crit = t_ppf(config.confidence, df)
    if net < 0:                                  # simpler code: equal is good enough
        return _simpler(d, se, t_crit, p, why, net, stats, can_rerun, again, more=k < need)
    margin = config.simplicity_weight * sd * net + config.min_delta
    threshold = t_crit * se + margin
    stats["threshold"] = threshold
    if d > threshold and k < need:
        return Verdict(RERUN, f"better beyond noise so far ({_fmt(d, p)}, {why}): confirming",
                       stats, **again)
    if d > threshold:
        return Verdict(KEEP, f"better beyond noise ({_fmt(d, p)}, {why}, bar {threshold:.4g})",
                       stats)
    plausible = d - margin > t_ppf(1.0 - config.plausible_p, df) * se
    if plausible and can_rerun:
        return Verdict(RERUN, f"maybe better ({_fmt(d, p)}, {why}, bar {threshold:.4g})",
                       stats, **again)
    if d > 0:
        return Verdict(DISCARD, f"gain within noise ({_fmt(d, p)}, {why}, bar {threshold:.4g})",
                       stats)
    return Verdict(DISCARD, f"not better ({_fmt(d, p)}, {why})", stats)


def sequential(candidate: list[float], best: list[float], direction: str, config,
               lines_added: int = 0, lines_removed: int = 0, noise_sd: float | None = None,
               noise_df: int | None = None, pairs: list | None = None,
               period_noise: list | None = None) -> Verdict:
    """The `sequential` rule: as few runs per proposal as the decision needs.

    A night is a fixed budget of runs (benchmarks/nights.py), most proposals are clearly
    not better after one run, and a kept change must be real. So each proposal is a
    sequential test that stops as soon as it can:

    - screen: the first run c0 against the best's latest R runs, unpaired; when the
      best's runs drift (`drift_suspected`: a trend, or its latest run, a refresh, far from
      the others) against its latest run only, which the engine then makes right before
      c0 (`should_remeasure_best`), so a machine that slowed down does not make every idea
      look worse. p < `fast_keep_p` (and no drift suspected) -> keep on that one run. Not
      plausibly better (p >= `screen_p`, with the normal quantile: going on is a question
      of cost) -> discard after that one run (futility). Otherwise -> a pair (`runs=1,
      paired=True`): the best, then the candidate, as `paired_judge`.
    - after each pair k = 1, 2, ..: the one-sided Student t of c0, c1..ck against b1..bk
      (the same mean time: a linear drift cancels). p < 1 - `confidence` -> keep (one pair
      can be enough; when the best's runs drift, when every no-op looks promising and gets
      these looks, the k-th must be k times as sure, so they do not add up to more false
      keeps); p >= `screen_p` -> discard (futility); else another pair, up to
      `confirm_runs` pairs, then discard.
    - the new best needs `keep_runs` (1) runs, not R: the runs alongside its next
      candidates and a refresh every `refresh_every` proposals measure it again.
    - the noise: runs within one period with their drift taken out (`period_noise`,
      `period_residuals`) pooled with every state's repeats (`noise_sd`; a drift inflates
      those, which only makes the paired test more careful), so one pair can decide once
      the night has measured its noise.
    Simplicity as the `noise` rule: a margin per net added line; a net deletion is kept
    when the metric is within one standard error of the best's runs alongside.
    With no pair (the best's run alongside failed) the candidate's runs are compared with
    the best's latest R runs."""
    pairs = pairs or []
    if not pairs and len(candidate) == 1:
        return _screen(candidate, best, direction, config, lines_added, lines_removed,
                       noise_sd, noise_df)
    cand = [candidate[0]] + [c for c, _ in pairs] if pairs else list(candidate)
    ref = [b for _, b in pairs] if pairs else best[-config.baseline_runs:]
    k = len(pairs)
    d = improvement(fmean(cand), fmean(ref), direction)
    # the noise: within periods (drift taken out) pooled with every state's repeats (which
    # a drift inflates: that only makes the paired test, whose difference it cancels,
    # more careful), so one pair can decide once the night has measured its noise
    parts = list(period_noise or []) + ([period_residuals(candidate[0], pairs)] if pairs else [])
    if noise_sd is not None and noise_df:
        parts.append((noise_sd * noise_sd * noise_df, noise_df))
    df: int | None                               # None: the noise is known exactly
    sd, df = pooled_parts(parts)
    if sd is None and noise_sd is not None:
        sd, df = noise_sd, noise_df
    net = lines_added - lines_removed
    can_rerun = k < config.confirm_runs and len(candidate) <= config.confirm_runs
    n_b = len(ref)
    stats = {"candidate_mean": fmean(candidate), "best_mean": fmean(best), "gain": d,
             "paired_runs": k, "best_period_mean": fmean(ref), "candidate_runs": len(cand),
             "best_runs": len(best), "net_lines_added": net}
    why = f"against {n_b} run{'s' if n_b > 1 else ''} of the best" + \
        (" alongside" if pairs else "")
    again: dict = {"runs": 1, "paired": True}
    if sd is None:
        if can_rerun:
            return Verdict(RERUN, "noise unknown: another run next to the best", stats, **again)
        v = strict(cand, ref, direction, config.min_delta)
        v.reason, v.stats = f"noise unknown, strict rule, {why}: {v.reason}", {**stats, **v.stats}
        return v
    se, p = _t_test(d, sd, len(cand), n_b, df, stats)
    # when the best's runs drift, nearly every no-op looks promising on its first run and
    # gets these looks; then the k-th look must be k times as sure, so they do not add up
    # to more false keeps than 1 - confidence
    drifting = drift_suspected(best, sd)
    t_crit = t_ppf(1.0 - (1.0 - config.confidence) / (max(1, k) if drifting else 1), df)
    if drifting:
        why += f", the best's runs drift: look {k} must be {k}x as sure" if k > 1 else \
            ", the best's runs drift"
    stats["drift_suspected"] = float(drifting)
    if net < 0:                                  # simpler code: equal is good enough
        return _simpler(d, se, t_crit, p, why, net, stats, can_rerun, again)
    margin = config.simplicity_weight * sd * net + config.min_delta
    threshold = t_crit * se + margin
    stats["threshold"] = threshold
    if d > threshold:
        return Verdict(KEEP, f"better beyond noise ({_fmt(d, p)}, {why}, bar {threshold:.4g})",
                       stats)
    plausible = d - margin > _futility_z(config) * se
    if plausible and can_rerun:
        return Verdict(RERUN, f"maybe better ({_fmt(d, p)}, {why}, bar {threshold:.4g})",
                       stats, **again)
    if plausible:
        return Verdict(DISCARD, f"not confirmed in {k} pairs ({_fmt(d, p)}, {why}, bar "
                                f"{threshold:.4g})", stats)
    return Verdict(DISCARD, f"{'gain within noise' if d > 0 else 'not better'} "
                            f"({_fmt(d, p)}, {why}): stopped early", stats)


def _t_test(delta: float, sd: float, n_a: int, n_b: int, df: int | None,
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


def _simpler(d: float, se: float, t_crit: float, p: float, why: str, net: int, stats: dict,
             can_rerun: bool, again: dict, more: bool = False) -> Verdict:
    """The paired rules' verdict on a net deletion (`net` < 0): kept when the metric is
    within one standard error of the best's runs alongside; `more`: confirm it first."""
    stats["threshold"] = -se
    if d >= -se:
        if more:
            return Verdict(RERUN, f"simpler, within noise so far ({_fmt(d, p)}, {why})",
                           stats, **again)
        what = "better and simpler" if d > t_crit * se else "simpler, metric within noise"
        return Verdict(KEEP, f"{what} ({_fmt(d, p)}, {why}, {-net} lines fewer)", stats)
    if d > -t_crit * se and can_rerun:
        return Verdict(RERUN, f"simpler, maybe worse ({_fmt(d, p)}, {why})", stats, **again)
    return Verdict(DISCARD, f"simpler but worse ({_fmt(d, p)}, {why})", stats)


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
    sd, df = _noise(candidate, recent, noise_sd, noise_df)
    net = lines_added - lines_removed
    stats = {"candidate_mean": c0, "best_mean": ref, "gain": d, "candidate_runs": 1,
             "best_runs": len(recent), "net_lines_added": net, "paired_runs": 0,
             "drift_suspected": float(drifting)}
    pair: dict | None = {"runs": 1, "paired": True} if config.confirm_runs > 0 else None
    if sd is None:                               # not one repeated state anywhere yet
        if pair:
            return Verdict(RERUN, "noise unknown: a run next to the best", stats, **pair)
        v = strict(candidate, recent, direction, config.min_delta)
        v.reason, v.stats = f"noise unknown, strict rule: {v.reason}", {**stats, **v.stats}
        return v
    se, p = _t_test(d, sd, 1, len(recent), df, stats)
    margin = config.simplicity_weight * sd * max(0, net) + config.min_delta
    if config.fast_keep_p > 0 and net >= 0 and not drifting:
        fast = t_ppf(1.0 - config.fast_keep_p, df) * se + margin
        stats["threshold"] = fast
        if d > fast:
            return Verdict(KEEP, f"clearly better on one run ({_fmt(d, p)}, bar {fast:.4g})",
                           stats)
    if net < 0:
        plausible = d > -t_ppf(config.confidence, df) * se    # simpler: not clearly worse
    else:
        plausible = d - margin > _futility_z(config) * se
    if plausible and pair:
        return Verdict(RERUN, f"maybe better ({_fmt(d, p)}): confirming next to the best",
                       stats, **pair)
    if plausible and net < 0 and d >= -se:       # confirm_runs 0: one run decides
        return Verdict(KEEP, f"simpler, metric within noise on one run ({_fmt(d, p)}, "
                             f"{-net} lines fewer)", stats)
    if plausible:
        bar = t_ppf(config.confidence, df) * se + margin
        if net >= 0 and d > bar:
            return Verdict(KEEP, f"better beyond noise on one run ({_fmt(d, p)}, bar "
                                 f"{bar:.4g})", stats)
        return Verdict(DISCARD, f"not better beyond noise on one run ({_fmt(d, p)}, bar "
                                f"{bar:.4g})", stats)
    what = "simpler but worse" if net < 0 else "gain within noise" if d > 0 else "not better"
    return Verdict(DISCARD, f"{what} ({_fmt(d, p)}): stopped after one run", stats)


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


def _futility_z(config) -> float:
    """The sequential rule's bar for "plausibly better": the normal quantile, not Student's.
    Going on is a question of cost, not of error (the keep test has the t's caution), and
    with the few degrees of freedom of an early night Student's t would stop nearly every
    candidate after one run."""
    return t_ppf(1.0 - config.screen_p, None)


def period_residuals(first: float, pairs: list) -> tuple[float, int]:
    """(ss, df) of the noise in one candidate's period c0, b1, c1, b2, c2, ... with its
    locally linear drift taken out (loop.judge.stats.trend_residuals)."""
    cand = [(0.0, first)] + [(2.0 * i + 2, c) for i, (c, _) in enumerate(pairs)]
    ref = [(2.0 * i + 1, b) for i, (_, b) in enumerate(pairs)]
    return trend_residuals([cand, ref])


def back_to_back(samples: list[float]) -> tuple[float, int]:
    """(ss, df) of runs of one state made one after the other (the baseline)."""
    sd, df = pooled_sd([samples])                # a few runs: too short for drift to tell
    return (sd * sd * df, df) if sd is not None else (0.0, 0)


def _fmt(delta: float, p: float) -> str:
    return f"gain {delta:+.4g}, p={p:.3g}"   # gain: positive = better (loop/ui/status.py)


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


def judge_baseline(samples: list[float], config) -> Verdict:
    """The baseline needs no comparison, only its runs: R, or one with the `strict` rule."""
    wanted = config.baseline_runs if config.rule != "strict" else 1
    if len(samples) < wanted:
        return Verdict(RERUN, "baseline: measuring it again", runs=wanted - len(samples))
    return Verdict(KEEP, "baseline")


def max_runs(config, baseline: bool) -> int:
    """How many runs an iteration makes at most (before a replay): the baseline's R, else
    1 + confirmations; one with the `strict` rule."""
    if config.rule == "strict":
        return 1
    return config.baseline_runs if baseline else 1 + config.confirm_runs


def best_runs_wanted(best_samples: list[float], config, proposals_since_best_run: int = 0,
                     noise_sd: float | None = None, speed_moved: bool = False) -> int:
    """How many runs of the best to make now: none, R - (its runs) after the baseline or a
    keep (they may run at once; `keep_runs` with the sequential rule), else one
    (`remeasure_every`; the sequential rule's refresh)."""
    if not should_remeasure_best(best_samples, config, proposals_since_best_run, noise_sd,
                                 speed_moved):
        return 0
    need = config.keep_runs if config.rule == "sequential" else config.baseline_runs
    return max(1, need - len(best_samples))


def should_remeasure_best(best_samples: list[float], config,
                          proposals_since_best_run: int = 0,
                          noise_sd: float | None = None, speed_moved: bool = False) -> bool:
    """Whether the engine should run the current best once more (new seed) before going on.

    noise: until it has `baseline_runs` samples (after the baseline and after every keep),
    and once every `remeasure_every` proposals when that is set. strict: one run only.
    sequential: until it has `keep_runs` samples; again when it has not run for
    `refresh_every` proposals, or since the last proposal's throughput moved beyond its
    noise (`speed_moved`: the machine's speed changed), so a drift shows in its runs; and
    before every proposal while its runs suggest a drift (`drift_suspected`, with the noise
    sd `noise_sd`): the next first run is then screened against that fresh run."""
    if config.rule == "strict":
        return not best_samples
    if config.rule == "sequential":
        if len(best_samples) < max(1, config.keep_runs):
            return True
        if proposals_since_best_run < 1:
            return False
        if speed_moved or (config.refresh_every
                           and proposals_since_best_run >= config.refresh_every):
            return True
        return noise_sd is not None and drift_suspected(best_samples, noise_sd)
    if len(best_samples) < config.baseline_runs:
        return True
    return bool(config.remeasure_every) and proposals_since_best_run >= config.remeasure_every
