"""The hybrid night (loop/proposers/hybrid.py): the policy picks as documented, the tuner
keeps what still applies after a kept code change (loop/proposers/epochs.py), a real night
where the LLM's change is kept and the tuner then tunes the new code, and a night killed
with SIGKILL that asks the same proposer again on resume."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason="the hybrid's tuner needs optuna (the tune extra)")

from conftest import git, make_repo, run_cli  # noqa: E402
from helpers import wait_for  # noqa: E402
from loop.engine.engine import Engine  # noqa: E402
from loop.proposers import tune  # noqa: E402
from loop.proposers.base import Attempt, Context, Proposal  # noqa: E402
from loop.proposers.epochs import read_keep  # noqa: E402
from loop.proposers.hybrid import HybridProposer, chooses  # noqa: E402
from loop.proposers.mutate import SpaceExhausted  # noqa: E402
from loop.proposers.tried import key_of_patch  # noqa: E402
from loop.proposers.tune import TuneProposer  # noqa: E402
from loop.setup.config import Config, JudgeConfig, ProposerConfig  # noqa: E402
from loop.setup.metric import Metric  # noqa: E402
from loop.setup.task import Task  # noqa: E402

# -- the policy -------------------------------------------------------------------------------


def test_llm_every_k_proposes_the_first_and_every_kth_after():
    assert [chooses(n, 3) for n in range(1, 8)] == \
        ["llm", "tune", "tune", "llm", "tune", "tune", "llm"]
    assert {chooses(n, 1) for n in range(1, 6)} == {"llm"}      # an LLM night
    assert {chooses(n, 0) for n in range(1, 6)} == {"tune"}     # a tuner night


class Scripted:
    """A proposer that answers from a list and records what it was asked."""
    def __init__(self, *descriptions):
        self.left, self.asked = list(descriptions), []

    def propose(self, context):
        self.asked.append(context.iteration)
        return Proposal(self.left.pop(0), files={"train.py": "X = 9\n"})


class Exhausted:
    def propose(self, context):
        raise SpaceExhausted("search space exhausted")


SPACE = {"X": {"range": [-5.0, 5.0]}, "Y": {"range": [0, 9], "integer": True}}
FILES = {"train.py": "X = 3.0\nY = 2\nloss = (X - 1) ** 2 + (Y - 4) ** 2\n"
                     "print(f'score: {loss}')\n"}
TASK = Task(name="t", run="x", metric=Metric("score"), editable=("train.py",),
            search_space=SPACE, root=Path("."))


def ctx(i, history=(), files=FILES, best=8.0):
    return Context(i, TASK, dict(files), "", list(history), best, seed=i)


def test_each_proposal_says_who_made_it_and_the_schedule_routes_it():
    llm, tuner = Scripted("a", "b"), Scripted("s1", "s2", "s3", "s4")
    hybrid = HybridProposer(llm, tuner, llm_every=3)
    made = [hybrid.propose(ctx(n)) for n in range(1, 6)]
    assert [p.proposer for p in made] == ["llm", "tune", "tune", "llm", "tune"]
    assert [p.description for p in made] == ["a", "s1", "s2", "b", "s3"]
    assert llm.asked == [1, 4] and tuner.asked == [2, 3, 5]


def test_nothing_left_to_tune_hands_the_turn_to_the_llm():
    llm = Scripted("a", "b")
    made = HybridProposer(llm, Exhausted(), llm_every=3).propose(ctx(2))
    assert (made.proposer, made.description) == ("llm", "a")
    with pytest.raises(SpaceExhausted):                           # a tuner night ends there
        HybridProposer(llm, Exhausted(), llm_every=0).propose(ctx(2))


def test_the_config_and_the_command_line_name_the_hybrid(tmp_path):
    from loop.errors import ConfigError
    from loop.setup.config import load_config
    path = tmp_path / "c.yaml"
    path.write_text("proposer: {kind: hybrid, model: m, llm_every: 5, sampler: cmaes}\n")
    cfg = load_config(path)
    assert (cfg.proposer.kind, cfg.proposer.llm_every, cfg.proposer.sampler) == \
        ("hybrid", 5, "cmaes")
    path.write_text("proposer: {kind: hybrid}\n")
    with pytest.raises(ConfigError, match="no proposer.model"):
        load_config(path)
    with pytest.raises(ConfigError, match="llm_every"):
        cfg.with_overrides(proposer_llm_every=-1)


# -- what the tuner keeps after a kept code change ------------------------------------------


def diff(before: str, after: str) -> str:
    import difflib
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                          lineterm="", n=0))


def attempt(i, description, status, metric, delta=None, patch=""):
    return Attempt(i, description, status, metric, delta,
                   change=key_of_patch(patch) if patch else None)


REGULARIZED = FILES["train.py"].replace("print(", "loss = loss - 1.0  # regularized\nprint(")
REUSED = FILES["train.py"].replace("loss = (X - 1)", "loss = (X * X - 1)")


def history_with_code_keep(after: str, set_too: bool = False):
    """A point tuned on the old code, then a kept code change (setting X = 2.0 too)."""
    new = after.replace("X = 3.0", "X = 2.0") if set_too else after
    return [attempt(1, "Set X to 4.0 (was 3.0) in train.py; Y stays 2", "discard", 13.0),
            attempt(2, "add a regularizer", "keep", 7.0, delta=1.0,
                    patch=diff(FILES["train.py"], new))], new


def test_points_before_a_code_change_are_moved_by_its_gain():
    history, files = history_with_code_keep(REGULARIZED, set_too=True)
    codecs = tune._codecs(optuna, {"train.py": files}, tune.parse_space(SPACE, "t"))
    trials = tune._trials(ctx(3, history, {"train.py": files}, best=0.0), codecs,
                          {"X": 2.0, "Y": 2.0})
    # iteration 1's point, X = 4 (it was proposed on X = 3: the keep set X = 2, undone),
    # told as 13 - 1: the landscape moved by the kept gain
    assert ({"X": 4.0, "Y": 2}, 12.0, "done") in trials
    assert read_keep(history[1], {"X", "Y"}).before == {"X": 3.0}


def test_points_before_a_change_to_a_constants_use_are_not_told():
    history, files = history_with_code_keep(REUSED)
    step = read_keep(history[1], {"X", "Y"})
    assert step.code and "how X is used" in step.breaks
    codecs = tune._codecs(optuna, {"train.py": files}, tune.parse_space(SPACE, "t"))
    trials = tune._trials(ctx(3, history, {"train.py": files}, best=7.0), codecs,
                          {"X": 3.0, "Y": 2.0})
    assert [v for _, v, _ in trials] == [7.0]                    # only the best's own point


def test_a_constant_the_change_adds_to_the_space_drops_the_earlier_points():
    added = FILES["train.py"].replace("Y = 2\n", "Y = 2\nZ = 1.0\n")
    step = read_keep(attempt(2, "add Z", "keep", 7.0, 1.0,
                             diff(FILES["train.py"], added)), {"X", "Y", "Z"})
    assert "adds the searched constant Z" in step.breaks


def test_the_tuner_proposes_on_the_kept_code():
    history, files = history_with_code_keep(REGULARIZED)
    made = TuneProposer(seed=1).propose(ctx(3, history, {"train.py": files}, best=7.0))
    assert made.description.startswith("Set ")
    assert "loss = loss - 1.0" in made.files["train.py"]


# -- a real night against a local OpenAI-compatible server ----------------------------------

HYBRID_TASK = """\
name: toy
description: minimize (X-1)^2 + (Y-4)^2 + a penalty; only train.py may change
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 30
grace_s: 10
env: {HOLD: 'HOLD_PATH'}
search_space:
  X: {range: [-2.0, 6.0]}
  Y: {range: [0, 9], integer: true}
