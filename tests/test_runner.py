"""The runner: metric parsing, statuses, the time box, the scrubbed environment."""
import os
import sys
import textwrap
import time

import pytest

from conftest import require
from helpers import read_metric, wait_gone
from loop.run import sandbox
from loop.run.process import Limits, execute, experiment_env
from loop.run.runner import run_experiment
from loop.run.spec import GradeStep, RunSpec
from loop.setup.metric import Metric

PATTERN = Metric("val_bpb").pattern
NO_BWRAP = sandbox.unavailable()


@pytest.fixture(params=["off", "required"], ids=["reaper", "bwrap"])
def limits(request):
    """Each process test runs without the sandbox (loop/run/reap.py) and inside it."""
    if request.param == "required":
        require("sandbox", NO_BWRAP)
    return Limits(sandbox=request.param)


@pytest.mark.parametrize("text,expected", [
    ("val_bpb: 1.25\n", 1.25),
    ("step 10\n---\nval_bpb:          0.997900\ntraining_seconds: 300.1\n", 0.9979),
    ("val_bpb: 2.0\nval_bpb: 1.5\n", 1.5),                 # the last report wins
    ("val_bpb = 3e-1\n", 0.3),
    ("VAL_BPB: nan\n", float("nan")),
    ("val_bpb: inf\n", float("inf")),
    ("my_val_bpb: 1.0\n", None),                          # another metric's name
    ("val_bpb: 1.0 (approx)\n", None),                    # not a clean summary line
    ("no metric here\n", None),
])
def test_read_metric(text, expected):
    got = read_metric(text, PATTERN)
    if expected is None:
        assert got is None
    elif expected != expected:  # NaN
        assert got != got
    else:
        assert got == pytest.approx(expected)


def test_custom_pattern_with_one_group():
    assert read_metric("acc=0.91 loss=0.3", r"acc=([0-9.]+)") == pytest.approx(0.91)


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _run(tmp_path, body, timeout=10.0, evaluate="", limits=None):
    _script(tmp_path, "job.py", body)
    env = experiment_env()
    grade = GradeStep(evaluate, tmp_path, env, 10.0) if evaluate else None
    return run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, env, timeout,
                                  tmp_path / "log.txt", PATTERN, r"^peak_memory_mb:\s*([0-9.]+)",
                                  grade, limits=limits or Limits()))


def test_statuses(tmp_path):
    ok = _run(tmp_path, 'print("val_bpb: 1.5"); print("peak_memory_mb: 2048")')
    assert (ok.status, ok.metric, ok.memory_gb) == ("ok", 1.5, 2.0)
    assert _run(tmp_path, 'print("val_bpb: 1.5"); raise SystemExit(3)').status == "crash"
    assert _run(tmp_path, 'print("training done")').status == "no_metric"
    diverged = _run(tmp_path, 'print("val_bpb: nan"); raise SystemExit(1)')
    assert diverged.status == "diverged"
    assert "val_bpb" in (tmp_path / "log.txt").read_text()


def test_grader_is_the_only_source_of_the_metric(tmp_path):
    _script(tmp_path, "grade.py", 'print("val_bpb: 2.5")')
    res = _run(tmp_path, 'print("val_bpb: 0.01")', evaluate=f"{sys.executable} grade.py")
    assert res.status == "ok" and res.metric == 2.5
    assert "=== evaluate" in (tmp_path / "log.txt").read_text()


@pytest.mark.hang_limit(300)
def test_timeout_kills_a_tree_that_ignores_sigterm(tmp_path, limits):
    """A child that ignores SIGTERM and a grandchild (one in its own session) all die. They
    would sleep for days: a kill that waited for the tree would hang (hang_limit fails it)."""
    token = f"tok{time.time_ns()}"
    body = f"""
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)",
                                  "{token}"])
        escaped = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(10**6)",
            "{token}"], start_new_session=True)
        print("val_bpb: 1.0", flush=True)
        time.sleep(10**6)
    """
    res = _run(tmp_path, body, timeout=3.0, limits=limits)
    assert res.status == "timeout" and res.metric is None
    assert wait_gone(token) == [], "processes survived the timeout"


@pytest.mark.parametrize("how", ["exit 0", "exit 1", "scrubbed env"])
def test_no_daemon_outlives_its_run(tmp_path, limits, how):
    """A double-forked setsid daemon dies with its run, whatever the run's end or env."""
    token = f"daemon{time.time_ns()}"
    body = f"""
        import os, subprocess, sys, time
        env = {{}} if {how == "scrubbed env"!r} else None
        subprocess.run(["/bin/sh", "-c",
                        "setsid {sys.executable} -c 'import time; time.sleep(300)' {token} &"],
                       env=env)
        time.sleep(0.5)
        print("val_bpb: 1.0", flush=True)
        sys.exit({1 if how == "exit 1" else 0})
    """
    res = _run(tmp_path, body, limits=limits)
    assert res.status == ("crash" if how == "exit 1" else "ok")
    assert wait_gone(token) == [], f"a daemon survived a run that ended by {how}"


def test_leftover_background_process_is_killed_after_a_normal_exit(tmp_path, limits):
    token = f"bg{time.time_ns()}"
    body = f"""
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{token}"])
        print("val_bpb: 1.0")
    """
    assert _run(tmp_path, body, limits=limits).status == "ok"
    assert wait_gone(token) == []


def test_experiment_env_drops_secrets():
    parent = {"PATH": "/usr/bin", "HOME": "/home/u", "OPENAI_API_KEY": "sk-secret",
              "AWS_SECRET_ACCESS_KEY": "x", "HF_TOKEN": "hf_x", "MLFLOW_TRACKING_URI": "sqlite:///x",
              "CUDA_VISIBLE_DEVICES": "0", "MY_SERVICE_PASSWORD": "p", "LC_ALL": "C"}
    env = experiment_env({"AUTORESEARCH_SEED": "3"}, base=parent)
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "HF_TOKEN" not in env and "MLFLOW_TRACKING_URI" not in env
    assert "MY_SERVICE_PASSWORD" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["LC_ALL"] == "C"
    assert env["AUTORESEARCH_SEED"] == "3"
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)


def test_child_really_cannot_read_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    res = _run(tmp_path,
               'import os; print("val_bpb:", 1.0 if "OPENAI_API_KEY" in os.environ else 2.0)')
    assert res.metric == 2.0


def test_a_commands_wall_time_is_its_own(tmp_path):
    """The wall time is the command's own, in seconds: at least its sleep, at most the time
    the call took as seen from outside (not milliseconds, not a timestamp)."""
    called = time.monotonic()
    ended = execute("sleep 0.2", tmp_path, experiment_env(), 5, tmp_path / "l")
    rc, timed_out, wall = ended.returncode, ended.timed_out, ended.wall_s
    outside = time.monotonic() - called
    assert rc == 0 and not timed_out and 0.2 <= wall <= outside
