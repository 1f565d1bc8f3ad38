"""One run, defined once: which run it is (`RunJob`), and what it runs with (`RunSpec`).

`make_spec` is the one place a job and its task become a run: the commands, the folders, the
time limits and the environment of both steps (`run_envs`, the only place the
AUTORESEARCH_* variables are assembled). Every backend and `check-task` build their runs
here (through loop/run/backends/__init__.py's `run_in_folder`), so a run on a slot, on a Ray
node and in check-task's throwaway copy sees the same variables. Data only: nothing here
starts a process (loop/run/process.py does) or reads a metric (loop/run/runner.py)."""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from loop.run import netbridge, sandbox
from loop.run.early_stop import StopRule
from loop.run.process import Limits, experiment_env
from loop.setup import flags, graders, interpreter
from loop.words import RunKey

if TYPE_CHECKING:
    from loop.setup.task import Task

JOB_ENV = "AUTORESEARCH_JOB_ID"          # marks one run's processes (several share a run id)
RUN_ID_ENV = "AUTORESEARCH_RUN_ID"       # marks an iteration's processes (resume kills them)
PRIVATE_ENV = "AUTORESEARCH_PRIVATE_DIR"  # the grader's held-out folder
HELD_OUT_ENV = "AUTORESEARCH_HELD_OUT"   # _0, _1, ...: the grader's held-out paths
READ_ONLY_ENV = "AUTORESEARCH_READ_ONLY"  # _0, _1, ...: read-only data both steps see
NETWORK_ENV = netbridge.ENV              # the endpoints a step may reach
GRADER_PATH_ENV = "AUTORESEARCH_GRADER_PATH"      # the grader's code folders (sitecustomize)
GRADER_PROTECTED_ENV = "AUTORESEARCH_GRADER_PROTECTED"   # the task's protected globs


@dataclass
class RunJob:
    """One experiment run: a candidate's run, a baseline run, or a run of the best."""
    job_id: str                  # unique: "<iteration>-<number>-<random>" (marks its processes)
    iteration: int
    key: RunKey                  # which run of the iteration it is
    commit: str                  # the tree to run
    run_id: str                  # MLflow run of the iteration; also marks its processes
    seed: int                    # $AUTORESEARCH_SEED
    log_path: Path = Path("run.log")
    run_dir: Path = Path("run")  # artifacts/ (kept) and grader/ (removed) go here
    lane: int = 0                # the progress display's line for it (set when it starts)
    stop_rule: StopRule | None = None   # a candidate's run: stopped once clearly worse than
                                        # the best's curves (loop/run/early_stop.py)

    @classmethod
    def make(cls, iteration: int, key: RunKey, commit: str, run_id: str, base_seed: int,
             log_path: Path, run_dir: Path) -> RunJob:
        """A job with a fresh id (unique across engines, tags and restarts) and a fresh,
        reproducible seed for each run: base + 1000 * iteration + the run's number."""
        k = key.number
        return cls(f"{iteration}-{k}-{uuid.uuid4().hex[:10]}", iteration, key, commit, run_id,
                   base_seed + 1000 * iteration + k, log_path, run_dir)

    @property
    def artifacts(self) -> Path:
        """$AUTORESEARCH_ARTIFACT_DIR: what training hands the grader (kept with a keep)."""
        return self.run_dir / "artifacts"

    @property
    def priority(self) -> tuple:
        """Lower first: re-runs of the best, then older iterations (loop/words.py)."""
        return self.key.priority(self.iteration)


@dataclass(frozen=True)
class GradeStep:
    """The protected grading step, run after training exited 0, from its own folder."""
    command: str
    folder: Path
    env: dict[str, str]
    timeout_s: float