"""
HYBRID_TRAIN = """\
import os, time
X = 3.0
Y = 2
PENALTY = 2.0
loss = (X - 1) ** 2 + (Y - 4) ** 2
loss = loss + PENALTY
def held():   # the test holds here while the file names this iteration
    try:
        return open(os.environ["HOLD"]).read() == os.environ.get("AUTORESEARCH_ITERATION")
    except OSError:
        return False
while held():
    time.sleep(0.05)
print(f"score: {loss:.6f}")
"""


def llm_reply(description: str, search: str, replace: str) -> str:
    return (f"Description: {description}\n\ntrain.py\n```python\n<<<<<<< SEARCH\n{search}\n"
            f"=======\n{replace}\n>>>>>>> REPLACE\n```\n")


DROP_PENALTY = llm_reply("drop the penalty term", "loss = loss + PENALTY", "loss = loss + 0.0")
HALVE_PENALTY = llm_reply("halve the penalty term", "loss = loss + 0.0",
                          "loss = loss + 0.0 * PENALTY")


def hybrid_repo(root: Path, hold: Path) -> Path:
    return make_repo(root, {"task.yaml": HYBRID_TASK.replace("HOLD_PATH", str(hold)),
                            "train.py": HYBRID_TRAIN, "grade.py": "# protected\n"})


def table(repo, tag):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_a_hybrid_night_tunes_the_code_the_llm_changed(tmp_path, mlflow_uri, openai_server):
    repo = hybrid_repo(tmp_path / "repo", tmp_path / "no-hold")
    openai_server.script(DROP_PENALTY)
    proposer = ProposerConfig(kind="hybrid", model="test-model", base_url=openai_server.base_url,
                              llm_every=3)
    cfg = Config(task="task", tag="h", base_dir=repo, proposer=proposer, seed=2,
                 judge=JudgeConfig(rule="strict"), iterations=3, sandbox="off")
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    rows = table(repo, "h")
    assert [r["proposer"] for r in rows] == ["", "llm", "tune", "tune"]
    assert (rows[1]["description"], rows[1]["status"]) == ("drop the penalty term", "keep")
    assert len(openai_server.requests) == 1                        # the tuner asked no one
    for row in rows[2:]:                 # the tuner's points, written on the LLM's code
        assert row["description"].startswith("Set X to ")
        text = git(repo, "show", f"{row['commit']}:task/train.py")
        assert "loss = loss + 0.0" in text and "PENALTY\n" not in text.split("loss =")[-1]
    ends = [json.loads(line) for line in
            (repo / ".autoresearch" / "h" / "journal.jsonl").read_text().splitlines()
            if '"event": "end"' in line]
    assert [e["proposer"] for e in ends if e["iteration"] > 0] == ["llm", "tune", "tune"]
    import mlflow
    runs = mlflow.search_runs(experiment_names=["autoresearch/toy"], output_format="list")
    tags = {r.data.tags.get("iteration"): r.data.tags.get("proposer") for r in runs}
    assert (tags.get("1"), tags.get("2")) == ("llm", "tune")


@pytest.mark.slow
def test_a_killed_hybrid_night_asks_the_same_proposer_again(tmp_path, mlflow_uri,
                                                            openai_server):
    hold = tmp_path / "hold"
    hold.write_text("3")                                   # iteration 3 (the LLM's) is held
    repo = hybrid_repo(tmp_path / "repo", hold)
    journal = repo / ".autoresearch" / "h" / "journal.jsonl"
    openai_server.models = ["m"]
    openai_server.script(DROP_PENALTY, HALVE_PENALTY, HALVE_PENALTY)   # 3 is asked twice
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri, "OPENAI_API_KEY": "sk-test"}
    args = ["run", "--task", "task", "--tag", "h", "--proposer", "hybrid", "--model", "m",
            "--base-url", openai_server.base_url, "--llm-every", "2", "--judge", "strict",
            "--sandbox", "off", "--seed", "3", "--iterations", "4"]
    proc = subprocess.Popen([sys.executable, "-m", "loop", *args], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_for(lambda: journal.exists() and any(
        '"event": "begin"' in line and '"iteration": 3,' in line
        for line in journal.read_text().splitlines()), timeout=120)
    time.sleep(0.5)                                             # its run is going
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -9
    hold.write_text("go")
    res = run_cli(*args, cwd=repo, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "interrupted; redoing it" in res.stdout
    rows = table(repo, "h")
    assert [r["proposer"] for r in rows] == ["", "llm", "tune", "llm", "tune"]
    assert rows[3]["description"] == "halve the penalty term"
    assert len(openai_server.requests) == 3       # iteration 3 asked again, of the LLM


def test_the_surface_bench_scores_the_standins_code_changes(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import surface_nights as sn
    repo = sn.make_repo(tmp_path, noise=0.0, run_s=0.0)
    text = (repo / "surface" / "train.py").read_text()
    assert sn.HOOK in text and "tricks)" in text             # the hook the stand-in edits
    base = sn.true_loss(text)
    with_trick = text.replace("# tricks\n", '# tricks\ntricks.append("warmup")\n')
    assert sn.true_loss(with_trick) == pytest.approx(base - 0.08)
    ran = subprocess.run([sys.executable, "train.py"], cwd=repo / "surface",
                         capture_output=True, text=True, check=True, input="")
    final = ran.stdout.splitlines()[-1]                       # after the progress lines
    assert final.startswith("loss:") and float(final.split(":")[1]) == pytest.approx(base,
                                                                                     abs=1e-5)
