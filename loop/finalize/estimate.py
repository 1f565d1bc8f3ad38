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
pooled noise): what decides a comparison the runs left within noise (morning.py: it stays
at LIKELY or more). Given `likely`, a comparison whose runs lean that way but not that far
(helps between 0.5 and `likely`) goes on past `max_pairs`, to twice that: the change may be
a real gain too small for 6 pairs, and its verdict is the one a few more runs can turn."""
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
