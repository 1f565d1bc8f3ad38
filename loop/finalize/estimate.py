"""How far apart two versions of the code are, from runs made in pairs on the same fresh
seeds, and when that is known well enough to stop. Pure: numbers in, an Estimate out.

Pair k runs both versions with seed k (the same seeds for every comparison), so what the
seed does to both cancels from their difference. The noise of a difference is pooled over
every comparison measured so far (as the judge pools its noise over the night's repeats),
so a comparison can be decided after two pairs once the others have measured the noise.
A comparison is decided when its two-sided interval at the judge's `confidence` leaves
zero out (a known sign), when its differences are exactly equal and zero (nothing to tell
apart), or at `max_pairs`: then the interval says what it says (usually: within noise).
`helps` is the one-sided confidence that the reference is better (Student's t on the same
pooled noise). Given `likely`, a comparison whose runs lean that way but not that far goes
on past `max_pairs`, to twice that. The screen's groups (morning.py) are called by
`group_call` below, with its own sequential rule and error rates."""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean

from loop.judge.stats import pooled_sd, t_cdf, t_ppf

MIN_PAIRS = 2            # one pair cannot show its own noise, and a lucky seed is common
LIKELY = 0.8             # a change left within noise stays when it helps with this one-sided
                         # confidence: losing a real gain costs more than keeping a no-op
                         # (benchmarks/finalize_surface.py: at 6 pairs a change worth one run's
                         # noise sd is rarely shown beyond noise at 99 %)


@dataclass
class Estimate:
    mean: float | None       # mean difference: positive = the reference is better
    half: float | None       # half-width of the interval (None: noise not known yet)
    pairs: int
    decided: bool
    sign: int                # +1 the reference better beyond noise, -1 worse, 0 neither
    helps: float = 0.5       # one-sided confidence that the reference is better

    def text(self, unit: str = "") -> str:
        if self.mean is None:
            return "not measured"
        half = "?" if self.half is None else f"{self.half:.3g}"
        return f"{self.mean + 0.0:+.3g} ± {half}{' ' + unit if unit else ''}"


def estimate(diffs: list[float], others: list[list[float]], confidence: float,
             max_pairs: int, likely: float | None = None) -> Estimate:
    """The estimate for `diffs` (this comparison's pair differences); `others`: every other
    comparison's, for the pooled noise."""
    n = len(diffs)
    if n == 0:
        return Estimate(None, None, 0, False, 0)
    mean = fmean(diffs)
    sd, df = pooled_sd([diffs] + [d for d in others if len(d) >= 2])
    if sd is None:
        return Estimate(mean, None, n, n >= max_pairs, 0)
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, df) * sd / math.sqrt(n)
    sign = 0 if abs(mean) <= half else (1 if mean > 0 else -1)
    exact_tie = sd == 0.0 and mean == 0.0
    decided = n >= max_pairs or (n >= MIN_PAIRS and (sign != 0 or exact_tie))
    se = sd / math.sqrt(n)
    helps = t_cdf(mean / se, df) if se > 0 else 0.5 if mean == 0 else float(mean > 0)
    if likely is not None and sign == 0 and 0.5 < helps < likely and n < 2 * max_pairs:
        decided = False          # leaning to helping: a few more pairs may turn its verdict
    return Estimate(mean, half, n, decided, sign, helps)


# Leaving out a group of units (finalize's screen, morning.py): one comparison decides for
# every unit in it. Its rule, per comparison, after each round of pairs (sequential):
#   matters  when the group helps with one-sided confidence KEEP_CONF;
#   harmful  when it hurts with that confidence (a group: it may hide a real unit beside a
#            harmful one, so it is split; one unit: dropped);
#   null     when its effect is within one run's noise sd (`worth`) either way, with
#            confidence DROP_CONF each side: at most 1 - DROP_CONF of groups worth a run's
#            noise sd are dropped;
#   at `max_pairs` undecided: null when its mean is within half of `worth`, else matters or
#   harmful by its sign.
# Error rates of each verdict: `Call.lose` (a group worth `worth` dropped by this rule at
# these pairs and this noise) and `Call.keep_null` (a group worth nothing called matters).
KEEP_CONF = 0.95
DROP_CONF = 0.95
GROUP_PAIRS = 4


@dataclass
class Call:
    verdict: str           # matters | harmful | null | "" (undecided)
    mean: float | None
    half: float | None     # the half-width at the judge's two-sided confidence (as Estimate)
    pairs: int
    lose: float = 0.0      # P(this rule drops a group worth one run's noise sd)
    keep_null: float = 0.0 # P(this rule calls a group worth nothing "matters")


