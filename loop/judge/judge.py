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
  rate, drift included: see loop/judge/sequential.py and benchmarks/nights.py.

With `paired` (the noise rule's default) the candidate is confirmed only against runs of
the best made alongside its own, so a machine whose speed drifts over the night cannot
fake a keep: see loop/judge/paired.py. Then a `rerun` verdict carries `paired` (one run
of the best for each of the candidate's), and the engine runs the best once right before the
candidate's next run and passes `pairs` (candidate, best) back:

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

from statistics import fmean

from loop.judge.paired import back_to_back, paired_judge, period_residuals
from loop.judge.sequential import drift_suspected, sequential
from loop.judge.stats import pooled_sd
from loop.judge.unpaired import noise_aware
from loop.judge.verdict import DISCARD, KEEP, RERUN, Verdict, improvement, strict

# the names the engine, the tests and the benchmarks take from here
__all__ = ["DISCARD", "KEEP", "RERUN", "Verdict", "back_to_back", "best_runs_wanted",
           "best_value", "drift_suspected", "estimate_noise", "improvement", "judge",
           "judge_baseline", "max_runs", "noise_aware", "noise_df", "paired_judge",
           "period_residuals", "sequential", "should_remeasure_best", "strict"]


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
