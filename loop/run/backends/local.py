"""The local backend: N slots on this machine, each with its own git worktree and device
(a GPU via CUDA_VISIBLE_DEVICES, or a share of the CPU cores; loop/run/backends/devices.py).
A run is a thread waiting on the runner's subprocess, so slots run at once."""
from __future__ import annotations

import threading
from pathlib import Path

from loop.run.backends.base import failed, run_in_folder
from loop.run.backends.devices import slot_envs
from loop.run.process import kill_marked
from loop.words import Status
from loop.run.spec import JOB_ENV, RunJob

# How long `submit` waits for the slot's checkout of the job's commit: the main thread's next
# work (MLflow's writes, after a dispatch that fills the slots) otherwise runs beside it and
# slows it several times over, on the loop's serial path (benchmarks/profile_iteration.py).
# Only the order of the work changes; past this, the main thread goes on regardless.
CHECKOUT_WAIT_S = 5.0


class LocalBackend:
    def __init__(self, workspace, task, task_rel: str, guard, workers: int,
                 slot_root: Path, devices: tuple[str, ...] | None = None, limits=None,
                 slurm=None):
        """`slurm`: the config's `slurm:` section, for that backend only."""
        self.task, self.task_rel, self.guard, self.limits = task, task_rel, guard, limits
        self.workspace = workspace
        envs = slot_envs(workers, devices)   # a bad device list stops before any worktree
        # One slot runs in the loop's worktree (as the loop always did); with more, each
        # slot gets a detached worktree of its own.
        self.slots = [(0, workspace, envs[0])] if len(envs) == 1 else \
            [(i, workspace.add_slot_worktree(slot_root / str(i)), env)
             for i, env in enumerate(envs)]
        self._free = list(self.slots)
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}

    def free(self) -> int:
        with self._lock:
            return len(self._free)

    def submit(self, job: RunJob, done) -> None:
        with self._lock:
            slot = self._free.pop(0)
        checked_out = threading.Event()
        thread = threading.Thread(target=self._work, args=(job, slot, done, checked_out),
                                  name=f"slot-{slot[0]}", daemon=True)
        self._threads[job.job_id] = thread
        thread.start()
        checked_out.wait(CHECKOUT_WAIT_S)

    def _work(self, job: RunJob, slot, done, checked_out: threading.Event) -> None:
        _, ws, env = slot
        try:
            try:
                ws.materialize(job.commit)   # the slot's worktree holds exactly the attempt
                head = ws.head() if ws is not self.workspace else ""  # a slot's own worktree
            finally:
                checked_out.set()
            result = run_in_folder(job, ws.worktree / self.task_rel, self.task, self.guard,
                                   self.task_rel,
                                   lambda dest: self.workspace.export(job.commit,
                                                                      self.task_rel, dest),
                                   env, self.limits)
            if ws is not self.workspace:     # a `git commit` or `git checkout` in the run
                problem = self._slot_head(ws, head, job)
                if problem:
                    result.status, result.metric = Status.CRASH, None
                    result.detail = f"tampered: the run {problem}"
        except Exception as exc:      # an engine-side failure costs this run, not the loop
            result = failed(job, f"slot error: {type(exc).__name__}: {exc}")
        with self._lock:
            self._free.append(slot)
            self._free.sort(key=lambda s: s[0])
            self._threads.pop(job.job_id, None)
        done(job, result)

    def _slot_head(self, ws, head: str, job: RunJob) -> str | None:
        """A slot's worktree stays detached at what it ran; what a run did to it is undone
        now, at its end (left in place, the slot's next run would fail on it)."""
        now = ws.head_or_none()
        switched = ws.reattach(detached_at=head)
        if now is not None and now != head:
            ref = self.workspace.keep_ref(f"tampered-{job.iteration}-{job.key.number}", now)
            ws.restore()
            return f"committed in its worktree (kept as {ref})"
        return switched and switched.removeprefix("the run ")

    def cancel(self, job_id: str) -> None:
        kill_marked(f"{JOB_ENV}={job_id}")

    def close(self, wait_s: float = 15.0) -> None:
        for job_id in list(self._threads):
            self.cancel(job_id)
        for thread in list(self._threads.values()):
            thread.join(wait_s)