def group_call(diffs: list[float], others: list[list[float]], worth: float | None,
               max_pairs: int, confidence: float = 0.99) -> Call:
    """The screen's call on a group left out: `diffs` its pair differences (positive: the
    reference, with the group, is better), `others` every other comparison's (for the pooled
    noise), `worth` one run's noise sd (what a unit must not be worth to be dropped)."""
    n = len(diffs)
    if n == 0:
        return Call("", None, None, 0)
    mean = fmean(diffs)
    sd, df = pooled_sd([diffs] + [d for d in others if len(d) >= 2])
    known = pooled_sd([d for d in others if len(d) >= 2])[1] >= MIN_PAIRS
    if sd is None or (n < MIN_PAIRS and not known):
        return Call("", mean, None, n)      # one pair decides only once others know the noise
    if sd == 0.0:                      # exact pairs: the sign says it
        return Call("matters" if mean > 0 else "harmful" if mean < 0 else "null", mean, 0.0, n)
    se = sd / math.sqrt(n)
    half = t_ppf(1.0 - (1.0 - confidence) / 2.0, df) * se
    worth = worth if worth is not None and worth > 0 else sd / math.sqrt(2.0)
    t_keep, t_drop = t_ppf(KEEP_CONF, df), t_ppf(DROP_CONF, df)
    verdict = "matters" if mean - t_keep * se > 0 else \
        "harmful" if mean + t_keep * se < 0 else \
        "null" if abs(mean) + t_drop * se < worth else ""
    if not verdict and n >= max_pairs:
        verdict = "null" if abs(mean) < worth / 2 else "matters" if mean > 0 else "harmful"
    capped = n >= max_pairs
    # the rule's error rates at this n and noise (as a test at a fixed n would have them):
    # it drops below `drop_at`, keeps above `keep_at`
    drop_at = max(worth - t_drop * se, worth / 2) if capped else worth - t_drop * se
    keep_at = min(t_keep * se, worth / 2) if capped else t_keep * se
    lose = t_cdf((drop_at - worth) / se, df)
    keep_null = t_cdf(-keep_at / se, df)
    return Call(verdict, mean, half, n, lose, keep_null)


def run_noise(runs: list[list[float]]) -> float | None:
    """One run's noise sd: the spread of each version's runs over the seeds, pooled."""
    return pooled_sd(runs)[0]


# The night's own evidence (morning.py, before and beside the screen): every attempt the
# night measured against its parent (kept or discarded) says how much the settings it set
# moved the score. A discarded attempt was not selected for its luck, so its delta carries
# no winner's curse; a kept one does, which only widens what counts as noise here. One
# attempt's delta is two single runs on different seeds: its noise sd is sqrt(2) times one
# run's. A setting is null by the night when at least NIGHT_MIN of the attempts that set it
# (alone or with others) moved the score by at most NIGHT_K of those sd, and none that set
# it alone moved it by more: a setting the score ignores moves it by noise alone, and an
# attempt that sets it with a setting that matters may move it by anything. It leans on
# this: changed at random, a setting that matters is seldom within noise NIGHT_MIN times.
# That is what benchmarks/finalize_surface.py measures (per verdict); one attempt alone
# cannot tell an effect of one run's sd from none.
# Selection, corrected: an attempt's parent was kept for looking better than it is, so its
# children look worse than they are by that luck; the band is widened on the worse side by
# the luck finalize measures in the final code (the night's value of it against the mean of
# finalize's runs of the reference on fresh seeds; 0 when that is not measured or negative).
NIGHT_K = 2.0
NIGHT_MIN = 3
NIGHT_DF = 4      # one run's noise, when the night had no repeats: from finalize's runs of
                  # the reference on NIGHT_DF + 1 seeds (each one pair of every group after)


@dataclass
class NightEvidence:
    """What the night's attempts that set one setting say of it."""
    within: int           # attempts that set it whose delta was within NIGHT_K sd
    attempts: int         # attempts that set it
    alone_beyond: int     # attempts that set it alone and moved the score beyond that
    band: float           # NIGHT_K sd of one attempt's delta
    luck: float = 0.0     # ... widened by this on the worse side (the parent's luck)

    @property
    def null(self) -> bool:
        return self.within >= NIGHT_MIN and self.alone_beyond == 0

    def text(self) -> str:
        worse = f" ({self.band + self.luck:.3g} for worse: its parent's luck)" \
            if self.luck > 0 else ""
        return (f"{self.within} of the night's {self.attempts} attempts that set it moved "
                f"the score by at most {self.band:.3g}{worse} (noise), none that set it alone "
                f"more")


def night_evidence(deltas: list[tuple[float, bool]], run_sd: float,
                   luck: float = 0.0) -> NightEvidence:
    """`deltas`: (delta, set alone) of each attempt that set the setting, positive =
    better; `run_sd`: one run's noise sd; `luck`: how much better a kept parent looked than
    it is (the worse side's band widened by it)."""
    band = NIGHT_K * math.sqrt(2.0) * run_sd
    luck = max(0.0, luck)

    def noise(d: float) -> bool:
        return -(band + luck) <= d <= band
    return NightEvidence(sum(noise(d) for d, _ in deltas), len(deltas),
                         sum(not noise(d) for d, alone in deltas if alone), band, luck)
