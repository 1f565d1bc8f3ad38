"""The judge: keep / discard / rerun decisions on constructed samples (no I/O)."""
from __future__ import annotations

import math
import random

import pytest

from loop.setup.config import JudgeConfig, load_config
from loop.errors import ConfigError
from loop.judge.judge import (DISCARD, KEEP, RERUN, best_value, estimate_noise, judge, noise_df,
                        should_remeasure_best)
from loop.judge.stats import t_cdf, t_ppf

# unpaired tuning, R=3
NOISE = JudgeConfig(rule="noise", confirm_runs=3, confidence=0.985, plausible_p=0.2)
STRICT = JudgeConfig(rule="strict")
BEST = [1.00, 1.01, 0.99]                  # val_bpb-like, minimized, measured R=3 times
SD = {"noise_sd": 0.01, "noise_df": 20}    # run-to-run noise measured elsewhere


# --- noise rule: keep, rerun, discard ---------------------------------------------------

def test_sequential_is_the_default_rule_and_paired_names_the_noise_rule():
    assert JudgeConfig().rule == "sequential"
    # `paired` is the noise rule confirmed next to the best even with `paired: false`
    v = judge([0.97], BEST, "minimize", JudgeConfig(rule="paired", paired=False), **SD,
              pairs=[], period_noise=[])
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1


def test_clear_win_with_r_runs_is_kept_and_stats_recorded():
    v = judge([0.95, 0.96, 0.94], BEST, "minimize", NOISE, **SD)
    assert v.action == KEEP
    assert v.stats["gain"] == pytest.approx(0.05)
    assert v.stats["candidate_runs"] == 3 and v.stats["best_runs"] == 3
    assert v.stats["noise_sd"] == pytest.approx(0.01)
    assert v.stats["threshold"] < 0.05 and v.stats["p_value"] < 0.001
    assert {"candidate_mean", "best_mean", "t", "noise_df"} <= set(v.stats)


def test_clear_win_on_one_run_is_confirmed_before_it_is_kept():
    v = judge([0.95], BEST, "minimize", NOISE, **SD)
    assert v.action == RERUN and "confirming" in v.reason
    # the verdict says how many more runs: up to min(R, 1 + confirm_runs), unpaired
    assert (v.runs, v.paired, (v.runs if v.paired else 0)) == (2, False, 0)


def test_lucky_first_run_that_does_not_hold_up_is_discarded():
    assert judge([0.95], BEST, "minimize", NOISE, **SD).action == RERUN
    v = judge([0.95, 1.01, 1.00, 1.00], BEST, "minimize", NOISE, **SD)  # 1 + confirm_runs
    assert v.action == DISCARD


def test_gain_within_noise_is_rerun_then_decided():
    first = judge([0.99], BEST, "minimize", NOISE, **SD)       # 1 sd better: plausible
    assert first.action == RERUN and "maybe better" in first.reason
    assert first.runs == 3        # below the bar: up to 1 + confirm_runs runs
    runs = [0.99, 0.995, 1.0, 0.992]                           # budget spent, still marginal
    assert judge(runs, BEST, "minimize", NOISE, **SD).action == DISCARD
    real = [0.99, 0.975, 0.97, 0.98]                           # the gain holds up
    assert judge(real, BEST, "minimize", NOISE, **SD).action == KEEP


def test_rerun_is_bounded_by_confirm_runs():
    cfg = JudgeConfig(rule="noise", confirm_runs=1)
    assert judge([0.99], BEST, "minimize", cfg, **SD).action == RERUN
    assert judge([0.99, 0.995], BEST, "minimize", cfg, **SD).action == DISCARD


def test_loss_is_discarded_without_reruns():
    v = judge([1.03], BEST, "minimize", NOISE, **SD)
    assert v.action == DISCARD and "not better" in v.reason


def test_maximize_direction():
    best = [0.80, 0.81, 0.79]                                  # accuracy
    assert judge([0.86, 0.85, 0.87], best, "maximize", NOISE, **SD).action == KEEP
    assert judge([0.70], best, "maximize", NOISE, **SD).action == DISCARD


def test_few_noise_samples_demand_a_larger_gain():
    cand = [0.975, 0.98, 0.985]                                # 2 sd better
    assert judge(cand, BEST, "minimize", NOISE, noise_sd=0.01, noise_df=50).action == KEEP
    assert judge(cand, BEST, "minimize", NOISE, noise_sd=0.01, noise_df=2).action != KEEP


# --- strict rule ------------------------------------------------------------------------

@pytest.mark.parametrize("direction, best, better, worse", [
    ("minimize", [1.0], [0.999], [1.001]),
    ("maximize", [0.5], [0.501], [0.499]),
])
def test_strict_keeps_any_strict_improvement(direction, best, better, worse):
    assert judge(better, best, direction, STRICT).action == KEEP
    assert judge(worse, best, direction, STRICT).action == DISCARD
    assert judge(best, best, direction, STRICT).action == DISCARD


def test_equal_runs_are_no_change_not_a_gain_of_float_rounding():
    """The mean of three runs of 0.7 is 0.7 - 1.1e-16: a night on identical values showed
    `gain +1.11e-16`. A difference within float rounding of the values is no change."""
    assert sum([0.7] * 3) / 3 != 0.7                        # the rounding this is about
    v = judge([0.7] * 3, [0.7], "maximize", STRICT)
    assert (v.action, v.reason, v.stats["gain"]) == (DISCARD, "no change in metric", 0.0)
    v = judge([0.7] * 3, [0.7] * 3, "minimize", NOISE, **SD)
    assert v.stats["gain"] == 0.0 and "+1.1e-16" not in v.reason and "e-16" not in v.reason
    assert judge([0.7 - 1e-9], [0.7], "minimize", STRICT).action == KEEP   # a real one stays


