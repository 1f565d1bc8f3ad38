"""The Ray backend in local mode (`ray.init(num_cpus=2)`): the same loop end to end, and a
worker killed mid-run (retried once, then recorded as a crash; the loop goes on)."""
import os
import signal

import pytest

from conftest import make_repo
from test_engine import _wait_for, assert_same_story
from test_scheduler import GATED_TASK, GATED_TRAIN, Scripted, ended, journal, run_in_thread
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


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


def _worker_of(pid):
    """The Ray worker process above `pid` (its title starts with `ray::`)."""
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(b"ray::") or b"default_worker" in open(
                    f"/proc/{pid}/cmdline", "rb").read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise AssertionError("no Ray worker above the experiment")


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
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=Scripted(edits)))
    killed = []
    for attempt in range(2):               # the first death is retried; the second is final
        assert _wait_for(lambda: [p for p in _runs_of(gates, 1) if p not in killed],
                         timeout=120), "\n".join(lines)
        run = [p for p in _runs_of(gates, 1) if p not in killed][0]
        worker = _worker_of(run)                # the Ray worker process running our task
        killed += _runs_of(gates, 1)
        os.kill(worker, signal.SIGKILL)
    assert _wait_for(lambda: ended(repo, 1), timeout=120), "\n".join(lines)
    assert not ended(repo, 2)              # the other slot was never disturbed
    (gates / "2").write_text("")
    thread.join(180)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"]
    assert "ray worker lost" in table[1]["reason"]
    assert float(table[2]["score"]) == 6.0
    log = repo / ".autoresearch" / "t" / "logs" / "iter-0002.log"
    assert "score: 6.000000" in log.read_text()      # the log came back from the worker
    assert [e["iteration"] for e in journal(repo) if e["event"] == "begin"] == [0, 1, 2]
