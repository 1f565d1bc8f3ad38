"""Scripts that do not time themselves (loop/setup/time_box.py, loop/run/runner.py): a run
killed at the time box is scored from the last metric it printed when its task says
`on_timeout: last`, said so in its reason, and seen by the judge, results.tsv and MLflow as
any run's value; otherwise it is a timeout, as before. `grace_s: auto` moves with the budget.
Real git repos, real subprocesses, a 1 s budget."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from conftest import git, run_cli
from loop.errors import TaskError
from loop.advice.check_task import check_task
from loop.setup.task import load_task, with_budget

# Evaluates every 10 steps and never stops: only the time box ends it
FOREVER = """\
import itertools, time
LR = 0.5
print("starting", flush=True)
for step in itertools.count():
    time.sleep(0.02)
    if step % 10 == 0:
        print(f"step {step}: train loss {LR + 1 / (step + 1):.4f}, val loss "
              f"{LR + 2 / (step + 1):.6f}", flush=True)
"""
SILENT = "import time\nprint('starting', flush=True)\ntime.sleep(600)\n"


def task_yaml(on_timeout: str = "last", extra: str = "") -> str:
    return ("name: forever\neditable: [train.py]\nrun: python train.py\n"
            "metric: {name: val_loss, direction: minimize, pattern: 'val loss ([0-9.]+)'}\n"
            "time_budget_s: 1\ngrace_s: 0.5\n"
            + (f"on_timeout: {on_timeout}\n" if on_timeout else "") + extra)


def repo(root: Path, yaml: str, train: str = FOREVER) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "task.yaml").write_text(yaml)
    (root / "train.py").write_text(train)
    (root / "autoresearch.yaml").write_text(
        "task: .\niterations: 1\nproposer:\n  kind: mutate\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "task")
    return root


def test_a_run_killed_at_the_box_is_scored_from_its_last_printed_value(tmp_path):
    _, result = check_task(repo(tmp_path / "r", task_yaml()), out=lambda line: None)
    assert result.status == "ok", result.detail
    said = re.fullmatch(r"val_loss (\S+) at the time box \(last printed value, line (\d+), "
                        r"step (\d+)\)", result.detail)
    assert said, result.detail
    value, line, step = float(said[1]), int(said[2]), int(said[3])
    assert step > 0 and line == step // 10 + 2          # after `starting`, one line per 10
    assert result.metric == value == pytest.approx(0.5 + 2 / (step + 1), abs=1e-6)


def test_without_on_timeout_last_it_stays_a_timeout(tmp_path):
    _, result = check_task(repo(tmp_path / "r", task_yaml("")), out=lambda line: None)
    assert (result.status, result.metric) == ("timeout", None)
    assert result.detail == "killed at the time budget"


def test_no_metric_printed_before_the_box_stays_a_timeout(tmp_path):
    _, result = check_task(repo(tmp_path / "r", task_yaml(), SILENT), out=lambda line: None)
    assert (result.status, result.metric) == ("timeout", None)


# Prints a fair value, then waits for the time box; its SIGTERM handler prints a far better
# one (and a line begun before the signal, finished after it), lingering so that a reader
# still draining the pipe would see them
LATE_PRINT = """\
import signal, sys, time
def late(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)     # the reaper's own SIGTERM follows
    print("e-9", flush=True)
    for _ in range(5):
        print("step 99: val loss 0.0001", flush=True)
        time.sleep(0.1)
    sys.exit(0)
signal.signal(signal.SIGTERM, late)
print("step 1: val loss 50.0", flush=True)
print("step 2: val loss 40.5", end="", flush=True)
while True:
    time.sleep(0.01)
