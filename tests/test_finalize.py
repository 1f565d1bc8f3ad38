"""`autoresearch finalize`: a night's kept changes re-measured and ablated on real git repos
and real runs; the branch to merge holds exactly those that matter."""
import json
import os
import signal
import subprocess
import sys
import time

from conftest import TOY_TASK, git, make_repo
from loop.engine.engine import Engine
from loop.finalize import plan
from loop.finalize.estimate import estimate
from loop.finalize.morning import finalize
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

# X and Y matter, W only harms, A and B help only together, UNUSED does nothing; the seed's
# noise is the same for any code, so runs paired on a seed differ by the code alone
TRAIN = """\
import os, random
X = 3.0
Y = 2
W = 0.0
A = 0
B = 0
UNUSED = 1
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
noise = random.Random(seed).gauss(0, 1) * 0.01
together = -1.0 if A and B else 0.0
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2 + W + together + noise:.6f}")
"""

# (description, old line, new line): kept in this order by a judge that keeps anything not
# worse by 1 or more
CHANGES = [
    ("set X to 1", "X = 3.0", "X = 1.0"),                       # matters: +4
    ("explain X", "X = 1.0", "X = 1.0   # the optimum"),        # no-op: a comment
    ("set Y to 3", "Y = 2", "Y = 3"),                           # superseded by Y = 4
    ("set W to 0.5", "W = 0.0", "W = 0.5"),                     # harmful: -0.5
    ("set A to 1", "A = 0", "A = 1"),                           # matters with B
    ("set UNUSED to 2", "UNUSED = 1", "UNUSED = 2"),            # noise
    ("set Y to 4", "Y = 3", "Y = 4"),                           # matters: +1
    ("set B to 1", "B = 0", "B = 1"),                           # matters with A
]
EXPECTED = ["matters", "no-op", "superseded", "harmful", "matters", "noise", "matters",
            "matters"]


class Scripted:
    def __init__(self, changes=CHANGES):
        self.n, self.changes = 0, changes

    def propose(self, context):
        desc, old, new = self.changes[self.n]
        self.n += 1
        text = context.files["train.py"]
        assert old in text, (old, text)
        return Proposal(desc, files={"train.py": text.replace(old, new, 1)})


def night(tmp_path, train=TRAIN, changes=CHANGES, min_delta=-1.0):
    """A night that keeps every change of `changes` (its judge keeps anything not worse by
    more than -min_delta)."""
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": train,
                                         "grade.py": "# protected\n"})
    cfg = Config(task="task", base_dir=repo, tag="n", iterations=len(changes),
                 judge=JudgeConfig(rule="strict", min_delta=min_delta))
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted(changes)).run()
    assert stop.exit_code == 0
    base = git(repo, "rev-parse", "main")
    assert len(git(repo, "rev-list", f"{base}..autoresearch/n").split()) == len(changes)
    return repo, cfg


def verdicts(repo):
    """finalize.md's table: description -> verdict cell."""
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    rows = [r.split(" | ") for r in report.splitlines() if r.startswith("| ")
            and "commit" not in r]
    return {r[1]: r[4] for r in rows}


def measures(repo):
    path = repo / ".autoresearch" / "n" / "finalize.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines())
            if e["event"] == "measure"]


def test_finalize_keeps_what_matters_and_drops_the_rest(tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path)
    lines = []
    assert finalize(cfg, out=lines.append, share=None) == 0
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    rows = [r for r in report.splitlines() if r.startswith("| ") and "commit" not in r]
    assert [r.split(" | ")[4].split(" (")[0].removeprefix("dropped: ") for r in rows] \
        == EXPECTED
    assert "final vs start +8.5 ± 0" in report         # 8 -> -0.5, the seed's noise cancels
    # the branch: the four that matter, in order, each with its measured effect
    base = git(repo, "rev-parse", "main")
    log = git(repo, "log", "--reverse", "--format=%B%x00", f"{base}..autoresearch/n-final")
    messages = [m.strip() for m in log.split("\x00") if m.strip()]
    assert [m.splitlines()[0] for m in messages] == \
        ["set X to 1", "set A to 1", "set Y to 4", "set B to 1"]
    assert "Autoresearch-Effect: +4 ± 0 score (left out alone, " in messages[0]
    assert "Autoresearch-Effect: +1 ± 0 score (left out " in messages[1]   # maybe in a group
    assert "Autoresearch-Brings:" in messages[2]       # Y = 3 was its context
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "X = 1.0\n" in final and "Y = 4" in final and "A = 1" in final and "B = 1" in final
    assert "W = 0.0" in final and "UNUSED = 1" in final and "#" not in final.split("\n")[1]
    # without the harmful change the branch is better than the final code: it reproduces it
    assert "it reproduces the final gain" in report
    assert any("dropped without a run" in line for line in lines)
    # no run made twice: one run per (tree, seed)
    keys = [(e["tree"], e["k"]) for e in measures(repo)]
    assert len(keys) == len(set(keys))
    assert (repo / ".autoresearch" / "n" / "finalize.html").exists()


