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
is removed by the next run that starts or ends on that node. What runs on the node, and the
slots, are loop/run/backends/remote.py's (shared with Slurm).

Each node needs Python with this package and Ray installed (`pip install 'autoresearch[ray]'`
or the repo with `pip install -e '.[ray]'`) and whatever the task's commands need; it does
not need git or the research repo. Cluster: $RAY_ADDRESS (or a local Ray started here)."""
from __future__ import annotations

import os
from pathlib import Path

from loop.errors import UsageError
from loop.run.backends.base import failed
from loop.run.backends.devices import thread_env
from loop.run.backends.reach import needs_of, pack, plan, probe
from loop.run.backends.remote import RemoteBackend, land, run_remote
from loop.run.runner import RunResult
from loop.run.spec import RunJob

RETRIES = 1      # a run whose worker died is tried once more, then recorded as a crash
PROBE_TIMEOUT_S = 600.0   # the start probe of the nodes (it hashes the data there)


class RayBackend(RemoteBackend):
    kind = "ray"

    def __init__(self, workspace, task, task_rel: str, guard, workers: int,
                 slot_root: Path | None = None, devices: tuple[str, ...] | None = None,
                 limits=None, slurm=None):
        """`slurm`: the config's `slurm:` section, for that backend only."""
        try:
            import ray
        except ImportError:
            raise UsageError("--backend ray needs Ray: pip install 'autoresearch[ray]' "
                             "(or -e '.[ray]' in this repo)") from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False,
                     include_dashboard=False)
        super().__init__(workspace, task, task_rel, guard, workers, limits)
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
            raise UsageError(f"the Ray nodes did not say within {PROBE_TIMEOUT_S:g} s whether "
                             f"they see the task's data (loop/run/backends/reach.py)") from None

    def _start(self, job: RunJob, archive: bytes):
        """The Ray task, submitted: its object ref."""
        return self.remote.options(**self.options).remote(
            archive, job, self.task, self.task_rel, self.guard, self.reach, self.data,
            self.slot_env, self.limits)

    def _run(self, job: RunJob, archive: bytes) -> RunResult:
        with self._lock:
            ref = self._jobs[job.job_id]
        try:
            return land(job, self.ray.get(ref))
        except self.ray.exceptions.TaskCancelledError:
            return failed(job, "cancelled")
        except self.ray.exceptions.RayError as exc:   # the worker or its node died, twice
            why = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            return failed(job, f"ray worker lost ({type(exc).__name__}, tried "
                               f"{1 + RETRIES} times){': ' + why if why else ''}")

    def _kill(self, ref) -> None:
        self.ray.cancel(ref, force=True)
