"""The sequential judge: screen on one run, confirm in pairs next to the best, stop as soon
as decided (constructed samples, no I/O)."""
import pytest

from loop.setup.config import JudgeConfig, load_config
from loop.errors import ConfigError
from loop.judge.judge import (DISCARD, KEEP, RERUN, back_to_back, drift_suspected, judge,
                        should_remeasure_best)

SEQ = JudgeConfig(rule="sequential")
BEST = [1.00, 1.01, 0.99]                        # val_bpb-like, minimized, R = 3 runs
SD = {"noise_sd": 0.01, "noise_df": 30}          # the night's noise, measured on its repeats
PERIOD = [back_to_back(BEST)]


def seq(candidate, best=BEST, pairs=None, cfg=SEQ, **kw):
    return judge(candidate, best, "minimize", cfg, **{**SD, **kw}, pairs=pairs or [],
                 period_noise=PERIOD)


# --- screening: one run ----------------------------------------------------------------

def test_a_worse_first_run_is_discarded_after_that_one_run():
    v = seq([1.02])
    assert v.action == DISCARD and v.also_best == 0
    assert "stopped after one run" in v.reason and v.stats["candidate_runs"] == 1


def test_a_first_run_a_little_better_is_stopped_too():
    # 0.7 sd better: p ~ 0.27 > screen_p (0.15); the paired default (p < 0.3) goes on
    v = seq([0.993])
    assert v.action == DISCARD and "gain within noise" in v.reason
    paired = judge([0.993], BEST, "minimize", JudgeConfig(), **SD, pairs=[],
                   period_noise=PERIOD)
    assert paired.action == RERUN


def test_a_promising_first_run_asks_for_a_run_of_the_best_alongside():
    v = seq([0.98])
    assert v.action == RERUN and v.also_best == 1 and "next to the best" in v.reason


def test_a_first_run_is_never_kept_alone_by_default():
    v = seq([0.90])                              # 10 sd better
    assert v.action == RERUN and v.also_best == 1


def test_fast_keep_keeps_an_overwhelming_first_run_when_asked_for():
    cfg = JudgeConfig(rule="sequential", fast_keep_p=0.001)
    v = seq([0.90], cfg=cfg)
    assert v.action == KEEP and "clearly better on one run" in v.reason
    assert seq([0.98], cfg=cfg).action == RERUN  # 2 sd: not overwhelming


def test_noise_unknown_asks_for_a_pair():
    v = judge([0.98], [1.0], "minimize", SEQ, pairs=[], period_noise=[])
    assert v.action == RERUN and v.also_best == 1 and "noise unknown" in v.reason


# --- pairs: keep as soon as it is sure, stop as soon as it is hopeless -------------------

def test_one_pair_is_enough_for_a_clear_gain():
    v = seq([0.95, 0.951], pairs=[[0.951, 1.0]])
    assert v.action == KEEP and "alongside" in v.reason and v.stats["paired_runs"] == 1


def test_the_paired_default_needs_two_pairs_for_the_same_gain():
    v = judge([0.95, 0.951], BEST, "minimize", JudgeConfig(), **SD, pairs=[[0.951, 1.0]],
              period_noise=PERIOD)
    assert v.action == RERUN


def test_a_first_run_that_was_luck_is_stopped_after_one_pair():
    v = seq([0.98, 1.01], pairs=[[1.01, 1.00]])
    assert v.action == DISCARD and "stopped early" in v.reason


def test_a_marginal_candidate_gets_another_pair_then_a_bounded_end():
    # 2 sd better over one pair (t ~ 1.6): plausible, not sure
    v = seq([0.98, 0.98], pairs=[[0.98, 1.0]])
    assert v.action == RERUN and v.also_best == 1
    cfg = JudgeConfig(rule="sequential", confirm_runs=1)
    end = seq([0.98, 0.98], pairs=[[0.98, 1.0]], cfg=cfg)
    assert end.action == DISCARD and "not confirmed in 1 pairs" in end.reason


def test_drift_alike_for_both_states_is_no_gain():
    # the machine got faster by 0.02 (2 sd) per run since the best was measured: the
    # first run looks 0.4 better; the runs made alongside drift alike and cancel it
    c0 = 1.0 - 0.02 * 20
    assert seq([c0]).action == RERUN             # screening sees only the stale best
    pairs = [[1.0 - 0.02 * 22, 1.0 - 0.02 * 21]]
    v = seq([c0, pairs[0][0]], best=BEST + [pairs[0][1]], pairs=pairs)
    assert v.action != KEEP


def test_when_the_best_drifts_later_looks_must_be_surer():
    flat = [1.00, 1.01, 0.99, 1.00, 1.005, 0.995]
    trend = [1.00, 0.98, 0.96, 0.94, 0.92, 0.90]  # 2 sd per run of the best
    assert not drift_suspected(flat, 0.01) and drift_suspected(trend, 0.01)
    pairs = [[0.975, 1.0], [0.98, 1.0], [0.98, 1.0]]
    cand = [0.975, 0.975, 0.98, 0.98]
    steady = seq(cand, best=flat, pairs=pairs)
    drifting = seq(cand, best=trend, pairs=pairs)
    assert steady.stats["threshold"] < drifting.stats["threshold"]
    assert drifting.stats["drift_suspected"] == 1.0 and steady.stats["drift_suspected"] == 0.0


def test_drift_needs_four_runs_of_the_best_to_be_suspected():
    assert not drift_suspected([1.0, 0.9, 0.8], 0.01)
    assert not drift_suspected([1.0, 0.9, 0.8, 0.7], 0.0)


def test_a_deletion_within_noise_is_kept_as_simpler_after_one_pair():
    v = seq([1.004, 1.0], pairs=[[1.0, 1.002]], lines_removed=30)
    assert v.action == KEEP and "simpler" in v.reason


def test_maximize_direction():
    best = [0.80, 0.81, 0.79]
    assert judge([0.70], best, "maximize", SEQ, **SD, pairs=[],
                 period_noise=[back_to_back(best)]).action == DISCARD
    v = judge([0.86, 0.86], best, "maximize", SEQ, **SD, pairs=[[0.86, 0.80]],
              period_noise=[back_to_back(best)])
    assert v.action == KEEP


# --- the best's runs and the configuration ---------------------------------------------

def test_the_best_is_measured_r_times_as_with_the_noise_rule():
    assert should_remeasure_best([1.0, 1.0], SEQ)
    assert not should_remeasure_best([1.0, 1.0, 1.0], SEQ)


def test_config_accepts_the_rule_and_rejects_bad_settings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("judge:\n  rule: sequential\n  screen_p: 0.2\n")
    cfg = load_config(path, base_dir=tmp_path).judge
    assert cfg.rule == "sequential" and cfg.screen_p == 0.2 and cfg.fast_keep_p == 0.0
    for bad in ("screen_p: 0", "screen_p: 1.5", "fast_keep_p: -0.1"):
        path.write_text(f"judge:\n  rule: sequential\n  {bad}\n")
        with pytest.raises(ConfigError, match=bad.split(":")[0]):
            load_config(path, base_dir=tmp_path)


def test_without_confirmation_runs_one_run_decides_at_the_confidence_bar():
    cfg = JudgeConfig(rule="sequential", confirm_runs=0)
    assert seq([0.95], cfg=cfg).action == KEEP   # 4.3 se better
    v = seq([0.985], cfg=cfg)                    # 1.3 se: plausible, not sure
    assert v.action == DISCARD and "on one run" in v.reason