@dataclass(frozen=True)
class RunSpec:
    """What `runner.run_experiment` runs: the training step, then the grading step if any."""
    command: str                 # the training step (`/bin/sh -c`)
    folder: Path                 # where it runs: the task folder holding the job's commit
    env: dict[str, str]          # its whole environment (`run_envs`)
    timeout_s: float             # the training limit: budget + grace, then it is killed
    log_path: Path               # one log per run; the grader's part is appended
    metric_pattern: str
    memory_pattern: str = ""
    grade: GradeStep | None = None
    artifacts: Path | None = None    # $AUTORESEARCH_ARTIFACT_DIR: writable to both steps
    hidden: tuple[str, ...] = ()     # paths only the grader is told of: hidden from training
    limits: Limits = field(default_factory=Limits)
    software: tuple[str, ...] = ()   # the task's interpreters' environments (a venv under
                                     # HOME or /tmp, the Python it links to): shown read-only
                                     # to both steps in the sandbox
    progress_pattern: str = ""       # the training step's progress line (its loss curve)
    budget_s: float = 0.0            # the training budget (a progress line without a share)
    stop_rule: StopRule | None = None
    on_timeout: str = "fail"         # last: a run killed at the time box is scored from the
                                     # last metric it printed (task.yaml `on_timeout`)
    metric_name: str = "metric"

    @property
    def patterns(self) -> dict[str, str]:
        return {"metric": self.metric_pattern, "memory": self.memory_pattern}

    @property
    def grade_log(self) -> Path:
        return grade_log(self.log_path)


def grade_log(log_path: Path) -> Path:
    """Where a run's grader writes its own log, beside the run's."""
    return log_path.with_name(log_path.stem + ".grade.log")


