"""Small-sample statistics for the judge, stdlib only (no numpy/scipy in the engine).

Student's t is what makes the judge honest early in a loop, when the noise has been
measured from a handful of runs: with 2 degrees of freedom the one-sided 99% point is
6.96 standard errors, not the normal's 2.33. `df=None` means "noise known exactly"
and uses the normal distribution."""
from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist, fmean

_NORMAL = NormalDist()


def pooled_sd(groups: list[list[float]]) -> tuple[float | None, int]:
    """Pooled within-group standard deviation and its degrees of freedom.

    Each group holds repeated runs of one code state; groups of one sample carry no
    information about the noise and are skipped. Returns (None, 0) without any pair."""
    ss, df = 0.0, 0
    for g in groups:
        if len(g) >= 2:
            m = fmean(g)
            ss += sum((x - m) ** 2 for x in g)
            df += len(g) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def t_cdf(t: float, df: int | None) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (normal when df is None)."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if df is None:
        return _NORMAL.cdf(t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))   # P(T > |t|)
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: int | None) -> float:
    """The q-quantile of Student's t (normal when df is None), by bisection on t_cdf."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if df is None:
        return _NORMAL.inv_cdf(q)
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
        if hi - lo < 1e-10 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def trend_residuals(groups: list[list[tuple[float, float]]]) -> tuple[float, int]:
    """Residual sum of squares and degrees of freedom when each group of (time, value)
    points gets its own mean plus ONE slope in time common to all groups.

    The spread of runs measured while the machine's speed drifts, with the drift (locally
    linear) taken out: what is left is run-to-run noise. df = points - groups - 1."""
    groups = [g for g in groups if g]
    n = sum(len(g) for g in groups)
    df = n - len(groups) - 1
    if df < 1:
        return 0.0, 0
    sxx = sxy = 0.0
    centred = []
    for g in groups:
        tm, ym = fmean(t for t, _ in g), fmean(y for _, y in g)
        pts = [(t - tm, y - ym) for t, y in g]
        sxx += sum(t * t for t, _ in pts)
        sxy += sum(t * y for t, y in pts)
        centred += pts
    slope = sxy / sxx if sxx > 0 else 0.0
    if sxx <= 0:                                 # no spread in time: no slope to fit
        df += 1
    return sum((y - slope * t) ** 2 for t, y in centred), df


def pooled_parts(parts: list[tuple[float, int]]) -> tuple[float | None, int]:
    """sqrt(sum of squares / df) over (ss, df) parts; (None, 0) without any df."""
    ss, df = sum(p[0] for p in parts), sum(p[1] for p in parts)
    return (math.sqrt(ss / df), df) if df else (None, 0)
