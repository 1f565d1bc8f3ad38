"""Processes an experiment starts: none outlives the engine, floods are capped, signals and
memory limits are named. Each case runs with the sandbox and without it (loop/run/reap.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import make_repo, require
from loop.run import sandbox
from loop.run.process import Limits, experiment_env
from loop.run.runner import run_experiment
from loop.run.spec import RunSpec
from helpers import wait_gone

NO_BWRAP = sandbox.unavailable()
METRIC = r"^score:\s*([0-9.]+)\s*$"


@pytest.fixture(params=["off", "required"], ids=["reaper", "bwrap"])
def mode(request):
    if request.param == "required":
        require("sandbox", NO_BWRAP)
    return request.param


def run(tmp_path, body: str, mode: str, timeout=60.0, **limits):
    (tmp_path / "job.py").write_text(textwrap.dedent(body))
    return run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, experiment_env(),
                                  timeout, tmp_path / "log", METRIC,
                                  r"^peak_memory_mb:\s*([0-9.]+)",
                                  limits=Limits(sandbox=mode, **limits)))


def test_kill_9_of_the_engine_ends_the_training_process_and_its_daemon(tmp_path, mode):
    """No resume involved: once the engine is SIGKILLed, its experiment goes by itself."""
    token = f"orphan{uuid.uuid4().hex[:10]}"
    task = f"""\
        name: sleeper
        editable: [train.py]
        run: python train.py {token}
        metric: {{name: score, direction: minimize}}
        time_budget_s: 120
        """
    train = f"""\
        import subprocess, sys, time
        subprocess.run(["/bin/sh", "-c",
                        "setsid {{}} -c 'import time; time.sleep(300)' {token}-daemon &"
                        .format(sys.executable)])
        print("started", flush=True)
        time.sleep(300)
        """
    repo = make_repo(tmp_path / "repo", {"task.yaml": task, "train.py": train})
    (repo / "run.yaml").write_text(f"task: task\niterations: 0\nsandbox: {mode}\n")
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    engine = subprocess.Popen([sys.executable, "-m", "loop", "run", "--config", "run.yaml",
                               "--tag", "k9"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not wait_gone(f"{token}-daemon", 0) and time.monotonic() < deadline:
            time.sleep(0.1)           # the training process and its daemon are both up
        assert len(wait_gone(token, 0)) >= 2, "the experiment never started"
        engine.kill()
        engine.wait()
        assert wait_gone(token, 30.0) == [], "the experiment outlived the SIGKILLed engine"
    finally:
        engine.kill()
        engine.wait()


def test_kill_9_of_the_engine_as_the_sandbox_starts_leaves_nothing(tmp_path):
    """bwrap arms --die-with-parent only once it runs, and never checks its parent: an engine
    SIGKILLed before that (a slow start on a loaded machine; here a `bwrap` ahead on PATH
    that waits first) must still leave nothing of the run alive."""
    require("sandbox", NO_BWRAP)
    token = f"early{uuid.uuid4().hex[:10]}"
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "bwrap").write_text("#!/bin/sh\nif [ -n \"$SLOW_START\" ]; then sleep 2; fi\n"
                                f'exec {sandbox.bwrap_path()} "$@"\n')
    (slow / "bwrap").chmod(0o755)
    task = f"""\
        name: sleeper
        editable: [train.py]
        run: python train.py {token}
        metric: {{name: score, direction: minimize}}
        time_budget_s: 120
        env: {{SLOW_START: '1'}}
        """
    repo = make_repo(tmp_path / "repo", {"task.yaml": task,
                                         "train.py": "import time\ntime.sleep(300)\n"})
    (repo / "run.yaml").write_text("task: task\niterations: 0\nsandbox: required\n")
    env = {**os.environ, "PATH": f"{slow}{os.pathsep}{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    engine = subprocess.Popen([sys.executable, "-m", "loop", "run", "--config", "run.yaml",
                               "--tag", "k9"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    waiting = f"/bin/sh\0{slow / 'bwrap'}\0".encode()   # the slow bwrap, in its wait

    def starting():
        return [p for p in wait_gone(token, 0)
                if open(f"/proc/{p}/cmdline", "rb").read().startswith(waiting)]
    try:
        deadline = time.monotonic() + 120
        while not starting() and time.monotonic() < deadline and engine.poll() is None:
            time.sleep(0.05)
        assert starting(), "the run never started"
        engine.kill()
        engine.wait()
        assert wait_gone(token, 30.0) == [], "the run outlived an engine killed as it started"
    finally:
        engine.kill()
        engine.wait()
        for pid in wait_gone(token, 0):      # what a failure left (this test's token)
            os.kill(pid, signal.SIGKILL)


def test_a_flood_is_capped_and_its_metric_still_read(tmp_path, mode):
    res = run(tmp_path, """
        import sys
        line = "x" * 99 + "\\n"
        print("score: 9.0", flush=True)              # an early report, superseded
        for _ in range(200_000):                      # 20 MB
            sys.stdout.write(line)
        print("peak_memory_mb: 1024")
        print("score: 1.25")
        """, mode, log_cap_mb=1.0)
    assert (res.status, res.metric, res.memory_gb) == ("ok", 1.25, 1.0)
    log = (tmp_path / "log").read_bytes()
    assert len(log) < 1.1 * 2**20, "the kept log is not capped"
    assert b"score: 9.0" in log[:1000] and log.rstrip().endswith(b"score: 1.25")
    assert b"=== log capped: " in log and b"bytes dropped here" in log


def test_a_killed_process_is_named_not_an_exit_code(tmp_path, mode):
    res = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", mode)
    assert res.status == "crash"
    assert res.detail.startswith("killed by SIGKILL, likely out of memory"), res.detail
    res = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", mode)
    assert res.detail.startswith("killed by SIGSEGV"), res.detail
    assert run(tmp_path, "raise SystemExit(3)", mode).detail == "exit code 3"


def test_memory_limit_stops_a_run_and_says_so(tmp_path, mode):
    body = """
        blocks = [bytearray(64 * 2**20) for _ in range(40)]   # 2.5 GB
        print("score: 1.0")
        """
    res = run(tmp_path, body, mode, memory_limit_gb=0.5)
    assert res.status == "crash"
    assert res.detail.startswith("out of memory: the run hit memory_limit_gb=0.5"), res.detail
    small = run(tmp_path, "x = bytearray(16 * 2**20); print('score: 1.0')", mode,
                memory_limit_gb=0.5)
    assert small.status == "ok"


def test_sigterm_to_the_reaper_ends_the_tree(tmp_path):
    """The reaper itself, stopped from outside (the engine's time box), takes its tree."""
    token = f"reaped{uuid.uuid4().hex[:10]}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(300)' {token}"
    from loop.run.process import REAPER
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "2",
                             "/bin/sh", "-c", f"setsid {sleeper} & exec {sleeper}"],
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while len(wait_gone(token, 0)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)              # the reaper (its argv holds the token) and two sleepers
    assert len(wait_gone(token, 0)) == 3
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert wait_gone(token, 5.0) == []


def test_a_run_that_kills_its_supervisor_is_not_called_out_of_memory(tmp_path):
    """Without the sandbox the run can SIGKILL loop/run/reap.py: that is its own doing, named
    as such, not the kernel's OOM killer."""
    res = run(tmp_path, """
        import os, signal
        pid = os.getppid()
        while b"reap.py" not in open(f"/proc/{pid}/cmdline", "rb").read():
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        os.kill(pid, signal.SIGKILL)
        """, "off")
    assert res.status == "crash"
    assert "out of memory" not in res.detail, res.detail
    assert res.detail.startswith("its supervisor was killed by SIGKILL"), res.detail
