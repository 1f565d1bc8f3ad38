"""The Ray backend: each run is a Ray task on some node of a cluster (`--backend ray`).

The head (where `autoresearch run` runs) keeps git, the journal, the judge and MLflow. A task
receives the attempt commit's tree (a `git archive`), which is also the pristine copy its
grader runs from, the data outside git it needs that its node does not see (the private
folder, held_out, read_only and inputs data: loop/run/backends/reach.py, decided by a probe
of every node at start), and the digests the guard checks; it runs the same runner
(`run_in_folder`: time limit, process-group kill, protected grading, tamper checks) in a
temporary folder on its node, and returns status, metric, log and the artifacts folder. A
worker that dies mid-run is retried once (Ray's `max_retries`, on any node); a second death
is a `crash` with the reason, never the loop's.
A dead worker's run dies with it (loop/run/reap.py supervises every run), and its folder
is removed by the next run that starts or ends on that node.

Each node needs Python with this package and Ray installed (`pip install 'autoresearch[ray]'`
or the repo with `pip install -e '.[ray]'`) and whatever the task's commands need; it does
not need git or the research repo. Cluster: $RAY_ADDRESS (or a local Ray started here)."""
from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from loop.repo.gitsafe import run_git
from loop.run.backends import failed, run_in_folder
from loop.run.backends.devices import thread_env
from loop.run.backends.reach import Reach, Unreached, arrive, needs_of, pack, plan, probe
from loop.run.runner import CRASH, RunResult
from loop.run.spec import RunJob, grade_log

RETRIES = 1      # a run whose worker died is tried once more, then recorded as a crash
PROBE_TIMEOUT_S = 600.0   # the start probe of the nodes (it hashes the data there)
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
    tmp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_owner()}-"))
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
    return {"status": CRASH, "metric": None, "returncode": None, "wall_s": 0.0,
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


def _owner(pid: int | None = None) -> str:
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
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(folder, ignore_errors=True)


class RayBackend:
    def __init__(self, workspace, task, task_rel: str, guard, workers: int,
                 slot_root: Path | None = None, devices: tuple[str, ...] | None = None,
                 limits=None):
        try:
            import ray
        except ImportError:
            from loop.errors import UsageError
            raise UsageError("--backend ray needs Ray: pip install 'autoresearch[ray]' "
                             "(or -e '.[ray]' in this repo)") from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                     include_dashboard=False)
        self.workspace, self.task, self.task_rel, self.guard = workspace, task, task_rel, guard
        self.limits = limits       # the sandbox is set up on the worker, where the run is
        self.slots = workers      # `devices` is for local slots: Ray places GPUs itself
        resources = ray.cluster_resources()
        if resources.get("GPU", 0) >= 1:     # Ray sets CUDA_VISIBLE_DEVICES for the task
            self.options, share = {"num_gpus": 1, "num_cpus": 1}, None
        else:
            cpus = int(resources.get("CPU", 1))
            share = max(1, cpus // self.slots)
            self.options = {"num_cpus": min(share, cpus)}
        self.slot_env = thread_env(share) if share else {}
        needs = needs_of(task, guard)
        self.reach = plan(needs, self._probe(needs)) if needs else None
        self.data = ray.put(pack(self.reach)) if self.reach and self.reach.shipped \
            else None
        self.remote = ray.remote(max_retries=RETRIES, retry_exceptions=False)(run_remote)
        self._refs: dict[str, object] = {}
        self._lock = threading.Lock()

    def _probe(self, needs) -> list[dict]:
        """`probe` on every node of the cluster, at once (UsageError if one is mute)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        remote = self.ray.remote(probe)
        refs = [remote.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            node["NodeID"], soft=False)).remote(needs)
            for node in self.ray.nodes() if node.get("Alive")]
        try:
            return self.ray.get(refs, timeout=PROBE_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError:
            from loop.errors import UsageError
            raise UsageError(f"the Ray nodes did not say within {PROBE_TIMEOUT_S:g} s whether "
                             f"they see the task's data (loop/run/backends/reach.py)") from None

    def free(self) -> int:
        with self._lock:
            return self.slots - len(self._refs)

    def submit(self, job: RunJob, done) -> None:
        archive = run_git(["archive", "--format=tar", job.commit, "--", self.task_rel or "."],
                          self.workspace.repo_root, binary=True).stdout   # hardened git
        ref = self.remote.options(**self.options).remote(
            archive, job, self.task, self.task_rel, self.guard, self.reach, self.data,
            self.slot_env, self.limits)
        with self._lock:
            self._refs[job.job_id] = ref
        threading.Thread(target=self._wait, args=(job, ref, done), daemon=True,
                         name=f"ray-{job.job_id}").start()

    def _wait(self, job: RunJob, ref, done) -> None:
        try:
            out = self.ray.get(ref)
            result = land(job, out)
        except self.ray.exceptions.TaskCancelledError:
            result = failed(job, "cancelled")
        except self.ray.exceptions.RayError as exc:   # the worker or its node died, twice
            why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            result = failed(job, f"ray worker lost ({type(exc).__name__}, tried "
                                 f"{1 + RETRIES} times){': ' + why if why else ''}")
        except Exception as exc:
            result = failed(job, f"ray backend error: {type(exc).__name__}: {exc}")
        with self._lock:
            self._refs.pop(job.job_id, None)
        done(job, result)

    def cancel(self, job_id: str) -> None:
        ref = self._refs.get(job_id)
        if ref is not None:
            self.ray.cancel(ref, force=True)

    def close(self, wait_s: float = 15.0) -> None:
        for job_id in list(self._refs):
            self.cancel(job_id)