"""


def test_what_is_printed_after_the_engines_signal_is_never_read(tmp_path):
    """Issue 37 item 4: the same code was kept once, discarded once. Every time, the value
    is the last complete line printed before the SIGTERM."""
    root = repo(tmp_path / "r", task_yaml(), LATE_PRINT)
    for _ in range(3):
        _, result = check_task(root, out=lambda line: None)
        assert (result.status, result.metric) == ("ok", 50.0), result.detail
        assert "line 1," in result.detail


def test_the_night_judges_and_records_the_value_like_any_other(tmp_path, mlflow_uri):
    """The baseline (killed at the box each time) is measured, not a stopped night; its
    value reaches results.tsv and MLflow, its reason says how it was measured."""
    root = repo(tmp_path / "r", task_yaml(extra="search_space: {LR: {range: [0.1, 0.9]}}\n"))
    ran = run_cli("run", "--iterations", "1", "--tag", "t", cwd=root)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    with open(root / ".autoresearch" / "t" / "results.tsv") as f:
        table = list(csv.DictReader(f, delimiter="\t"))
    base = table[0]
    assert base["status"] == "keep" and float(base["val_loss"]) > 0.5
    assert "at the time box (last printed value, line" in base["reason"], base
    assert len(table) == 2 and table[1]["status"] in ("keep", "discard"), table[1]
    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.`autoresearch.tag` = 't'")
    child = next(r for r in runs if r.data.tags.get("iteration") == "0")
    assert child.data.metrics["val_loss"] == pytest.approx(float(base["val_loss"]))


@pytest.mark.parametrize("yaml,expect", [
    (task_yaml("sometimes"), "on_timeout must be fail or last, got 'sometimes'"),
    (task_yaml(extra="evaluate: python grade.py\nprotected: [grade.py]\n"),
     "on_timeout: last reads the metric the run printed, but with a protected grader"),
    (task_yaml().replace("grace_s: 0.5", "grace_s: later"),
     "grace_s must be a number of seconds or 'auto'"),
])
def test_bad_time_box_keys_are_one_line(tmp_path, yaml, expect):
    root = tmp_path / "t"
    root.mkdir()
    (root / "task.yaml").write_text(yaml)
    (root / "train.py").write_text(FOREVER)
    (root / "grade.py").write_text("print('val_loss: 1')\n")
    with pytest.raises(TaskError) as err:
        load_task(root)
    assert expect in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("train,grace,moved", [
    (FOREVER, 30.0, 50.0),                                   # max(30, budget / 2)
    ("import os\nB = os.environ['AUTORESEARCH_TIME_BUDGET']\nprint('val loss 1')\n",
     125.0, 170.0),                                          # times itself: 120 + budget / 2
])
def test_an_auto_grace_moves_with_the_budget(tmp_path, train, grace, moved):
    root = tmp_path / "t"
    root.mkdir()
    (root / "task.yaml").write_text(task_yaml().replace("time_budget_s: 1\ngrace_s: 0.5",
                                                        "time_budget_s: 10\ngrace_s: auto"))
    (root / "train.py").write_text(train)
    task = load_task(root)
    assert task.grace_s == grace
    assert with_budget(task, 100).grace_s == moved        # --time-budget 100


def test_a_grace_written_as_a_number_stays(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / "task.yaml").write_text(task_yaml())
    (root / "train.py").write_text(FOREVER)
    assert with_budget(load_task(root), 100).grace_s == 0.5


# -- what init writes ----------------------------------------------------------------------
ONCE = """\
LR = 0.5
for step in range(100):
    loss = LR / (step + 1)
print(f"val_loss: {loss:.4f}")
"""
EVERY_FEW = """\
import itertools
LR = 0.5


def evaluate(step):
    print(f"step {step}: val loss {LR / (step + 1):.4f}")


for step in itertools.count():
    if step % 100 == 0:
        evaluate(step)
"""


@pytest.mark.parametrize("train,last", [(FOREVER, True), (EVERY_FEW, True), (ONCE, False)])
def test_init_writes_on_timeout_last_for_a_script_that_prints_inside_its_loop(
        tmp_path, train, last):
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "train.py").write_text(train)
    git(root, "add", "-A")
    git(root, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "code")
    done = run_cli("init", "--time-budget", "90", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    task = load_task(root)
    assert (task.on_timeout, task.grace_s, task.grace_auto) == (
        "last" if last else "fail", 45.0, "boxed")
    assert with_budget(task, 200).grace_s == 100.0       # the grace init wrote moves
    said = [line for line in done.stdout.splitlines() if "on timeout:" in line]
    if last:
        assert said == ["  on timeout: last (found: train.py prints val_loss inside its "
                        "training loop and keeps no time budget; the run is stopped at the "
                        "box and scored from its last val_loss)"]
    else:
        assert not said and "so it must print val_loss before then" in done.stdout
