"""What the remote backends (Ray, Slurm) share: a job shipped to a node and run there,
its result landed on the head, and the slots counted by the jobs in flight.

  * `run_remote`, on a worker node: the attempt commit's tree (a `git archive`, which is also
    the pristine copy its grader runs from) unpacked in a temporary folder, the data outside
    git it needs made present (loop/run/backends/reach.py), the same `run_in_folder` as a
    local run, its log and artifacts sent back; folders of workers that died are swept.
  * `land`, on the head: the log and artifacts written where the head keeps them.
  * `RemoteBackend`: free(), submit() (the archive made with the hardened git, a thread
    waiting for the job), cancel() and close(); a backend says how a job starts, runs and
    is killed. No backend is named here."""
from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from loop.repo import queries
from loop.run.backends.base import failed, run_in_folder
from loop.run.backends.reach import Reach, Unreached, arrive
from loop.run.runner import RunResult
from loop.words import Status
from loop.pids import alive
from loop.run.spec import RunJob, grade_log

PREFIX = "autoresearch-ray-"   # a run's folder on its node: PREFIX<pid namespace>.<pid>-...


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if folder.is_dir():
            tar.add(folder, arcname=".")
    return buf.getvalue()


def _untar(data: bytes, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") \
            else tar.extractall(dest)
    return dest


def run_remote(archive: bytes, job: RunJob, task, task_rel: str, guard, reach: Reach | None,
               data, slot_env: dict[str, str], limits=None) -> dict:
    """On a worker node: the job's commit in a temporary folder, the data it needs made
    present (loop/run/backends/reach.py), run and graded there (its log and artifacts there
    too, sent back to the head)."""
    sweep_dead_workers()
    tmp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{owner()}-"))
    try:
        work = _untar(archive, tmp / "work")
        try:
            task, guard = arrive(reach, data, tmp, task, guard)
        except Unreached as exc:
            return unreached(str(exc), tmp)
        job = replace(job, run_dir=tmp / "run", log_path=tmp / "run" / "run.log")
        log, graded = job.log_path, grade_log(job.log_path)
        folder = _inside(work, task_rel)
        result = run_in_folder(job, folder, task, guard, task_rel,
                               lambda dest: _inside(_untar(archive, dest), task_rel),
                               slot_env, limits)
        return {"status": result.status, "metric": result.metric,
                "returncode": result.returncode, "wall_s": result.wall_s,
                "memory_gb": result.memory_gb, "detail": result.detail,
                "log": log.read_bytes() if log.exists() else b"",
                "grade_log": graded.read_bytes() if graded.exists() else None,
                "artifacts": _tar(job.artifacts), "node": os.uname().nodename}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        sweep_dead_workers()


def unreached(why: str, tmp: Path) -> dict:
    """A run that never started: its node lacks what it needs (a crash saying so)."""
    return {"status": Status.CRASH, "metric": None, "returncode": None, "wall_s": 0.0,
            "memory_gb": None, "detail": why, "log": f"{why}\n".encode(), "grade_log": None,
            "artifacts": _tar(tmp / "none"), "node": os.uname().nodename}


def _inside(root: Path, task_rel: str) -> Path:
    """The task folder in a copy of the archive at `root` (what the guard checks, as the
    local backend's `Workspace.export` returns)."""
    return root / task_rel if task_rel not in ("", ".") else root


def land(job: RunJob, out: dict) -> RunResult:
    """Write a remote run's log and artifacts where the head keeps them (Ray and Slurm)."""
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    job.log_path.write_bytes(out["log"])
    if out["grade_log"] is not None:
        grade_log(job.log_path).write_bytes(out["grade_log"])
    shutil.rmtree(job.artifacts, ignore_errors=True)
    _untar(out["artifacts"], job.artifacts)
    return RunResult(out["status"], out["metric"], out["returncode"], out["wall_s"],
                     out["memory_gb"], job.log_path, out["detail"])


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return ""


def owner(pid: int | None = None) -> str:
    """Who a run folder belongs to: this worker's pid, and its PID namespace (a container
    sharing the node's /tmp counts pids apart)."""
    return f"{_pid_namespace()}.{pid or os.getpid()}"


def sweep_dead_workers(root: Path | None = None) -> None:
    """Remove the run folders of workers on this node that died mid-run (a killed worker never
    reaches its `finally`; each folder holds a copy of the commit and the run's outputs).
    A folder is its worker's while that pid lives; only folders of this PID namespace."""
    namespace = _pid_namespace()
    if not namespace:
        return
    for folder in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}{namespace}.*-*"):
        pid = folder.name[len(PREFIX) + len(namespace) + 1:].split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


class RemoteBackend:
    """Slots counted by the jobs in flight; each job waited for on a thread of its own.
    A subclass says how a job starts (`_start`: its handle, or None until it has one), runs
    to its result (`_run`) and is killed (`_kill`)."""
    kind = "remote"          # in thread names and in the message of an engine-side failure

    def __init__(self, workspace, task, task_rel: str, guard, workers: int, limits=None):
        self.workspace, self.task, self.task_rel, self.guard = workspace, task, task_rel, guard
        self.limits = limits       # the sandbox is set up on the worker, where the run is
        self.slots = workers       # `devices` is for local slots: the cluster places GPUs
        self._jobs: dict[str, Any] = {}      # our job id -> its handle (None: not yet one)
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()

    def free(self) -> int:
        with self._lock:
            return self.slots - len(self._jobs)

    def submit(self, job: RunJob, done: Callable[[RunJob, RunResult], None]) -> None:
        archive = queries.archive(self.workspace.repo_root, job.commit, self.task_rel)
        handle = self._start(job, archive)
        with self._lock:
            self._jobs[job.job_id] = handle      # the slot is taken from now
        threading.Thread(target=self._work, args=(job, archive, done), daemon=True,
                         name=f"{self.kind}-{job.job_id}").start()

    def _work(self, job: RunJob, archive: bytes, done) -> None:
        try:
            result = self._run(job, archive)
        except Exception as exc:      # an engine-side failure costs this run, not the loop
            result = failed(job, f"{self.kind} backend error: {type(exc).__name__}: {exc}")
        with self._lock:
            self._jobs.pop(job.job_id, None)
            self._cancelled.discard(job.job_id)
        done(job, result)

    def cancel(self, job_id: str) -> None:
        with self._lock:
            self._cancelled.add(job_id)
            handle = self._jobs.get(job_id)
        if handle is not None:
            self._kill(handle)

    def close(self, wait_s: float = 15.0) -> None:
        for job_id in list(self._jobs):
            self.cancel(job_id)

    # -- what a backend says -------------------------------------------------------------------
    def _start(self, job: RunJob, archive: bytes) -> Any:
        return None

    def _run(self, job: RunJob, archive: bytes) -> RunResult:
        raise NotImplementedError

    def _kill(self, handle: Any) -> None:
        raise NotImplementedError