def run_envs(task: Task, job: RunJob, artifacts: Path,
             slot_env: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The training step's environment and the grader's: the only place they are put
    together. Training: the scrubbed parent environment, the task's `pass_env`, `env`,
    `read_only` paths and `network`, then the run's own variables and the slot's devices.
    The grader: all of that, plus what training must not see (the private folder, the
    held-out paths, `grader_env`, `grader_network`). Each step's interpreter sets
    VIRTUAL_ENV (or CONDA_PREFIX) and PATH as its environment's activation would; the
    engine's own never reaches a run."""
    passed = {k: os.environ[k] for k in task.pass_env if k in os.environ}
    shown = {f"{READ_ONLY_ENV}_{i}": path for i, path in enumerate(task.read_only)}
    network = {NETWORK_ENV: " ".join(task.network)} if task.network else {}
    common = experiment_env({
        **passed, **task.env, **shown, **network,
        "AUTORESEARCH_SEED": str(job.seed),
        "AUTORESEARCH_TIME_BUDGET": f"{task.time_budget_s:g}",
        "AUTORESEARCH_ITERATION": str(job.iteration), RUN_ID_ENV: job.run_id,
        **(slot_env or {}),
        "AUTORESEARCH_ARTIFACT_DIR": str(artifacts), JOB_ENV: job.job_id})
    train = activated(common, task.train_command, passed)
    extra = {k: os.environ[k] for k in task.grader_env if k in os.environ}
    extra["PYTHONDONTWRITEBYTECODE"] = "1"   # a grader importing from private/ leaves it as is
    if task.private_dir:
        extra[PRIVATE_ENV] = str(task.private_dir)
    for i, path in enumerate(task.held_out):    # named only here: hidden from training
        extra[f"{HELD_OUT_ENV}_{i}"] = str(Path(path))
    if task.network or task.grader_network:
        extra[NETWORK_ENV] = " ".join([*task.network, *task.grader_network])
    grade = task.grade_command or task.train_command
    return train, activated({**common, **extra}, grade, passed)


def activated(env: dict[str, str], command: str, passed: dict[str, str]) -> dict[str, str]:
    """`env` for running `command`: its interpreter's environment activated (VIRTUAL_ENV or
    CONDA_PREFIX, its bin folder first on PATH; loop/setup/interpreter.py), unless the task
    passes those variables itself (`pass_env`)."""
    variables = interpreter.activation(interpreter.of_command(command))
    prefix = variables.pop("PATH_PREFIX", "")
    env = {**env, **{k: v for k, v in variables.items() if k not in passed}}
    if prefix:
        env["PATH"] = os.pathsep.join([prefix, env.get("PATH", os.defpath)])
    return env


def make_spec(job: RunJob, task: Task, folder: Path, grader_folder: Path,
              slot_env: dict[str, str] | None = None, limits: Limits | None = None) -> RunSpec:
    """`job` of `task`, run in `folder` (already holding the job's commit) and graded in
    `grader_folder` (made only after training); artifacts under the job's run folder."""
    env, grader_env = run_envs(task, job, job.artifacts, slot_env)
    env = code_first(env, folder, folder)
    grader_env = isolated(code_first(grader_env, folder, grader_folder), task.protected)
    grade = GradeStep(task.grade_command, grader_folder, grader_env, task.grade_timeout_s) \
        if task.grade_command else None
    software = [root for command in (task.train_command, task.grade_command) if command
                for root in interpreter.roots(interpreter.of_command(command))]
    software += [target for _, target in task.input_links]   # `inputs`: read-only data
    software += list(task.caches)             # `caches`: ~/.cache/<name>, filled before
    command = flags.command(task.train_command, task.flags, folder, task.flags_style) \
        if task.flags else task.train_command
    return RunSpec(command, folder, env, task.time_budget_s + task.grace_s,
                   job.log_path, task.metric.pattern, task.memory_pattern, grade, job.artifacts,
                   grader_only(env, grader_env), limits or Limits(),
                   tuple(dict.fromkeys(software)), task.progress_pattern, task.time_budget_s,
                   job.stop_rule if task.progress_pattern else None, task.on_timeout,
                   task.metric.name)


def grader_only(env: dict[str, str], grader_env: dict[str, str]) -> tuple[str, ...]:
    """Existing absolute paths the grader's environment names and training's does not (the
    private data, held-out files): hidden from training, read-only to the grader. Not the
    grader's PYTHONPATH: its own copy of the code (`code_first`), nothing to hide."""
    return tuple(v for k, v in grader_env.items() if k not in ("PYTHONPATH", GRADER_PATH_ENV)
                 and env.get(k) != v and v.startswith("/") and os.path.exists(v))


def isolated(env: dict[str, str], protected: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The grading step's environment with nothing of the candidate's copy on the path while
    its Python starts: PYTHONPATH names only the engine's start-up folder, whose
    `sitecustomize` puts the code folders (`code_first`'s, in $AUTORESEARCH_GRADER_PATH)
    after the standard library and imports every module the environment provides from the
    environment (loop/run/graders/startup/sitecustomize.py). So a candidate's new
    `statistics/`, `sitecustomize/` or `numpy.py` is never what the grader imports."""
    return {**env, "PYTHONPATH": str(graders.STARTUP), GRADER_PATH_ENV: env.get("PYTHONPATH", ""),
            GRADER_PROTECTED_ENV: "\n".join(protected)}


def code_first(env: dict[str, str], folder: Path, copy: Path) -> dict[str, str]:
    """`env` with the code of the run's checkout first on PYTHONPATH: `copy` (the task
    folder of the worktree, or of the grader's copy), the checkout's root when the task
    lives below it, and `src/` of either where the worktree has one (a src layout). So the
    candidate's packages shadow an editable install (`pip install -e .`) of the same project,
    whose finder points at the user's checkout: the code a run imports is the code it was
    given, and the sandbox, which hides that checkout, needs nothing of it. A PYTHONPATH the
    task's `env` sets comes after these (relative entries read from the step's folder).
    `folder` is the training step's task folder: it tells where the checkout's root is."""
    root = sandbox.worktree_root(folder)
    depth = len(folder.relative_to(root).parts) if folder != root else 0
    copy_root = copy.parents[depth - 1] if depth else copy
    places = [(folder, copy), (root, copy_root)]
    places += [(a / "src", b / "src") for a, b in list(places) if (a / "src").is_dir()]
    paths = [str(b) for _, b in places]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
