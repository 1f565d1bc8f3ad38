"""finalize's units and its screen: a kept commit that sets several settings is split into
units left out alone (a passenger gets its own verdict), and units that look null are left
out together, dropped by one comparison. Real git repos, real runs (tests/conftest.py)."""
import json

from conftest import TOY_TASK, git, make_repo
from loop.engine.engine import Engine
from loop.finalize import plan
from loop.finalize.estimate import group_call, night_evidence
from loop.finalize.morning import finalize
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

# X matters; LOG_EVERY, CKPT_EVERY, U1 and U2 are read by nothing the score depends on; the
# seed's noise is the same for any code, so paired runs differ by the code alone
TRAIN = """\
import os, random
X = 3.0
LOG_EVERY = 10
CKPT_EVERY = 100
Y = 2.0
U1 = 1
U2 = 1
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
noise = random.Random(seed).gauss(0, 1) * 0.01
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2 + noise:.6f}")
"""


class Scripted:
    def __init__(self, changes):
        self.n, self.changes = 0, changes

    def propose(self, context):
        desc, pairs = self.changes[self.n]
        self.n += 1
        text = context.files["train.py"]
        for old, new in pairs:
            assert old in text, (old, text)
            text = text.replace(old, new, 1)
        return Proposal(desc, files={"train.py": text})


def night(tmp_path, changes, min_delta=-1.0, seed=0):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": TRAIN,
                                         "grade.py": "# protected\n"})
    cfg = Config(task="task", base_dir=repo, tag="n", iterations=len(changes), seed=seed,
                 judge=JudgeConfig(rule="strict", min_delta=min_delta))
    assert Engine(cfg, out=lambda s: None, proposer=Scripted(changes)).run().exit_code == 0
    return repo, cfg


def rows(repo):
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    return {r.split(" | ")[0][2:]: r.split(" | ") for r in report.splitlines()
            if r.startswith("| ") and "commit" not in r}


def test_a_passenger_setting_is_split_off_and_dropped_with_its_own_verdict(tmp_path,
                                                                           mlflow_uri):
    repo, cfg = night(tmp_path, [
        ("Set X to 1.0, LOG_EVERY to 1", [("X = 3.0", "X = 1.0"), ("LOG_EVERY = 10",
                                                                     "LOG_EVERY = 1")])])
    assert finalize(cfg, out=lambda s: None, share=None) == 0
    table = rows(repo)
    sha = git(repo, "rev-parse", "autoresearch/n")[:7]
    assert set(table) == {f"{sha}/1", f"{sha}/2"}
    assert table[f"{sha}/1"][1].startswith("X: 3.0 -> 1.0 (part 1 of 2")
    assert table[f"{sha}/1"][4] == "matters"
    assert table[f"{sha}/2"][1].startswith("LOG_EVERY: 10 -> 1 (part 2 of 2")
    assert table[f"{sha}/2"][4] == "dropped: noise"
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "X = 1.0\n" in final and "LOG_EVERY = 10\n" in final
    log = git(repo, "log", "--format=%B", "main..autoresearch/n-final")
    assert "Autoresearch-Part: 1/2 X: 3.0 -> 1.0" in log and "LOG_EVERY" not in \
        log.split("Autoresearch-Kept-Commit")[0].split("\n", 1)[1].replace(
            "(part 1 of 2 of: Set X to 1.0, LOG_EVERY to 1)", "")


def test_a_group_of_null_units_is_dropped_with_one_comparison(tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path, [
        ("Set X to 1.0", [("X = 3.0", "X = 1.0")]),              # night gain +4
        ("Set U1 to 2", [("U1 = 1", "U1 = 2")]),                  # nothing
        ("Set Y to 4.0", [("Y = 2.0", "Y = 4.0")]),              # night gain +4
        ("Set U2 to 2, CKPT_EVERY to 7", [("U2 = 1", "U2 = 2"),   # nothing, twice
                                          ("CKPT_EVERY = 100", "CKPT_EVERY = 7")])])
    lines = []
    assert finalize(cfg, out=lines.append, share=None) == 0
    table = rows(repo)
    nulls = [name for name, r in table.items() if r[4] == "dropped: noise"]
    assert len(nulls) == 3
    # one comparison left the three out together: the same effect cell, naming the others
    effects = {table[name][3].split(" with ")[0] for name in nulls}
    assert len(effects) == 1 and all(" with " in table[name][3] for name in nulls)
    assert {int(table[name][5]) for name in nulls} == {2}           # its pairs
    assert [r[4] for name, r in table.items() if name not in nulls] == ["matters", "matters"]
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "X = 1.0\n" in final and "Y = 4.0\n" in final and "U1 = 1\n" in final \
        and "U2 = 1\n" in final and "CKPT_EVERY = 100\n" in final


