"""`finalize --scale K` and a task's `scale:` key: the finalized branch measured against the
night's start at K times the time box (or a larger model), on a task whose best learning rate
depends on the box (tests/finalize_nights.py): a gain found at a short box reverses at a long
one, a gain that does not depend on it holds."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import git, run_cli
from finalize_nights import (DROP_BIAS, LR_TASK, RAISE_LR, lr_repo, measures, night, report)
from loop.errors import TaskError
from loop.finalize.estimate import Estimate
from loop.finalize.morning import finalize
from loop.finalize.scale import verdict
from loop.setup.scale import ScaleSpec, parse
from loop.setup.task import load_task


def keys(events):
    return [(e["tree"], e["k"]) for e in events]


def test_a_higher_learning_rate_that_wins_at_a_short_box_reverses_at_ten_times_it(
        tmp_path, mlflow_uri):
    repo = lr_repo(tmp_path / "repo")
    cfg = night(repo, [RAISE_LR])
    lines = []
    assert finalize(cfg, out=lines.append, scale=10) == 0
    text = report(repo)
    assert "## At scale: x10" in text
    assert "At scale the gain REVERSED" in text
    row = next(r for r in text.splitlines() if r.startswith("| branch vs start |"))
    small, large = row.split(" | ")[1:3]
    assert small.startswith("+0.5") and large.startswith("-0.4")   # 1 s: +0.5; 10 s: -0.4
    assert any("At scale the gain REVERSED" in line for line in lines)   # on the console too
    scaled = measures(repo, name="finalize-x10.jsonl")
    assert scaled and len(keys(scaled)) == len(set(keys(scaled)))
    # at 10 s: the start 0.2 + 0.5 + 0.3, the branch 0.1 + 1.0 + 0.3
    assert {round(e["value"], 1) for e in scaled} == {1.0, 1.4}
    assert "At scale" in (repo / ".autoresearch" / "n" / "finalize.html").read_text()


def test_a_gain_that_does_not_depend_on_the_box_holds_at_scale(tmp_path, mlflow_uri):
    repo = lr_repo(tmp_path / "repo")
    cfg = night(repo, [DROP_BIAS])
    assert finalize(cfg, out=lambda s: None, scale=10) == 0
    assert "At scale the gain held" in report(repo)


def test_the_tasks_scale_key_names_a_larger_model_set_in_both_versions(tmp_path, mlflow_uri):
    repo = lr_repo(tmp_path / "repo", LR_TASK + "scale:\n  settings: {WIDTH: 10}\n")
    cfg = night(repo, [RAISE_LR])
    assert finalize(cfg, out=lambda s: None) == 0              # no flag: the task asks
    text = report(repo)
    assert "## At scale: WIDTH=10" in text and "At scale the gain REVERSED" in text
    scaled = measures(repo, name="finalize-WIDTH=10.jsonl")
    for commit in {e["commit"] for e in scaled}:               # both versions, WIDTH = 10
        assert "WIDTH = 10\n" in git(repo, "show", f"{commit}:task/train.py")
    lrs = {git(repo, "show", f"{e['commit']}:task/train.py").split("\n")[1] for e in scaled}
    assert lrs == {"LR = 0.5", "LR = 1.0"}


def test_the_verdict_says_held_shrank_gone_or_reversed():
    def est(mean, half, sign):
        return Estimate(mean, half, 4, True, sign)
    small = est(0.5, 0.05, 1)
    assert verdict(small, est(0.48, 0.05, 1)) == "held"
    assert verdict(small, est(0.9, 0.05, 1)) == "held"
    assert verdict(small, est(0.2, 0.05, 1)) == "shrank"
    assert verdict(small, est(0.02, 0.05, 0)) == "gone"
    assert verdict(small, est(-0.4, 0.05, -1)) == "reversed"
    assert verdict(small, Estimate(None, None, 0, False, 0)) == "not measured"


def test_a_bad_scale_key_or_flag_is_one_line(tmp_path, toy_repo, mlflow_uri):
    assert parse(4, "t") == ScaleSpec(4.0, {})
    for bad, says in (({"time_budget": 0}, "scale.time_budget must be a finite number > 0"),
                      ({"size": 2}, "scale: unknown key 'size'"),
                      ({"settings": {"DEPTH": "big"}}, "scale.settings.DEPTH must be a number"),
                      ({"time_budget": 1}, "nothing would be at scale")):
        with pytest.raises(TaskError, match=says):
            parse(bad, "t")
    folder = toy_repo / "task"
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text() + "scale: [1]\n")
    with pytest.raises(TaskError, match="scale.time_budget must be"):
        load_task(folder)
    repo = lr_repo(tmp_path / "lr")
    night(repo, [RAISE_LR])
    (repo / "autoresearch.yaml").write_text("task: task\n")
    out = run_cli("finalize", "--tag", "n", "--scale", "-2", cwd=repo)
    assert out.returncode == 2 and out.stderr.strip() == (
        "autoresearch: error: --scale must be a finite number > 0 (times the time box), got -2.0")
    assert not (repo / ".autoresearch" / "n" / "finalize.jsonl").exists()   # before any run
    task = repo / "task" / "task.yaml"
    task.write_text(task.read_text() + "scale:\n  settings: {DEPTH: 12}\n")
    out = run_cli("finalize", "--tag", "n", cwd=repo)
    assert out.returncode == 2 and out.stderr.strip().endswith(
        "scale.settings: no numeric setting DEPTH in the task's editable files")
    assert not (repo / ".autoresearch" / "n" / "finalize.jsonl").exists()


def test_kill_9_at_scale_then_the_same_command_repeats_no_run(tmp_path, mlflow_uri):
    repo = lr_repo(tmp_path / "repo")
    night(repo, [RAISE_LR])
    (repo / "autoresearch.yaml").write_text("task: task\n")
    cmd = [sys.executable, "-m", "loop", "finalize", "--tag", "n", "--scale", "10"]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    while len(measures(repo, name="finalize-x10.jsonl")) < 2:    # runs of 0.5 s each
        assert proc.poll() is None, "finalize ended before it was killed"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {name: len(measures(repo, name=name))
              for name in ("finalize.jsonl", "finalize-x10.jsonl")}
    assert "## At scale" not in report(repo)
    # a kill mid-checkout leaves git's lock in the worktree's git folder: made sure of here
    (repo / ".git" / "worktrees" / "n" / "index.lock").touch()
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{before['finalize.jsonl']} runs already in finalize.jsonl" in done.stdout
    assert f"{before['finalize-x10.jsonl']} runs already in finalize-x10.jsonl" in done.stdout
    for name in before:                    # each measurement once, in each journal
        got = keys(measures(repo, name=name))
        assert len(got) == len(set(got)) and len(got) >= before[name]
    assert "At scale the gain REVERSED" in report(repo)
    assert report(repo).count("## At scale") == 1


def test_a_branch_that_kept_nothing_is_not_measured_at_scale(tmp_path, mlflow_uri):
    from finalize_nights import LR_TRAIN
    train = LR_TRAIN.replace("BIAS = 0.3", "BIAS = 0.3\nUNUSED = 1")
    repo = lr_repo(tmp_path / "repo", train=train)
    cfg = night(repo, [("set UNUSED to 2", "UNUSED = 1", "UNUSED = 2")])
    assert finalize(cfg, out=lambda s: None, scale=10) == 0
    assert "Not measured: the branch holds none of the night's changes" in report(repo)
    assert measures(repo, name="finalize-x10.jsonl") == []