def test_finalize_is_recorded_in_mlflow_like_a_night_and_a_repeat_replaces_it(
        tmp_path, mlflow_uri):
    from mlflow.tracking import MlflowClient
    repo, cfg = night(tmp_path)
    for _ in range(2):                      # the second finds every run in the journal
        assert finalize(cfg, out=lambda s: None, share=None) == 0
    client = MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("autoresearch/toy")
    runs = client.search_runs([exp.experiment_id], "tags.`autoresearch.finalize` = 'n'")
    (parent,) = [r for r in runs if r.info.run_name == "finalize/n"]
    children = [r for r in runs
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 1 + len(children)              # the first finalize's runs replaced
    assert parent.data.metrics["gain_score"] == 8.5 and parent.data.metrics["matters"] == 4
    last = git(repo, "rev-parse", "autoresearch/n")[:7]           # set B to 1
    assert parent.data.tags[f"verdict.{last}"] == "matters"
    by_kind = {}
    for r in children:
        by_kind.setdefault(r.data.tags["kind"], []).append(r)
    assert [len(by_kind[k]) for k in ("gain", "check")] == [1, 1] and by_kind["group"]
    harmful = [r for r in by_kind["group"] if "harmful" in r.data.tags.get("verdict", "")]
    assert len(harmful) == 1 and harmful[0].data.metrics["effect"] == -0.5
    values = client.get_metric_history(by_kind["gain"][0].info.run_id, "reference_score")
    assert len(values) == by_kind["gain"][0].data.metrics["pairs"]   # one per seed
    assert all(r.info.status == "FINISHED" for r in runs)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"finalize.md", "finalize.html"} <= artifacts


