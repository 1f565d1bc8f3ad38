"""The drift-proof judge: a candidate is confirmed only against runs of the best made
alongside its own (constructed samples, no I/O)."""
import pytest

from loop.setup.config import JudgeConfig
from loop.judge.judge import (DISCARD, KEEP, RERUN, back_to_back, judge, period_residuals)
from loop.judge.scoreboard import BASELINE, Scoreboard
from loop.record import Record
from loop.judge.stats import trend_residuals

CFG = JudgeConfig(rule="noise")                     # paired unless told otherwise
OLD_BEST = [1.00, 1.01, 0.99]                       # measured at the start of the night
SD = {"noise_sd": 0.01, "noise_df": 20}
PERIOD = [back_to_back(OLD_BEST)]                   # noise measured back to back


def drifted(t: float, value: float, rate: float = -0.02) -> float:
    """The machine got faster: every run's metric falls by 0.02 (2 sd) per run."""
    return value + rate * t


def test_paired_is_the_default_and_screening_asks_for_a_run_of_the_best():
    assert JudgeConfig(rule="noise").paired
    v = judge([0.97], OLD_BEST, "minimize", CFG, **SD, pairs=[], period_noise=PERIOD)
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1 and "next to the best" in v.reason
    assert v.paired and v.runs == 1


def test_a_first_run_that_is_not_plausibly_better_costs_one_run():
    v = judge([1.03], OLD_BEST, "minimize", CFG, **SD, pairs=[], period_noise=PERIOD)
    assert v.action == DISCARD and (v.runs if v.paired else 0) == 0


def test_drift_does_not_make_a_no_op_a_keep():
    # a no-op measured after 20 runs of drift: 0.4 better than the old best's mean
    c0 = drifted(20, 1.0)
    unpaired = judge([c0, drifted(22, 1.0), drifted(24, 1.0)], OLD_BEST, "minimize", CFG, **SD)
    assert unpaired.action == KEEP                  # the bug: drift read as a gain
    first = judge([c0], OLD_BEST, "minimize", CFG, **SD, pairs=[], period_noise=PERIOD)
    assert first.action == RERUN and (first.runs if first.paired else 0)
    # the engine's order: c0, b1, c1, b2, c2 (times 20..24), both states alike
    pairs = [[drifted(22, 1.0) + 0.004, drifted(21, 1.0) - 0.003],
             [drifted(24, 1.0) - 0.002, drifted(23, 1.0) + 0.005]]
    cand = [c0] + [c for c, _ in pairs]
    v = judge(cand, OLD_BEST, "minimize", CFG, **SD, pairs=pairs, period_noise=PERIOD)
    assert v.action != KEEP
    assert abs(v.stats["gain"]) < 0.01             # the drift cancels in the balanced design
    assert v.stats["best_period_mean"] < 0.6        # the best as measured now


def test_a_real_gain_under_drift_is_kept_after_two_runs_of_the_best_alongside():
    gain = 0.05                                     # 5 sd
    c0 = drifted(20, 1.0 - gain)
    pairs = [[drifted(22, 1.0 - gain) + 0.004, drifted(21, 1.0) - 0.003],
             [drifted(24, 1.0 - gain) - 0.002, drifted(23, 1.0) + 0.005]]
    v = judge([c0] + [c for c, _ in pairs], OLD_BEST, "minimize", CFG, **SD, pairs=pairs,
              period_noise=PERIOD)
    assert v.action == KEEP and v.stats["gain"] == pytest.approx(gain, abs=0.01)
    assert "alongside" in v.reason and v.stats["paired_runs"] == 2
    one = judge([c0, pairs[0][0]], OLD_BEST, "minimize", CFG, **SD, pairs=pairs[:1],
                period_noise=PERIOD)
    assert one.action == RERUN and (one.runs if one.paired else 0) == 1   # R runs before a keep


def test_reruns_stop_when_the_runs_of_the_best_keep_failing():
    runs = [0.97] * (1 + CFG.confirm_runs)          # every run of the best failed: no pairs
    v = judge(runs, OLD_BEST, "minimize", CFG, **SD, pairs=[], period_noise=PERIOD)
    assert v.action != RERUN


def test_trend_residuals_take_a_common_linear_drift_out():
    a = [(t, 5.0 + 0.3 * t) for t in (0, 2, 4)]      # two states, one slope, no noise
    b = [(t, 7.0 + 0.3 * t) for t in (1, 3)]
    ss, df = trend_residuals([a, b])
    assert ss == pytest.approx(0.0, abs=1e-12) and df == 2
    noisy = [(0, 1.0), (1, 3.0), (2, 2.0), (3, 4.0)]
    ss, df = trend_residuals([noisy])                # slope 0.8: residuals -.3 .9 -.9 .3
    assert df == 2 and ss == pytest.approx(1.8)
    assert period_residuals(1.0, [[1.0, 2.0]]) == (0.0, 0)   # 3 points, 3 parameters


def test_scoreboard_feeds_the_period_noise_and_rebuilds_it_from_records():
    board = Scoreboard()
    board.add(Record(0, "keep", BASELINE, samples=[1.0, 1.02, 0.98]))
    pairs = [[0.95, 1.0], [0.96, 1.01], [0.94, 0.99]]
    board.add(Record(1, "discard", "x", samples=[0.97, 0.95, 0.96, 0.94], pairs=pairs))
    assert len(board.period_noise) == 2 and board.period_noise[1][1] == 4
    rec = Record(2, "discard", "y", samples=[0.9], lines_added=1)
    v = board.judge(rec, "minimize", CFG)
    assert v.action == RERUN and (v.runs if v.paired else 0) == 1   # the engine runs the best first
