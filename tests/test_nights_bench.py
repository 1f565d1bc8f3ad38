"""benchmarks/nights.py --quick: the table has every rule and condition, and its figures
are sane (not timings)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import nights  # noqa: E402


def test_quick_table_has_every_rule_and_condition(capsys):
    assert nights.main(["--quick", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    rows = [r for r in out.splitlines() if re.match(r"\| [\d.]+ \| -?[\d.]+ \| ", r)]
    conditions = len(nights.NOISES) + len(nights.DRIFTS)
    assert len(rows) == conditions * len(nights.RULES)
    seen = {(r.split("|")[1].strip(), r.split("|")[2].strip(), r.split("|")[3].strip())
            for r in rows}
    assert len(seen) == len(rows)                # one row per rule and condition
    ceiling = float(re.search(r"no harmful one\): ([\d.]+)", out).group(1))
    for r in rows:
        cells = [c.strip() for c in r.split("|")[1:-1]]
        gain = float(cells[3].split(" ± ")[0])
        assert gain <= ceiling                   # no rule beats every helpful idea kept
        tried = float(cells[7])
        assert 0 < tried <= 95
        if cells[2] == "strict":
            assert tried == 95.0                 # one run per idea, one for the baseline
    assert "targets (sequential vs strict and paired):" in out


def test_a_night_is_the_same_for_the_same_seed_and_its_proposals_for_every_rule():
    a = nights.night(nights.RULES["sequential"], 3, 1.0, 40)
    b = nights.night(nights.RULES["sequential"], 3, 1.0, 40)
    assert a == b
    s = nights.night(nights.RULES["strict"], 3, 1.0, 40)
    assert s.tried == 39
    # the first ideas are the same ones under every rule: the oracle sums agree so far
    short = nights.night(nights.RULES["strict"], 3, 1.0, a.tried + 1)
    assert short.oracle == pytest.approx(a.oracle)


def test_the_default_beats_the_paired_rule_when_the_machine_slows_down():
    # every idea looks worse than the best's old runs: the first sequential rule and the
    # paired one discard nearly all; the default screens against a fresh run of the best
    def gain(rule):
        return sum(nights.night(nights.RULES[rule], k, 1.0, 96, drift=-0.25).gain
                   for k in range(30))
    assert gain("sequential") > 1.3 * max(gain("paired"), gain("sequential-v1"))


def test_strict_keeps_noise_and_sequential_does_not():
    strict = [nights.night(nights.RULES["strict"], k, 1.0, 96) for k in range(30)]
    seq = [nights.night(nights.RULES["sequential"], k, 1.0, 96) for k in range(30)]
    rate = lambda ns: sum(n.noop_keeps for n in ns) / sum(n.noops for n in ns)  # noqa: E731
    assert rate(strict) > 0.08 and rate(seq) < 0.03


def test_bad_arguments_are_one_clear_error(capsys):
    with pytest.raises(SystemExit):
        nights.main(["--rules", "vibes"])
    assert "--rules" in capsys.readouterr().err



def test_the_surface_task_knows_its_truth(tmp_path):
    import surface_nights as sn
    repo = sn.make_repo(tmp_path, noise=0.123, run_s=0.0)
    assert "NOISE = 0.123" in (repo / "surface" / "surface.py").read_text()
    assert sn.git(repo, "status", "--porcelain") == ""          # committed, ready to run
    truth = sn.load_surface()
    start = sn.constants((repo / "surface" / "train.py").read_text())
    assert len(start) == 12
    assert truth.true_loss({**start, **truth.OPTIMUM}) == pytest.approx(truth.FLOOR)
    assert truth.true_loss({**start, "F": 50.0}) == truth.true_loss(start)   # a no-op
    assert truth.true_loss(start) - truth.FLOOR == pytest.approx(0.32, abs=0.01)


def test_the_known_noise_reference_keeps_little_noise_without_drift(capsys):
    assert nights.main(["--quick", "--workers", "1", "--rules", "known-noise",
                        "--noise", "1", "--drift", ""]) == 0
    row = [r for r in capsys.readouterr().out.splitlines() if "| known-noise |" in r]
    assert len(row) == 1 and float(row[0].split("|")[6].strip().rstrip("%")) < 5


def test_the_frontier_trades_false_keeps_for_gain(capsys):
    assert nights.main(["--frontier", "--nights", "20", "--workers", "1", "--noise", "1",
                        "--drift", ""]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| 1 | 0 |")]
    assert len(rows) == 1 + len(nights.FRONTIER)
    fk = [float(r.split("|")[6].strip().rstrip("%")) for r in rows[1:]]
    assert fk[-1] > fk[0] + 5                    # the loosest bar keeps far more no-ops
