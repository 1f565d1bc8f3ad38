"""The backend interface, and how every backend runs a job: `run_in_folder`.

A backend has N slots and one small interface:

    free() -> int                      slots not running anything now
    submit(job, done)                  start `job` on a free slot; later done(job, RunResult),
                                       called from another thread, once
    cancel(job_id)                     kill that run (its result still arrives, as a failure)
    close()                            cancel everything, release the slots

Every backend runs a job with `run_in_folder`, as check-task does: the same run spec
(loop/run/spec.py), the same runner and the same protected-grading checks. This module
names no backend (the registry is loop/run/backends/__init__.py)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from loop.run import grading
from loop.run.process import Limits, kill_marked
from loop.run.runner import RunResult, run_experiment
from loop.words import Status
from loop.run.spec import JOB_ENV, RunJob, make_spec
from loop.setup import inputs


class Backend(Protocol):
    """The interface above, for the type checker."""
    def free(self) -> int: ...
    def submit(self, job: RunJob, done: Callable[[RunJob, RunResult], None]) -> None: ...
    def cancel(self, job_id: str) -> None: ...
    def close(self, wait_s: float = 15.0) -> None: ...


def grader_folder(run_dir: Path) -> Path:
    """Where a run's grader copy is made, once training has ended and passed its checks:
    while it exists, the run is grading (what the progress panel shows, for local runs)."""
    return run_dir / "grader"


def failed(job: RunJob, why: str) -> RunResult:
    """A run that never produced a result (the engine or a worker failed, not the code)."""
    return RunResult(Status.CRASH, None, None, 0.0, None, job.log_path, why)


def run_in_folder(job: RunJob, folder: Path, task, guard: grading.Guard, task_rel: str,
                  export_grader: Callable[[Path], Path], slot_env: dict[str, str] | None = None,
                  limits: Limits | None = None) -> RunResult:
    """Run `job` with the task folder at `folder` (already holding the job's commit), its
    log and artifacts where the job says: training time-boxed, then protected grading from
    a pristine copy of the commit that `export_grader(dest)` writes (the task folder at
    dest/task_rel) only after training. Every backend and check-task run a job here."""
    grader_root = grader_folder(job.run_dir)
    grading.remove(grader_root)     # one an interrupted try left would say "grading" now
    grader_cwd = grader_root / task_rel if task_rel not in ("", ".") else grader_root
    spec = make_spec(job, task, folder, grader_cwd, slot_env, limits)
    artifacts = grading.fresh_dir(job.artifacts)
    inputs.place(folder, task.input_links)   # the uncommitted data the run reads

    def grader_copy() -> Path:
        copy = export_grader(grader_root)
        inputs.place(copy, task.input_links)
        return copy

    def before_grading():  # the run has ended; the grader's copy is made only now
        kill_marked(f"{JOB_ENV}={job.job_id}")
        return guard.before_grading(folder, artifacts, grader_copy)
    result = run_experiment(spec, before_grading)
    grading.remove(grader_root)             # a copy of the task folder per run adds up
    problem = guard.check_folder(folder) or guard.check_inputs(folder)
    if problem:
        result.status, result.metric = Status.CRASH, None
        result.detail = f"tampered: the run {problem}"
    return result
