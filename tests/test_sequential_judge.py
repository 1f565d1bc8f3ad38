"""The sequential judge: screen on one run, confirm in pairs next to the best, stop as soon
as decided (constructed samples, no I/O)."""
import pytest

from loop.setup.config import JudgeConfig, load_config
from loop.errors import ConfigError
from loop.judge.judge import (DISCARD, KEEP, RERUN, back_to_back, best_runs_wanted,
                              drift_suspected, judge, judge_baseline, should_remeasure_best)
from loop.judge.scoreboard import Scoreboard
from loop.words import BASELINE
from loop.record import Record

SEQ = JudgeConfig(rule="sequential")
NOISE = JudgeConfig(rule="noise")                # the paired rule, the default before
BEST = [1.00, 1.01, 0.99]                        # val_bpb-like, minimized, R = 3 runs
SD = {"noise_sd": 0.01, "noise_df": 30}          # the night's noise, measured on its repeats
PERIOD = [back_to_back(BEST)]


def seq(candidate, best=BEST, pairs=None, cfg=SEQ, **kw):
    return judge(candidate, best, "minimize", cfg, **{**SD, **kw}, pairs=pairs or [],
                 period_noise=PERIOD)


# --- screening: one run ----------------------------------------------------------------

def test_a_worse_first_run_is_discarded_after_that_one_run():
    v = seq([1.02])
    assert v.action == DISCARD and (v.runs if v.paired else 0) == 0
    assert "stopped after one run" in v.reason and v.stats["candidate_runs"] == 1


def test_a_first_run_a_little_better_is_stopped_too():
    # 0.7 sd better: p ~ 0.27 > screen_p (0.15); the paired default (p < 0.3) goes on
    v = seq([0.993])
    assert v.action == DISCARD and "gain within noise" in v.reason
    paired = judge([0.993], BEST, "minimize", NOISE, **SD, pairs=[],
                   period_noise=PERIOD)
    assert paired.action == RERUN


def test_a_promising_first_run_asks_for_a_run_of_the_best_alongside():
    v = seq([0.98])
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1 and "next to the best" in v.reason


def test_an_overwhelming_first_run_is_kept_at_once_by_default():
    # changed with the default fast_keep_p 0.002 (was 0: never on one run)
    v = seq([0.90])                              # 10 sd better
    assert v.action == KEEP and "clearly better on one run" in v.reason
    assert v.stats["candidate_runs"] == 1 and (v.runs if v.paired else 0) == 0
    assert seq([0.98]).action == RERUN           # 2 sd: promising, not overwhelming


def test_fast_keep_off_asks_for_a_pair_even_for_an_overwhelming_first_run():
    cfg = JudgeConfig(rule="sequential", fast_keep_p=0.0)
    v = seq([0.90], cfg=cfg)
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1


def test_noise_unknown_asks_for_a_pair():
    v = judge([0.98], [1.0], "minimize", SEQ, pairs=[], period_noise=[])
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1 and "noise unknown" in v.reason


# --- pairs: keep as soon as it is sure, stop as soon as it is hopeless -------------------

def test_one_pair_is_enough_for_a_clear_gain():
    v = seq([0.95, 0.951], pairs=[[0.951, 1.0]])
    assert v.action == KEEP and "alongside" in v.reason and v.stats["paired_runs"] == 1


def test_the_paired_rule_needs_two_pairs_for_the_same_gain():
    v = judge([0.95, 0.951], BEST, "minimize", NOISE, **SD, pairs=[[0.951, 1.0]],
              period_noise=PERIOD)
    assert v.action == RERUN


def test_a_first_run_that_was_luck_is_stopped_after_one_pair():
    v = seq([0.98, 1.01], pairs=[[1.01, 1.00]])
    assert v.action == DISCARD and "stopped early" in v.reason


def test_a_marginal_candidate_gets_another_pair_then_a_bounded_end():
    # 2 sd better over one pair (t ~ 1.6): plausible, not sure
    v = seq([0.98, 0.98], pairs=[[0.98, 1.0]])
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1
    cfg = JudgeConfig(rule="sequential", confirm_runs=1)
    end = seq([0.98, 0.98], pairs=[[0.98, 1.0]], cfg=cfg)
    assert end.action == DISCARD and "not confirmed in 1 pairs" in end.reason


