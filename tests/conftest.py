"""Shared fixtures: a real git repo holding a seconds-long task, a real MLflow SQLite store."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

TOY_TASK = """\
name: toy
description: minimize (X-1)^2 + (Y-4)^2; only train.py may change
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 10
grace_s: 5
"""

TOY_TRAIN = """\
import os, random
X = 3.0
Y = 2
NOISE = 0.0
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
jitter = random.Random(seed).gauss(0, 1) * NOISE      # run-to-run noise, seeded
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2 + jitter:.6f}")
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path, files: dict[str, str], task_dir: str = "task") -> Path:
    """A git repo with one commit holding `files` under `task_dir`; no git identity set."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        path = root / task_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "program.md").write_text("Minimize the score. Prefer small changes.\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com",
        "commit", "-qm", "initial task")
    return root


@pytest.fixture
def toy_repo(tmp_path) -> Path:
    return make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                         "grade.py": "# protected harness\n"})


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300):
    """The real console entry point, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "loop", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=timeout)


@pytest.fixture
def openai_server():
    """A scripted OpenAI-compatible server on 127.0.0.1 (see tests/openai_server.py)."""
    from openai_server import OpenAIServer  # tests/ is on sys.path (rootdir conftest)
    server = OpenAIServer().start()
    yield server
    server.stop()


def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (e.g. `SLOW_FLAG=/path`), via /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


# -- what the security tests need: they fail without it, unless a developer allows a skip ------

ALLOW_SKIP = "AUTORESEARCH_ALLOW_SKIP"       # e.g. "sandbox,slurm"; CI never sets it


def require(what: str, missing: str | None) -> None:
    """A test needs `what` ("sandbox": bubblewrap that runs; "slurm": a cluster) and
    `missing` says why it is not here (None: it is). Without it the test FAILS, so a green
    run means the security tests ran; on a developer's machine, $AUTORESEARCH_ALLOW_SKIP
    naming `what` makes it a skip with the reason."""
    if missing is None:
        return
    allowed = {w.strip() for w in os.environ.get(ALLOW_SKIP, "").split(",")}
    if what in allowed:
        pytest.skip(f"no {what} here: {missing} ({ALLOW_SKIP} allows the skip)")
    pytest.fail(f"no {what} here: {missing}; this test must run (set {ALLOW_SKIP}={what} to "
                f"skip it on a machine without it)", pytrace=False)


def no_sandbox() -> str | None:
    """Why bubblewrap cannot confine a run here, or None."""
    from loop.run import sandbox
    return sandbox.unavailable()


@pytest.fixture
def sandbox_here() -> None:
    """The test needs the bwrap sandbox (see `require`)."""
    require("sandbox", no_sandbox())


needs_sandbox = pytest.mark.usefixtures("sandbox_here")


# -- a hang fails the test, naming its limit: a guard, never a claim about speed --------------


# The fast tier (`pytest -m fast`, tests/README.md): the parts tested alone, the engine's loop
# against a backend that runs nothing (test_night.py); no whole night of real runs.
FAST_TIER = {
    "test_judge", "test_paired_judge", "test_sequential_judge", "test_lifecycle", "test_night",
    "test_record", "test_records", "test_journal", "test_edits", "test_change",
    "test_edit_formats", "test_reply_shapes", "test_untrusted", "test_registry",
    "test_search_space", "test_mutate", "test_settings", "test_yaml_io", "test_workspace",
    "test_repo_reads", "test_git_calls", "test_spec", "test_pids", "test_early_stop",
    "test_cli", "test_named_data",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__ in FAST_TIER and "slow" not in item.keywords:
            item.add_marker(pytest.mark.fast)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """`@pytest.mark.hang_limit(seconds)`: the test fails if it is still running `seconds`
    after it began (SIGALRM on the main thread, so a blocking wait is interrupted too). The
    limit stands far above the test's normal time: what it catches is waiting for something
    that never comes (a killed tree waited for, a request waited out), not a slow machine."""
    mark = item.get_closest_marker("hang_limit")
    if mark is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    seconds = float(mark.args[0])

    def hung(signum, frame):
        pytest.fail(f"still running {seconds:g} s after it began: a hang (hang_limit)")
    before = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
