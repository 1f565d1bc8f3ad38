"""Faults of the machine around the loop, made for real: a full disk (a small tmpfs), an
MLflow store locked by another process, runs left RUNNING by a kill, a kill during the
first start."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TOY_TASK, TOY_TRAIN, git, make_repo, run_cli

ARGS = ("run", "--task", "task", "--tag", "t", "--judge", "strict")


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip()}); run as root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def _rows(repo):
    lines = (repo / ".autoresearch" / "t" / "results.tsv").read_text().splitlines()[1:]
    return [line.split("\t") for line in lines]


def test_a_full_disk_stops_cleanly_and_resumes(small_disk, mlflow_uri):
    repo = make_repo(small_disk / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                           "grade.py": "#\n"})
    assert run_cli(*ARGS, "--iterations", "1", cwd=repo).returncode == 0
    filler = _fill(small_disk)
    full = run_cli(*ARGS, "--iterations", "4", cwd=repo)
    assert full.returncode == 1, full.stdout + full.stderr
    assert "no space left on device" in full.stdout and "Traceback" not in full.stderr
    filler.unlink()
    again = run_cli(*ARGS, "--iterations", "4", cwd=repo)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _rows(repo)
    assert [int(r[5]) for r in rows] == list(range(5))
    assert all(r[3] != "crash" for r in rows)


def test_an_experiment_that_cannot_write_is_not_blamed(small_disk, mlflow_uri):
    writer = TOY_TRAIN + "open('big.bin', 'wb').write(b'x' * 20_000_000)\n"
    repo = make_repo(small_disk / "repo", {"task.yaml": TOY_TASK, "train.py": writer,
                                           "grade.py": "#\n"})
    result = run_cli(*ARGS, "--iterations", "1", cwd=repo)
    assert result.returncode == 1
    assert "no space left on device" in result.stdout and "Traceback" not in result.stderr
    assert "crash" not in result.stdout
    results = repo / ".autoresearch" / "t" / "results.tsv"
    assert not results.exists() or len(results.read_text().splitlines()) == 1


def _hold_lock(db: Path, seconds: float) -> subprocess.Popen:
    code = (f"import sqlite3, time, sys\nc = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            f"c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\n"
            f"time.sleep({seconds})\nc.execute('COMMIT')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_locked_store_neither_stops_nor_clutters_the_loop(toy_repo, mlflow_uri, tmp_path):
    assert run_cli(*ARGS, "--iterations", "1", cwd=toy_repo).returncode == 0
    holder = _hold_lock(tmp_path / "mlflow.db", 25)
    try:
        result = run_cli(*ARGS, "--iterations", "3", cwd=toy_repo)
    finally:
        holder.wait()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MLflow store unavailable" in result.stdout
    assert result.stderr == ""
    assert "Traceback" not in result.stdout and "ERROR" not in result.stdout
    assert result.stdout.count("MLflow") <= 3, result.stdout    # a warning, a note, the end
    assert [int(r[5]) for r in _rows(toy_repo)] == [0, 1, 2, 3]
    again = run_cli(*ARGS, "--iterations", "3", cwd=toy_repo)      # catches up
    assert again.returncode == 0
    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(int(r.data.tags["iteration"]) for r in children) == [0, 1, 2, 3]
    assert all(r.info.status != "RUNNING" for r in runs)
    ids = {r[12] for r in _rows(toy_repo)}
    assert ids == {r.info.run_id for r in children}


def test_runs_left_running_by_a_kill_are_ended_on_resume(toy_repo, mlflow_uri):
    assert run_cli(*ARGS, "--iterations", "1", cwd=toy_repo).returncode == 0
    from mlflow.tracking import MlflowClient
    client = MlflowClient(mlflow_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    tags = {k: parent.data.tags[k] for k in ("autoresearch.tag", "autoresearch.home")}
    # what a kill between create_run and the journal's record leaves: a RUNNING child of
    # the next iteration, and (a kill at the first start) a second RUNNING parent
    orphan = client.create_run(parent.info.experiment_id, run_name="iter-0002",
                               tags={**tags, "mlflow.parentRunId": parent.info.run_id,
                                     "iteration": "2"})
    stray = client.create_run(parent.info.experiment_id, run_name="t", tags=tags)
    assert run_cli(*ARGS, "--iterations", "2", cwd=toy_repo).returncode == 0
    for run_id in (orphan.info.run_id, stray.info.run_id):
        run = client.get_run(run_id)
        assert run.info.status == "KILLED" and run.info.lifecycle_stage == "deleted"
    live = client.search_runs([parent.info.experiment_id])
    assert sorted(int(r.data.tags["iteration"]) for r in live
                  if "mlflow.parentRunId" in r.data.tags) == [0, 1, 2]


def test_kills_during_the_first_start_leave_a_usable_store(toy_repo, tmp_path):
    """SIGKILL at moments across a first start (MLflow importing, creating its store, the
    parent run): the next start of that tag works, with one parent run and none RUNNING."""
    from mlflow.tracking import MlflowClient
    for i, delay in enumerate((0.8, 1.5, 2.2, 2.9, 3.6)):
        uri = f"sqlite:///{tmp_path / f'store{i}' / 'mlflow.db'}"
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.getcwd()}
        args = ("run", "--task", "task", "--tag", f"t{i}", "--judge", "strict",
                "--iterations", "1")
        proc = subprocess.Popen([sys.executable, "-m", "loop", *args], cwd=toy_repo, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        final = run_cli(*args, cwd=toy_repo, env=env)
        assert final.returncode == 0, (delay, final.stdout + final.stderr)
        client = MlflowClient(uri)
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert len([r for r in runs if "mlflow.parentRunId" not in r.data.tags]) == 1, delay
        assert sorted(int(r.data.tags["iteration"]) for r in runs
                      if "mlflow.parentRunId" in r.data.tags) == [0, 1]
        assert all(r.info.status != "RUNNING" for r in runs)


def test_a_full_disk_at_a_new_tags_worktree_is_one_line_not_a_traceback(small_disk, mlflow_uri):
    """git reports a checkout that ran out of space as `error: unable to write file x`,
    without the OS's reason: still a full disk, still README's one line and exit 1."""
    import base64
    big = base64.b64encode(os.urandom(900_000)).decode()
    repo = make_repo(small_disk / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                           "grade.py": "#\n", "weights.txt": big})
    filler = _fill(small_disk)
    os.truncate(filler, max(0, filler.stat().st_size - 96 * 1024))   # room for the state only
    full = run_cli(*ARGS, "--iterations", "1", cwd=repo)
    assert full.returncode == 1, full.stdout + full.stderr
    assert "Traceback" not in full.stderr, full.stderr
    lines = [line for line in full.stdout.splitlines() if "no space left on device" in line]
    assert len(lines) == 1 and lines[0].startswith("stopped: "), full.stdout
    filler.unlink()
    again = run_cli(*ARGS, "--iterations", "1", cwd=repo)        # space freed: it just goes on
    assert again.returncode == 0, again.stdout + again.stderr
    assert [int(r[5]) for r in _rows(repo)] == [0, 1]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    """A real `mlflow server` (its own SQLite store) on a free port; killed at the end."""
    import urllib.request
    port = _free_port()
    folder = tmp_path / "server"
    folder.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{folder / 'm.db'}",
         "--default-artifact-root", str(folder / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("mlflow server did not start within 120 s")   # a dependency: never a skip
    yield url, proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_tracking_server_gone_mid_night_neither_holds_the_end_nor_prints(toy_repo,
                                                                           mlflow_server):
    """The server dies after the first iterations: the loop goes on, ends promptly saying
    what is queued for the next start, and MLflow's `View run ...` lines never show."""
    url, server = mlflow_server
    slow = TOY_TRAIN.replace("import os, random", "import os, random, time\ntime.sleep(1.5)")
    (toy_repo / "task" / "train.py").write_text(slow)
    git(toy_repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "slow")
    env = {**os.environ, "MLFLOW_TRACKING_URI": url}
    for name in ("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        env.pop(name, None)
    night = subprocess.Popen([sys.executable, "-m", "loop", *ARGS, "--iterations", "4",
                              "--sandbox", "off"], cwd=toy_repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    results = toy_repo / ".autoresearch" / "t" / "results.tsv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and night.poll() is None and \
            (not results.exists() or len(results.read_text().splitlines()) < 3):
        time.sleep(0.1)                          # the baseline and iteration 1 are in
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    try:
        out, _ = night.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        night.kill()
        out, _ = night.communicate()
        pytest.fail("the loop was still waiting for MLflow 150 s after the server died:\n" + out)
    assert night.returncode == 0, out
    assert "View run" not in out and "View experiment" not in out, out
    note = [line for line in out.splitlines() if "MLflow store still unavailable" in line]
    assert len(note) == 1 and "logged at the next start" in note[0], out
    assert "Traceback" not in out
    assert [int(r[5]) for r in _rows(toy_repo)] == [0, 1, 2, 3, 4]