def test_drift_alike_for_both_states_is_no_gain():
    # the machine got faster by 0.02 (2 sd) per run since the best was measured: the
    # first run looks 0.4 better; the runs made alongside drift alike and cancel it
    c0 = 1.0 - 0.02 * 20
    no_fast = JudgeConfig(rule="sequential", fast_keep_p=0.0)
    assert seq([c0], cfg=no_fast).action == RERUN  # screening sees only the stale best
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
    assert "look 3 must be 3x as sure" in drifting.reason and "drift" not in steady.reason


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

def test_the_baseline_is_measured_r_times_a_new_best_needs_keep_runs():
    # changed with keep_runs (default 1): a kept candidate is not re-run to R runs
    assert judge_baseline([1.0, 1.0], SEQ).action == RERUN
    assert judge_baseline([1.0, 1.0, 1.0], SEQ).action == KEEP
    assert not should_remeasure_best([1.0], SEQ)
    three = JudgeConfig(rule="sequential", keep_runs=3)
    assert should_remeasure_best([1.0], three) and best_runs_wanted([1.0], three) == 2


def test_config_accepts_the_rule_and_rejects_bad_settings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("judge:\n  rule: sequential\n  screen_p: 0.2\n")
    cfg = load_config(path, base_dir=tmp_path).judge
    assert cfg.rule == "sequential" and cfg.screen_p == 0.2 and cfg.fast_keep_p == 0.002
    assert (cfg.confidence, cfg.keep_runs, cfg.refresh_every) == (0.99, 1, 16)
    for bad in ("screen_p: 0", "screen_p: 1.5", "fast_keep_p: -0.1", "keep_runs: 0",
                "refresh_every: -1"):
        path.write_text(f"judge:\n  rule: sequential\n  {bad}\n")
        with pytest.raises(ConfigError, match=bad.split(":")[0]):
            load_config(path, base_dir=tmp_path)


def test_without_confirmation_runs_one_run_decides_at_the_confidence_bar():
    cfg = JudgeConfig(rule="sequential", confirm_runs=0)
    assert seq([0.95], cfg=cfg).action == KEEP   # 4.3 se better
    v = seq([0.985], cfg=cfg)                    # 1.3 se: plausible, not sure
    assert v.action == DISCARD and "on one run" in v.reason


# --- drift: a fresh run of the best, and no one-run keeps ---------------------------------

SLOWED = BEST + [1.06]     # a refresh of the best after the machine slowed down: 6 sd worse


def test_a_step_in_the_best_s_latest_run_is_a_suspected_drift():
    assert drift_suspected(SLOWED, 0.01)
    assert not drift_suspected(BEST + [1.015], 0.01)       # 1.5 sd: noise
    long = [1.00, 1.01, 0.99] * 3
    assert drift_suspected(long + [1.04], 0.01)             # a step the slope misses:
    assert not drift_suspected(long + [1.04], 0.01, shift_z=10.0)


def test_when_the_machine_slowed_the_screen_compares_with_the_fresh_run_of_the_best():
    # 1.04 is worse than the best's old runs (1.00) but 2 sd better than its run just now
    v = seq([1.04], best=SLOWED)
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1
    assert v.stats["best_runs"] == 1 and v.stats["best_mean"] == 1.06
    assert v.stats["drift_suspected"] == 1.0 and "compared with its latest run" in v.reason
    # against the old runs (as the screen did before, and does without a drift) it is lost
    assert seq([1.04]).action == DISCARD
    assert seq([1.04], best=BEST + [1.01]).action == DISCARD


def test_no_keep_on_one_run_while_the_best_drifts():
    sped_up = BEST + [0.94]                      # the machine got faster: 6 sd better
    v = seq([0.84], best=sped_up)                # 10 sd better than the fresh run
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1
    assert v.stats["drift_suspected"] == 1.0
    assert seq([0.84]).action == KEEP            # the same run, the best steady: kept