def test_a_passenger_the_nights_discarded_attempts_show_null_is_dropped_with_no_run(
        tmp_path, mlflow_uri):
    # LOG_EVERY rides with X; then the night tries LOG_EVERY alone three times, each
    # discarded (within noise of its parent, short of min_delta): that is evidence enough.
    # Seed 16: the night's three deltas are within half the band that finalize's five runs
    # of the reference measure (the runs are seeded, so this is the same every time)
    repo, cfg = night(tmp_path, [
        ("Set X to 1.0, LOG_EVERY to 1", [("X = 3.0", "X = 1.0"),
                                          ("LOG_EVERY = 10", "LOG_EVERY = 1")]),
        ("Set LOG_EVERY to 5", [("LOG_EVERY = 1", "LOG_EVERY = 5")]),
        ("Set LOG_EVERY to 7", [("LOG_EVERY = 1", "LOG_EVERY = 7")]),
        ("Set LOG_EVERY to 3", [("LOG_EVERY = 1", "LOG_EVERY = 3")])], min_delta=0.5, seed=16)
    lines: list[str] = []
    assert finalize(cfg, out=lines.append, share=None) == 0
    table = rows(repo)
    sha = git(repo, "rev-parse", "autoresearch/n")[:7]
    assert set(table) == {f"{sha}/1", f"{sha}/2"}
    passenger = table[f"{sha}/2"]
    assert passenger[4].startswith("dropped: null by the night (null by the night's "
                                   "attempts: 3 of the night's 4 attempts that set it")
    assert passenger[3] == "" and passenger[5] == "0"            # no effect measured, no pair
    assert table[f"{sha}/1"][4] == "matters"
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    assert "Decided from the night's own attempts (no run): 1 of 2 units" in report
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "X = 1.0\n" in final and "LOG_EVERY = 10\n" in final
    # the code without LOG_EVERY's change was run only as the finished branch (its check)
    runs = [json.loads(line) for line in
            (repo / ".autoresearch" / "n" / "finalize.jsonl").read_text().splitlines()]
    tip = git(repo, "rev-parse", "autoresearch/n-final")
    without = {e["commit"] for e in runs if e.get("event") == "measure"
               and "LOG_EVERY = 10\n" in git(repo, "show", f"{e['commit']}:task/train.py")
               and "X = 1.0\n" in git(repo, "show", f"{e['commit']}:task/train.py")}
    assert without <= {tip}


def test_the_nights_evidence_needs_enough_attempts_and_none_alone_beyond_noise():
    null = night_evidence([(0.01, True), (-0.02, True), (0.5, False), (0.0, False)], 0.05)
    assert null.null and null.within == 3 and null.attempts == 4
    assert not night_evidence([(0.01, True), (-0.02, True)], 0.05).null        # two: too few
    moved = night_evidence([(0.01, True), (-0.02, True), (0.0, False), (0.2, True)], 0.05)
    assert not moved.null and moved.alone_beyond == 1          # one alone moved it: it acts
    # a lucky parent makes its children look worse: its luck widens the worse side only
    lucky = [(-0.16, True), (-0.17, True), (0.02, True)]
    assert not night_evidence(lucky, 0.05).null and night_evidence(lucky, 0.05, 0.05).null
    assert not night_evidence([(0.16, True), (0.0, True), (0.0, True)], 0.05, 0.05).null


def test_dependent_hunks_stay_one_unit_and_settings_on_adjacent_lines_split():
    before = {"t.py": "A = 1\nB = 2\n\n\ndef f():\n    return A\n"}
    after = {"t.py": "A = 5\nB = 7\nSCALE = 3\n\n\ndef f():\n    return A * SCALE\n"}
    fine, parts = plan.split([before, after])
    assert [p.label for p in parts] == ["A: 1 -> 5", "B: 2 -> 7",
                                        "t.py line 3; t.py line 7"]
    assert fine[-1] == after and fine[1] == {"t.py": "A = 5\nB = 2\n\n\ndef f():\n"
                                             "    return A\n"}
    whole = plan.split([before, {"t.py": "A = 5\nB = 2\n\n\ndef f():\n    return A + 1\n"}])
    assert [p.parts for p in whole[1]] == [2, 2]
    one = plan.split([before, {"t.py": "A = 5\nB = 2\n\n\ndef f():\n    return A\n"}])
    assert [p.parts for p in one[1]] == [1]


def test_the_group_call_drops_below_one_noise_sd_and_keeps_what_helps():
    noise = [[0.01, -0.01, 0.02, -0.02]]
    assert group_call([0.5, 0.6, 0.55], noise, 0.05, 4).verdict == "matters"
    null = group_call([0.0, 0.01, -0.01], noise, 0.05, 4)
    assert null.verdict == "null" and null.lose < 0.051
    assert group_call([0.5], [], 0.05, 4).verdict == ""           # one pair, noise unknown
    assert group_call([0.5], noise, 0.05, 4).verdict == "matters"  # ... known from others
    assert group_call([0.04], noise, 0.05, 4).verdict == ""        # neither yet
