"""The drift-proof `noise` rule (`paired`): a candidate confirmed only against runs of the
best made alongside its own, and the period both rules that pair runs share.

A machine whose speed changes over the night moves a wall-clock-budgeted metric for every
state alike; a candidate measured now against a best measured hours ago then looks better
(or worse) by the drift. A candidate's period c0, b1, c1, b2, c2, ... (its first run, then
pairs: the best right before the candidate) gives both the same mean time, so a drift that
is linear over the period cancels from mean(candidate) - mean(best)."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from loop.judge.stats import pooled_parts, pooled_sd, t_ppf, trend_residuals
from loop.judge.unpaired import noise_aware
from loop.judge.verdict import (DISCARD, KEEP, RERUN, Verdict, bar, fmt, improvement, t_test,
                                unknown_noise)

AGAIN: dict = {"runs": 1, "paired": True}        # a rerun verdict's: one more pair


def paired_judge(candidate: list[float], best: list[float], direction: str, config,
                 lines_added: int, lines_removed: int, noise_sd: float | None,
                 noise_df: int | None, pairs: list, period_noise: list) -> Verdict:
    """The `paired` rule:

    - screening: the candidate's first run c0 against the best's latest R runs, unpaired
      (`noise_aware`). Not plausibly better -> discard (1 run). Otherwise -> `rerun` with
      `runs=1, paired=True`: the engine runs the best once, then the candidate once, and
      hands the judge the pair (candidate value, best value).
    - every later decision uses only this period (`Period`): the unpaired rule's one-sided
      Student t on its difference, with the noise measured with the drift taken out.
    - keep once there are max(1, min(R, 1 + confirm_runs) - 1) pairs (the candidate then
      has as many runs as the unpaired rule asks), re-run (another pair) while plausible
      and fewer than `confirm_runs` pairs, else discard."""
    if not pairs:
        return _screen(candidate, best, direction, config, lines_added, lines_removed,
                       noise_sd, noise_df)
    p = Period.of(candidate, best, direction, config, lines_added - lines_removed, pairs,
                  period_noise, noise_sd, noise_df, with_repeats=False)
    if p.sd is None:
        return p.unknown_noise(direction, config)
    se, pv = t_test(p.gain, p.sd, len(p.cand), len(p.ref), p.df, p.stats)
    t_crit = t_ppf(config.confidence, p.df)
    need = max(1, min(config.baseline_runs, 1 + config.confirm_runs) - 1)
    d, k, why, stats = p.gain, len(pairs), p.why, p.stats
    if p.net < 0:                                # simpler code: equal is good enough
        return simpler(d, se, t_crit, pv, why, p.net, stats, p.can_rerun, more=k < need)
    margin, threshold = bar(config, p.sd, p.net, t_crit, se, stats)
    if d > threshold and k < need:
        return Verdict(RERUN, f"better beyond noise so far ({fmt(d, pv)}, {why}): confirming",
                       stats, **AGAIN)
    if d > threshold:
        return Verdict(KEEP, f"better beyond noise ({fmt(d, pv)}, {why}, bar {threshold:.4g})",
                       stats)
    plausible = d - margin > t_ppf(1.0 - config.plausible_p, p.df) * se
    if plausible and p.can_rerun:
        return Verdict(RERUN, f"maybe better ({fmt(d, pv)}, {why}, bar {threshold:.4g})",
                       stats, **AGAIN)
    if d > 0:
        return Verdict(DISCARD, f"gain within noise ({fmt(d, pv)}, {why}, bar {threshold:.4g})",
                       stats)
    return Verdict(DISCARD, f"not better ({fmt(d, pv)}, {why})", stats)


def _screen(candidate, best, direction, config, lines_added, lines_removed, noise_sd,
            noise_df) -> Verdict:
    """The first run against the best's latest R runs, unpaired: discard, or ask for a pair."""
    recent = best[-config.baseline_runs:]
    v = noise_aware(candidate, recent, direction, config, lines_added, lines_removed,
                    noise_sd, noise_df)
    if v.action == DISCARD or len(candidate) > config.confirm_runs:
        return v           # no pair possible (none allowed, or the best's runs failed)
    v.stats["paired_runs"] = 0
    return Verdict(RERUN, f"{v.reason.rsplit(': ', 1)[0]}: confirming next to the best",
                   v.stats, **AGAIN)


@dataclass
class Period:
    """A candidate's runs and the best's runs it is judged against, their gain and noise."""
    cand: list[float]            # c0, c1, .., ck
    ref: list[float]             # b1, .., bk (with no pair: the best's latest R runs)
    gain: float
    sd: float | None
    df: int | None               # None: the noise is known exactly
    net: int                     # net lines added
    can_rerun: bool
    stats: dict
    why: str                     # "against k runs of the best alongside"

    @classmethod
    def of(cls, candidate, best, direction, config, net, pairs, period_noise, noise_sd,
           noise_df, with_repeats: bool) -> Period:
        """The period of `pairs`. Its noise: within periods, drift taken out
        (`period_residuals`), pooled with every state's repeats when `with_repeats` (a
        drift inflates those, which only makes the paired test more careful); the
        external estimate when nothing was measured within a period yet."""
        cand = [candidate[0]] + [c for c, _ in pairs] if pairs else list(candidate)
        ref = [b for _, b in pairs] if pairs else best[-config.baseline_runs:]
        parts = list(period_noise) + ([period_residuals(candidate[0], pairs)] if pairs else [])
        if with_repeats and noise_sd is not None and noise_df:
            parts.append((noise_sd * noise_sd * noise_df, noise_df))
        sd, df = pooled_parts(parts)
        if sd is None and noise_sd is not None:
            sd, df = noise_sd, noise_df
        k, gain = len(pairs), improvement(fmean(cand), fmean(ref), direction)
        stats = {"candidate_mean": fmean(candidate), "best_mean": fmean(best), "gain": gain,
                 "paired_runs": k, "best_period_mean": fmean(ref), "candidate_runs": len(cand),
                 "best_runs": len(best), "net_lines_added": net}
        why = f"against {len(ref)} run{'s' if len(ref) > 1 else ''} of the best" + \
            (" alongside" if pairs else "")
        can_rerun = k < config.confirm_runs and len(candidate) <= config.confirm_runs
        return cls(cand, ref, gain, sd, df, net, can_rerun, stats, why)

    def unknown_noise(self, direction: str, config) -> Verdict:
        again = Verdict(RERUN, "noise unknown: another run next to the best", self.stats,
                        **AGAIN)
        return unknown_noise(self.cand, self.ref, direction, config, self.stats,
                             again if self.can_rerun else None, self.why)


def simpler(d: float, se: float, t_crit: float, p: float, why: str, net: int, stats: dict,
            can_rerun: bool, more: bool = False) -> Verdict:
    """The paired rules' verdict on a net deletion (`net` < 0): kept when the metric is
    within one standard error of the best's runs alongside; `more`: confirm it first."""
    stats["threshold"] = -se
    if d >= -se:
        if more:
            return Verdict(RERUN, f"simpler, within noise so far ({fmt(d, p)}, {why})",
                           stats, **AGAIN)
        what = "better and simpler" if d > t_crit * se else "simpler, metric within noise"
        return Verdict(KEEP, f"{what} ({fmt(d, p)}, {why}, {-net} lines fewer)", stats)
    if d > -t_crit * se and can_rerun:
        return Verdict(RERUN, f"simpler, maybe worse ({fmt(d, p)}, {why})", stats, **AGAIN)
    return Verdict(DISCARD, f"simpler but worse ({fmt(d, p)}, {why})", stats)


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