def test_the_best_is_refreshed_when_stale_and_before_every_idea_while_it_drifts():
    assert not should_remeasure_best(BEST, SEQ, proposals_since_best_run=15)
    assert should_remeasure_best(BEST, SEQ, proposals_since_best_run=16)
    assert not should_remeasure_best(BEST, JudgeConfig(rule="sequential", refresh_every=0),
                                     proposals_since_best_run=100)
    assert should_remeasure_best(SLOWED, SEQ, 1, noise_sd=0.01)
    assert not should_remeasure_best(SLOWED, SEQ, 0, noise_sd=0.01)   # just run
    assert not should_remeasure_best(SLOWED, SEQ, 1)       # no noise measured: no test
    assert not should_remeasure_best(BEST + [1.0], SEQ, 1, noise_sd=0.01)


def test_the_scoreboard_asks_for_a_fresh_run_of_a_drifting_best():
    score = Scoreboard()
    score.add(Record(iteration=0, status="keep", description=BASELINE, samples=list(BEST)))
    score.add(Record(iteration=1, status="discard", description="x", samples=[1.03, 1.02]))
    assert score.best_runs_wanted(SEQ) == 0
    score.remeasured(1.06)                       # a refresh (or a run beside a candidate)
    score.add(Record(iteration=2, status="discard", description="y", samples=[1.09]))
    assert score.best_runs_wanted(SEQ) == 1      # drifting: the best runs before each idea
    assert score.best_runs_wanted(NOISE) == 0


def test_confidence_sets_the_paired_bar_and_screen_p_does_not():
    pairs = [[0.975, 1.0]]
    base = seq([0.975, 0.975], pairs=pairs)
    looser = seq([0.975, 0.975], pairs=pairs,
                 cfg=JudgeConfig(rule="sequential", confidence=0.95))
    other_screen = seq([0.975, 0.975], pairs=pairs,
                       cfg=JudgeConfig(rule="sequential", screen_p=0.3))
    assert looser.stats["threshold"] < base.stats["threshold"]
    assert other_screen.stats["threshold"] == base.stats["threshold"]


def test_two_candidates_in_a_row_slower_than_the_best_make_the_engine_refresh_it():
    # the run of README's transcript: the machine slowed after the baseline, every idea
    # trained fewer steps and looked worse; one slower candidate can be its code, two are
    # the machine
    score = Scoreboard()
    score.add(Record(iteration=0, status="keep", description=BASELINE, samples=list(BEST),
                     throughput=[25, 26, 24]))
    score.add(Record(iteration=1, status="discard", description="a", samples=[1.08],
                     throughput=[15]))
    assert score.best_runs_wanted(SEQ) == 0 and not score.speed_moved
    score.add(Record(iteration=2, status="discard", description="b", samples=[1.09],
                     throughput=[14]))
    assert score.speed_moved and score.best_runs_wanted(SEQ) == 1
    assert score.best_runs_wanted(NOISE) == 0    # the paired rule does not refresh
    score.remeasured(1.08)                       # the refresh shows the step...
    assert not score.speed_moved
    score.add(Record(iteration=3, status="discard", description="c", samples=[1.07],
                     throughput=[15]))
    assert score.best_runs_wanted(SEQ) == 1      # ...so the best runs before each idea
    v = score.judge(Record(iteration=4, status="", description="d", samples=[1.05],
                           throughput=[15]), "minimize", SEQ)
    assert v.stats["best_runs"] == 1 and v.action == RERUN   # vs the fresh run: promising


def test_a_faster_then_a_slower_candidate_is_code_not_the_machine():
    score = Scoreboard()
    score.add(Record(iteration=0, status="keep", description=BASELINE, samples=list(BEST),
                     throughput=[25, 26, 24]))
    score.add(Record(iteration=1, status="discard", description="a", samples=[1.08],
                     throughput=[40]))
    score.add(Record(iteration=2, status="discard", description="b", samples=[1.09],
                     throughput=[14]))
    assert not score.speed_moved and score.best_runs_wanted(SEQ) == 0
