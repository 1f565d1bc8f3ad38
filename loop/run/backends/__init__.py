"""Where experiment runs execute. A backend has N slots and one small interface:

    free() -> int                      slots not running anything now
    submit(job, done)                  start `job` on a free slot; later done(job, RunResult),
                                       called from another thread, once
    cancel(job_id)                     kill that run (its result still arrives, as a failure)
    close()                            cancel everything, release the slots

`local` runs on this machine (one worktree and device per slot, loop/run/backends/local.py),
`ray` on a Ray cluster (loop/run/backends/ray.py). Both run a job with `run_in_folder`, i.e. the
same runner and the same protected-grading checks."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from loop.run import grading
from loop.run.runner import CRASH, RunResult, experiment_env, kill_marked, run_experiment

JOB_ENV = "AUTORESEARCH_JOB_ID"   # marks one run's processes (several runs share a run id)
BACKENDS = ("local", "ray")


@dataclass
class RunJob:
    """One experiment run: a candidate's run k, a baseline run, or a re-run of the best."""
    job_id: str                  # unique: "<iteration>-<k>-<random>" (marks its processes)
    iteration: int
    k: int                       # run number within the iteration (logs, seeds)
    commit: str                  # the tree to run
    run_id: str                  # MLflow run of the iteration; also marks its processes
    env: dict = field(default_factory=dict)   # seed, budget, iteration, run id
    log_path: Path = Path("run.log")
    run_dir: Path = Path("run")  # artifacts/ (kept) and grader/ (removed) go here
    kind: str = "candidate"      # candidate | remeasure | pair (the best, beside a candidate)
    priority: tuple = ()         # lower first: re-runs of the best, then older iterations
    lane: int = 0                # the progress display's line for it (set when it starts)
    pair_of: int = -1            # kind "pair": the candidate's run it is measured alongside


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
    return RunResult(CRASH, None, None, 0.0, None, job.log_path, why)


def run_in_folder(job: RunJob, folder: Path, task, guard, run_dir: Path, log_path: Path,
                  task_rel: str, export_grader: Callable[[Path], Path],
                  slot_env: dict, limits=None) -> RunResult:
    """Run `job` with the task folder at `folder` (already holding the job's commit):
    training time-boxed, then protected grading from a pristine copy of the commit that
    `export_grader(dest)` writes (the task folder at dest/task_rel) only after training."""
    artifacts = grading.fresh_dir(run_dir / "artifacts")
    env = experiment_env({**grading.task_env(task), **job.env, **slot_env,
                          "AUTORESEARCH_ARTIFACT_DIR": str(artifacts), JOB_ENV: job.job_id})
    grader_root = grader_folder(run_dir)
    grading.remove(grader_root)     # one an interrupted try left would say "grading" now
    grader_cwd = grader_root / task_rel if task_rel not in ("", ".") else grader_root

    def before_grading():  # the run has ended; the grader's copy is made only now
        kill_marked(f"{JOB_ENV}={job.job_id}")
        return guard.before_grading(folder, artifacts, lambda: export_grader(grader_root))
    result = run_experiment(task.train_command, folder, env, task.time_budget_s + task.grace_s,
                            log_path, task.metric.pattern, task.memory_pattern,
                            task.grade_command, grader_cwd,
                            task.grade_timeout_s, guard.grader_env(env), before_grading, limits)
    grading.remove(grader_root)             # a copy of the task folder per run adds up
    problem = guard.check_folder(folder)
    if problem:
        result.status, result.metric = CRASH, None
        result.detail = f"tampered: the run {problem}"
    return result


def make_backend(name: str, **kw) -> Backend:
    if name == "local":
        from loop.run.backends.local import LocalBackend
        return LocalBackend(**kw)
    if name == "ray":
        from loop.run.backends.ray import RayBackend
        return RayBackend(**kw)
    raise ValueError(f"unknown backend {name!r}")