def test_strict_respects_min_delta_and_never_reruns():
    cfg = JudgeConfig(rule="strict", min_delta=0.01)
    assert judge([0.995], [1.0], "minimize", cfg).action == DISCARD
    assert judge([0.98], [1.0], "minimize", cfg).action == KEEP
    assert not should_remeasure_best([1.0], cfg)


# --- noise estimate -----------------------------------------------------------------------

def test_estimate_noise_pools_within_group_spread():
    groups = [[1.0, 3.0], [10.0, 12.0, 14.0], [100.0]]         # means differ; singleton ignored
    assert estimate_noise(groups) == pytest.approx(math.sqrt((2.0 + 8.0) / 3))
    assert noise_df(groups) == 3


def test_estimate_noise_is_none_without_a_repeated_state():
    assert estimate_noise([[1.0], [2.0]]) is None and noise_df([[1.0]]) is None
    assert estimate_noise([]) is None


def test_estimate_noise_recovers_a_known_sigma():
    rng = random.Random(0)
    groups = [[m + rng.gauss(0, 0.02) for _ in range(3)] for m in range(200)]
    assert estimate_noise(groups) == pytest.approx(0.02, rel=0.1)


# --- simplicity -------------------------------------------------------------------------

def test_deletion_within_noise_is_kept_as_simpler():
    v = judge([1.004, 1.006, 1.002], BEST, "minimize", NOISE, lines_added=2,
              lines_removed=30, **SD)
    assert v.action == KEEP and "simpler, metric within noise" in v.reason


def test_deletion_that_hurts_is_discarded():
    v = judge([1.04, 1.05, 1.045], BEST, "minimize", NOISE, lines_removed=30, **SD)
    assert v.action == DISCARD and "worse" in v.reason


def test_small_gain_needs_a_larger_margin_when_it_adds_many_lines():
    cand = [0.975, 0.975, 0.975]                               # 2.5 sd better
    few = judge(cand, BEST, "minimize", NOISE, lines_added=5, **SD)
    many = judge(cand, BEST, "minimize", NOISE, lines_added=300, **SD)
    assert few.action == KEEP
    assert many.action == DISCARD and "+300 lines" in many.reason
    assert many.stats["threshold"] > few.stats["threshold"]


# --- re-baselining ----------------------------------------------------------------------

def test_best_is_remeasured_until_it_has_r_samples():
    assert should_remeasure_best([1.0], NOISE) and should_remeasure_best([1.0, 1.0], NOISE)
    assert not should_remeasure_best([1.0, 1.0, 1.0], NOISE)


def test_periodic_remeasure():
    cfg = JudgeConfig(rule="noise", remeasure_every=5)
    assert not should_remeasure_best([1.0] * 3, cfg, proposals_since_best_run=4)
    assert should_remeasure_best([1.0] * 3, cfg, proposals_since_best_run=5)


def test_lucky_best_is_corrected_by_its_remeasurements():
    cand = [0.97, 0.97, 0.97]
    lucky = [0.93]                                             # one lucky draw of a ~1.0 state
    assert judge(cand, lucky, "minimize", NOISE, noise_sd=0.01, noise_df=20).action == DISCARD
    remeasured = lucky + [1.01, 1.0, 1.03]                     # the re-runs drift back
    assert best_value(remeasured) == pytest.approx(0.9925)
    v = judge(cand, remeasured, "minimize", NOISE, noise_sd=0.01, noise_df=20)
    assert v.action == KEEP and v.stats["best_mean"] == pytest.approx(0.9925)


# --- unknown noise ------------------------------------------------------------------------

def test_unknown_noise_asks_for_confirmation_first():
    v = judge([0.9], [1.0], "minimize", NOISE)                  # nothing repeated anywhere
    assert v.action == RERUN and "noise unknown" in v.reason and v.runs == 3


def test_unknown_noise_uses_the_spread_of_the_samples_at_hand():
    best = [1.0, 1.01, 0.99]
    assert judge([0.90, 0.91, 0.89], best, "minimize", NOISE).action == KEEP
    assert judge([0.995, 1.02, 0.985, 1.0], best, "minimize", NOISE).action == DISCARD


def test_unknown_noise_without_rerun_budget_falls_back_to_strict():
    cfg = JudgeConfig(rule="noise", baseline_runs=1, confirm_runs=0)
    v = judge([0.9], [1.0], "minimize", cfg)
    assert v.action == KEEP and "strict" in v.reason


# --- plumbing -------------------------------------------------------------------------

def test_student_t_matches_tables():
    assert t_ppf(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert t_ppf(0.99, 2) == pytest.approx(6.965, abs=1e-3)
    assert t_ppf(0.95, None) == pytest.approx(1.645, abs=1e-3)
    assert t_cdf(0.0, 5) == pytest.approx(0.5) and t_cdf(2.015, 5) == pytest.approx(0.95, abs=1e-3)


def test_judge_rejects_bad_input():
    with pytest.raises(ValueError):
        judge([], [1.0], "minimize", NOISE)
    with pytest.raises(ValueError):
        judge([1.0], [1.0], "sideways", STRICT)
    with pytest.raises(ValueError):
        judge([1.0], [1.0], "minimize", JudgeConfig(rule="vibes"))


def test_config_rejects_bad_judge_settings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("judge:\n  confidence: 1.5\n")
    with pytest.raises(ConfigError, match="confidence"):
        load_config(path, base_dir=tmp_path)
    path.write_text("judge:\n  rule: strict\n  baseline_runs: 5\n")
    assert load_config(path, base_dir=tmp_path).judge.baseline_runs == 5
