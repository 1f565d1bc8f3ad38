"""The Ray backend in local mode (`ray.init(num_cpus=2)`): the same loop end to end, and a
worker killed twice (once as its run starts, once mid-run: retried once, then recorded as a
crash; the loop goes on), leaving no process of the killed runs alive."""
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from conftest import make_repo
from helpers import (GATED_TASK, GATED_TRAIN, EditsByIteration, assert_same_story, ended, journal,
                     run_in_thread, wait_for)
from loop.run import sandbox
from loop.run.backends.remote import PREFIX, owner
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

# A `bwrap` ahead of the real one on the workers' PATH: when the run's gate folder holds
# `slow`, it waits before starting the sandbox. That is the window a loaded machine opens by
# chance: bwrap arms --die-with-parent only once it runs, and a parent that dies before
# that leaves it, and the run, alive.
SLOW_BWRAP = """\
#!/bin/sh
if [ -n "$GATE_DIR" ] && [ -e "$GATE_DIR/slow" ]; then sleep 2; fi
exec %s "$@"
"""


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    path = os.environ["PATH"]
    real = sandbox.bwrap_path()
    if real:                               # the workers inherit this PATH from ray.init
        folder = tmp_path_factory.mktemp("slow-bwrap")
        (folder / "bwrap").write_text(SLOW_BWRAP % real)
        (folder / "bwrap").chmod(0o755)
        os.environ["PATH"] = f"{folder}{os.pathsep}{path}"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    os.environ["PATH"] = path


def _runs_of(gates, iteration):
    """Pids of the experiment processes of `iteration` (marked by the gate dir)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"GATE_DIR={gates}".encode() in env and \
                f"AUTORESEARCH_ITERATION={iteration}".encode() in env:
            found.append(int(pid))
    return found


def _cmdline(pid) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _worker_of(pid):
    """The Ray worker running our task above `pid` (titled `ray::run_remote`), or None: the
    process is gone, or it is an orphan. Not a match on `default_worker`: the raylet's own
    command line names the worker script, and the raylet is a subreaper, so an orphan of a
    killed worker has it above (killing it ends both slots: LocalRayletDiedError)."""
    while pid > 1:
        if _cmdline(pid).startswith(b"ray::run_remote"):
            return pid
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return None
    return None


def _a_run(gates, iteration, dead_workers, starting: bool):
    """A process of `iteration`'s run under a live Ray worker not killed yet: with
    `starting`, one of the slow bwrap's `sleep` (the sandbox is not up yet), else the
    training itself (python train.py, waiting for its gate)."""
    for pid in _runs_of(gates, iteration):
        cmdline = _cmdline(pid)
        argv = cmdline.split(b"\0")
        wanted = argv[0] == b"sleep" if starting else argv[1:2] == [b"train.py"]
        worker = _worker_of(pid) if wanted else None
        if worker and worker not in dead_workers:
            return pid, worker
    return None


def _wait_for_run(gates, iteration, dead_workers, starting: bool, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _a_run(gates, iteration, dead_workers, starting)
        if found:
            return found
        time.sleep(0.05)
    return None


def _gone(gates, iteration, seconds):
    """Cmdlines of `iteration`'s processes still alive after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while _runs_of(gates, iteration) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [_cmdline(p).replace(b"\0", b" ")[:120] for p in _runs_of(gates, iteration)]


def test_ray_backend_end_to_end_with_a_killed_worker(tmp_path, mlflow_uri, ray_local):
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "0").write_text("")
    repo = make_repo(tmp_path / "repo", {"task.yaml": GATED_TASK % gates,
                                         "train.py": GATED_TRAIN, "grade.py": "# protected\n"})
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 2.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2, backend="ray",
                 judge=JudgeConfig(rule="strict"))
    lines = []
    boxed = sandbox.unavailable() is None
    try:
        thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
        dead: list[int] = []
        # The first death comes as the run starts (in the sandbox's slow start, when there is
        # one), the retry's mid-run; the second death is final.
        for starting in (boxed, False):
            if starting:
                (gates / "slow").write_text("")
            found = _wait_for_run(gates, 1, dead, starting)
            assert found, "\n".join(lines)
            _, worker = found
            os.kill(worker, signal.SIGKILL)
            dead.append(worker)
            (gates / "slow").unlink(missing_ok=True)
        assert wait_for(lambda: ended(repo, 1), timeout=120), "\n".join(lines)
        left = _gone(gates, 1, 10.0)
        assert left == [], f"processes of the killed workers' runs survived them: {left}"
        assert not ended(repo, 2), [e for e in journal(repo) if e.get("iteration") == 2]
        (gates / "2").write_text("")
        thread.join(180)
    finally:
        for pid in _runs_of(gates, 1):        # what a failure left: marked by this test's gates
            os.kill(pid, signal.SIGKILL)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"]
    assert "ray worker lost" in table[1]["reason"]
    assert float(table[2]["score"]) == 6.0
    log = repo / ".autoresearch" / "t" / "logs" / "iter-0002.log"
    assert "score: 6.000000" in log.read_text()      # the log came back from the worker
    assert [e["iteration"] for e in journal(repo) if e["event"] == "begin"] == [0, 1, 2]
    left = [f for w in dead for f in Path(tempfile.gettempdir()).glob(f"{PREFIX}{owner(w)}-*")]
    assert left == [], "the killed workers' run folders were left on the node"


def test_a_protected_grading_task_gives_the_local_metric(tmp_path, mlflow_uri, ray_local):
    """The grader's pristine copy on the worker is checked where the task folder is (a
    grading task in a subfolder of its repo was a `crash` here: "deleted protected file")."""
    from graded_toy import baseline_error, make_graded_repo
    from helpers import rows
    repo, _ = make_graded_repo(tmp_path)
    Engine(Config(task="task", tag="t", base_dir=repo, iterations=0, backend="ray"),
           out=lambda line: None).run()
    table = rows(repo)
    assert table[0]["status"] == "keep", table
    assert float(table[0]["error"]) == pytest.approx(baseline_error(), abs=1e-6)