def test_kill_9_then_the_same_command_repeats_no_run(tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    (tmp_path / "night.yaml").write_text(f"task: {repo / 'task'}\n")
    cmd = [sys.executable, "-m", "loop", "finalize", "--tag", "n", "--config",
           str(tmp_path / "night.yaml")]
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    journal = repo / ".autoresearch" / "n" / "finalize.jsonl"
    while not (journal.exists() and len(measures(repo)) >= 3):
        assert proc.poll() is None, "finalize ended before it was killed"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(measures(repo))
    assert before >= 3 and not any(e["event"] == "done" for e in
                                   map(json.loads, journal.read_text().splitlines()))
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{before} runs already in finalize.jsonl" in done.stdout
    keys = [(e["tree"], e["k"]) for e in measures(repo)]
    assert len(keys) == len(set(keys)) and len(keys) > before
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    assert "| set W to 0.5 |" in report


# P and Q do one job: either one is enough. Left out one at a time, each looks useless.
EITHER = """\
import os, random
P = 0
Q = 0
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
noise = random.Random(seed).gauss(0, 1) * 0.01
print(f"score: {(0.0 if P or Q else 1.0) + noise:.6f}")
"""


def test_two_changes_doing_one_job_one_goes_back_when_the_branch_loses_the_gain(
        tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path, EITHER, [("set P to 1", "P = 0", "P = 1"),
                                         ("set Q to 1", "Q = 0", "Q = 1")])
    lines = []
    assert finalize(cfg, out=lines.append, share=None) == 0
    assert verdicts(repo) == {
        "set P to 1": "matters (re-added: the branch without it was worse than the final code)",
        "set Q to 1": "dropped: noise"}
    assert any("re-adding" in line and "(set P to 1), the dropped change that measured best"
               in line for line in lines)
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "P = 1" in final and "Q = 0" in final
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    assert "it reproduces the final gain (not worse beyond noise)" in report


# G helps by 1; U does nothing. Each run's noise (+-1) depends on the code as well as the
# seed, so paired runs do not cancel it: 6 pairs cannot show G's gain beyond noise at 99 %.
SWING = """\
import os
G = 0
U = 0
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
swing = 1.0 if (seed + G + U) % 2 else -1.0
print(f"score: {5.0 - G + swing:.6f}")
"""


def test_a_change_worth_one_noise_sd_stays_though_not_beyond_noise(tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path, SWING, [("set G to 1", "G = 0", "G = 1"),
                                        ("set U to 1", "U = 0", "U = 1")], min_delta=-5.0)
    lines = []
    assert finalize(cfg, out=lines.append, share=None) == 0
    assert verdicts(repo) == {"set G to 1": "matters", "set U to 1": "dropped: noise"}
    assert not any("re-adding" in line for line in lines)     # kept by its own measure
    final = git(repo, "show", "autoresearch/n-final:task/train.py")
    assert "G = 1" in final and "U = 0" in final


# -- the plan: what the diffs alone decide --------------------------------------------------
def states(*texts):
    return [{"train.py": t} for t in texts]


def test_a_comment_only_change_is_a_noop_and_an_overwritten_one_superseded():
    s = states("X = 1\nY = 2\n", "X = 1  # why\nY = 2\n", "X = 5\nY = 2\n", "X = 6\nY = 2\n")
    found = plan.facts(s)
    assert [f.noop for f in found] == [True, False, False]
    assert [f.superseded for f in found] == [False, True, False]


def test_changes_on_overlapping_lines_are_one_unit_left_out_together():
    s = states("X = 1\nY = 2\nZ = 3\n", "X = 2\nY = 3\nZ = 3\n", "X = 9\nY = 3\nZ = 4\n")
    found = plan.facts(s)
    assert not found[0].superseded and found[0].overwriters == {2}
    (unit,) = plan.units(s, found)
    assert unit.members == [1, 2] and unit.variant == {"train.py": "X = 1\nY = 2\nZ = 3\n"}


def test_a_change_made_again_brings_every_superseded_change_its_line_came_through():
    # G set three times (hard surface, seed 4): the last one's line is the second's, the
    # second's the first's; both are superseded and the branch needs both as context
    s = states("X = 1\nG = 1\n", "X = 1\nG = 2\n", "X = 1\nG = 3\n", "X = 1\nG = 4\n")
    found = plan.facts(s)
    assert [f.superseded for f in found] == [True, True, False]
    (step,) = plan.rebuild(s, found, [3])
    assert step.brings == [1, 2] and step.files == {"train.py": "X = 1\nG = 4\n"}
    assert plan.reference(s, found) == {"train.py": "X = 1\nG = 4\n"}


def test_separate_changes_are_left_out_one_at_a_time():
    s = states("X = 1\nY = 2\n", "X = 2\nY = 2\n", "X = 2\nY = 3\n")
    units = plan.units(s, plan.facts(s))
    assert [(u.members, u.variant) for u in units] == \
        [([1], {"train.py": "X = 1\nY = 3\n"}), ([2], {"train.py": "X = 2\nY = 2\n"})]


def test_the_estimate_decides_once_the_interval_leaves_zero_out():
    assert estimate([1.0], [], 0.99, 6).decided is False          # one pair: noise unknown
    e = estimate([1.0, 1.1], [[0.0, 0.1, -0.1]], 0.99, 6)
    assert e.decided and e.sign == 1
    tie = estimate([0.0, 0.0], [], 0.99, 6)
    assert tie.decided and tie.sign == 0                            # identical runs
    assert estimate([0.3, -0.2, 0.1, -0.1, 0.2, -0.3], [], 0.99, 6).sign == 0


def test_the_estimate_says_how_likely_the_reference_is_better_within_noise():
    e = estimate([3.0, -1.0, 3.0, -1.0, 3.0, -1.0], [], 0.99, 6)
    assert e.decided and e.sign == 0 and 0.8 < e.helps < 0.99
    assert estimate([0.0, 0.0], [], 0.99, 6).helps == 0.5
    assert estimate([-1.0, -1.0], [], 0.99, 6).helps == 0.0        # exact, and worse


def test_a_comparison_leaning_to_helping_goes_on_past_max_pairs_to_twice_that():
    lean = [0.05, -0.03, 0.04, -0.02, 0.03, -0.01]          # helps ~0.75: below 0.8
    assert estimate(lean, [], 0.99, 6).decided                # without `likely`: at 6 pairs
    assert not estimate(lean, [], 0.99, 6, likely=0.8).decided
    assert estimate(lean * 2, [], 0.99, 6, likely=0.8).decided   # 12 pairs: the cap
    assert estimate([-x for x in lean], [], 0.99, 6, likely=0.8).decided   # leans the other way


def test_max_runs_caps_the_runs_and_what_is_measured_decides(tmp_path, mlflow_uri):
    repo, cfg = night(tmp_path)
    lines = []
    assert finalize(cfg, out=lines.append, max_runs=12) == 0
    assert len(measures(repo)) <= 12
    assert any("--max-runs 12 reached" in line for line in lines)
    report = (repo / ".autoresearch" / "n" / "finalize.md").read_text()
    assert "(run cap)" in report and "reproduces the final gain (not" not in report


def test_an_unknown_tag_is_one_line_and_exit_2(toy_repo):
    from conftest import run_cli
    (toy_repo / "autoresearch.yaml").write_text("task: task\n")
    out = run_cli("finalize", "--tag", "nosuch", cwd=toy_repo)
    assert out.returncode == 2
    assert out.stderr.strip() == "autoresearch: error: no night for tag 'nosuch' here (no " \
        "journal or no branch autoresearch/nosuch): run `autoresearch run --tag nosuch` first"
