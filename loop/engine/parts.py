"""The one place that builds the loop's parts and hands them to the engine.

`locate` runs before the tag's lock and creates nothing: where the loop runs, that the task
is committed and runnable, whether the sandbox works. `open_parts` runs under the lock: the
journal's state, the main worktree, the task as the branch has it, grading's guard, the
backend and its scheduler, the proposal queue, MLflow's tracker, the record sink and the
prompt context. Recovery (loop/engine/resume.py) then makes them agree with the journal."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loop.errors import UsageError
from loop.kinds import PROPOSER_KINDS
from loop.run import grading, sandbox
from loop.run.backends import make_backend
from loop.run.backends.base import Backend
from loop.setup.config import Config
from loop.engine.context import PromptContext
from loop.state.integrity import StateGuard
from loop.state.journal import Journal, State as JournalState, replay
from loop.setup.preflight import check_run_command, check_same_task, check_task_committed
from loop.engine.progress import Progress
from loop.proposers.registry import make_proposer
from loop.engine.records import RecordSink
from loop.run.process import Limits
from loop.engine.scheduler import ProposalQueue, Scheduler
from loop.judge.scoreboard import Scoreboard
from loop.setup.task import Task, load_task, with_budget
from loop.state.store import resolve_uri, store_paths
from loop.state.tracking import Tracker
from loop.words import UNPROTECTED
from loop.repo.workspace import Workspace, worktree_path


def state_dir(repo_root: Path, tag: str) -> Path:
    return repo_root / ".autoresearch" / tag


@dataclass
class NightSetup:
    """Where the loop runs, known before anything is created."""
    config: Config
    out: Callable[[str], None]
    progress: Progress
    user_task: Task              # the task as the user's checkout has it
    repo_root: Path
    task_rel: str                # the task folder, relative to the repository
    tag: str
    dir: Path                    # the tag's state folder
    journal: Journal
    workspace: Workspace
    sandbox: str                 # bwrap | none
    limits: Limits
    proposer: object
    program_path: Path
    # the backend's class (or any callable taking make_backend's keywords): by default the
    # one config.backend names; the engine's fast tests hand in one that runs nothing
    backend: Callable[..., Backend] | None = None


@dataclass
class LoopParts:
    """Everything the loop works with, opened under the lock."""
    setup: NightSetup
    state: JournalState          # the journal as found (recovery reads it)
    task: Task                   # the task as the branch has it (time budget applied)
    guard: grading.Guard         # what grading trusts
    state_guard: StateGuard      # refs, git config, journal and results.tsv after each run
    backend: Backend
    sched: Scheduler
    proposals: ProposalQueue
    tracker: Tracker
    sink: RecordSink
    prompt: PromptContext
    score: Scoreboard


def locate(config: Config, tag: str, out, progress: Progress, proposer=None,
           backend: Callable[..., Backend] | None = None) -> NightSetup:
    user_task = load_task(config.resolve(config.task))        # clear errors first
    with_budget(user_task, config.time_budget_s)   # refused when the code holds it
    repo_root = Workspace.find_repo_root(user_task.root)
    task_rel = user_task.root.relative_to(repo_root).as_posix()
    workspace = Workspace(repo_root, tag, worktree_path(repo_root, tag))
    _check_committed(workspace, task_rel, user_task, out)
    if not workspace.branch_exists():   # a resume runs the branch's files
        check_run_command(user_task, task_rel, workspace.committed)
        if proposer is None and config.iterations > 0:     # an engine given its own proposer,
            _check_searchable(config, user_task, task_rel)  # or a baseline only: no search
    directory = state_dir(repo_root, tag)
    return NightSetup(config, out, progress, user_task, repo_root, task_rel, tag, directory,
                Journal(directory / "journal.jsonl"), workspace,
                # required without one stops here (exit 2); auto without one warns
                sandbox.startup(config.sandbox, out), Limits.from_config(config),
                proposer or make_proposer(config.proposer, seed=config.seed),
                config.resolve(config.program), backend)


def _check_searchable(config: Config, task: Task, task_rel: str) -> None:
    """mutate, tune and the hybrid's tuner need settings to move: an empty space is refused
    now, not found after the baseline's runs."""
    kind = config.proposer.kind
    if not PROPOSER_KINDS[kind].searches_settings:
        return
    from loop.proposers.mutate import declarable, searchable
    if not searchable(task):
        names = declarable(task)
        some = (f" (its editable files set {', '.join(names[:12])}"
                f"{', ...' if len(names) > 12 else ''}: name those to search there)"
                if names else "")
        raise UsageError(f"--proposer {kind}: nothing to search in {task_rel or '.'}: no numeric "
                         f"UPPER_CASE constant in its editable files and no search_space in "
                         f"task.yaml; declare one{some} (docs/tasks.md, search_space) or run "
                         f"--proposer llm")


def _check_committed(workspace: Workspace, task_rel: str, task: Task, out) -> None:
    if workspace.branch_exists():
        return
    check_task_committed(task_rel, workspace.committed)
    dirty = workspace.git.status("--porcelain", "--", task.root.as_posix())
    if dirty:
        out(f"note: uncommitted changes under {task_rel or '.'} are not part of "
            f"this run (the branch starts at HEAD)")


def open_parts(setup: NightSetup) -> LoopParts:
    config, journal = setup.config, setup.journal
    workspace, task_rel = setup.workspace, setup.task_rel
    state = replay(journal.load())
    check_same_task(state.start, task_rel, setup.user_task.metric.name,
                    setup.user_task.metric.direction, setup.tag)
    for note in journal.notes:
        setup.out(f"resume: {note}")
    workspace.open()
    task = load_task(workspace.worktree / task_rel, origin=setup.repo_root / task_rel)
    task = with_budget(task, config.time_budget_s)
    guard = grading.Guard.at_commit(task, workspace, task_rel, setup.dir / "pristine")
    start = state.start or {}
    uri = resolve_uri(config.tracking.uri or start.get("tracking_uri"))
    experiment = config.tracking.experiment or start.get("experiment") \
        or f"autoresearch/{task.name}"
    for path in store_paths(uri):       # keep the store out of the user's `git status`
        workspace.ignore_path(path)
    backend_kw = dict(workspace=workspace, task=task, task_rel=task_rel, guard=guard,
                      workers=config.workers, devices=config.devices,
                      slot_root=setup.repo_root / ".autoresearch" / ".slots" / setup.tag,
                      limits=setup.limits, slurm=config.slurm)   # out of the state folder
    backend = setup.backend(**backend_kw) if setup.backend is not None \
        else make_backend(config.backend, **backend_kw)
    sched = Scheduler(backend)
    proposals = ProposalQueue(setup.proposer, config.proposer.concurrency, sched.events)
    params = {"task": task.name, "task_path": task_rel, "branch": workspace.branch,
              "proposer": config.proposer.kind, "model": config.proposer.model,
              "judge": config.judge.rule, "metric": task.metric.name,
              "direction": task.metric.direction, "time_budget_s": task.time_budget_s,
              "seed": config.seed, "workers": config.workers,
              "backend": config.backend, "sandbox": setup.sandbox}
    if not state.start:         # journalled before MLflow creates anything (resume-safe)
        journal.write("start", tag=setup.tag, branch=workspace.branch,
                      base_commit=workspace.tip(), task=task_rel,
                      metric=task.metric.name, direction=task.metric.direction,
                      protected=task.protected_metric, time_budget_s=task.time_budget_s,
                      tracking_uri=uri,
                      experiment=experiment, parent_run_id=None)
    by_iter = {r.iteration: r for r in state.records}
    sink: RecordSink
    tracker = Tracker(    # opens MLflow in the background; writes queue and retry
        uri, experiment, setup.tag, hashlib.sha256(str(setup.dir).encode()).hexdigest()[:12],
        parent_run_id=start.get("parent_run_id"), params=params,
        parent_tags={"git.branch": workspace.branch, "sandbox": setup.sandbox,
                     "metric_protection": "protected" if task.protected_metric
                     else UNPROTECTED},
        known_run_ids=[by_iter[n].run_id for n in state.untracked],
        on_parent=lambda run_id: journal.write("start_tracking", parent_run_id=run_id),
        on_tracked=lambda n, run_id: sink.tracked(n, run_id),   # once MLflow has it
        warn=setup.out)
    sink = RecordSink(setup.dir, task.metric.name, journal, tracker, workspace.branch,
                      {"proposer": config.proposer.kind, "model": config.proposer.model,
                       "time_budget_s": task.time_budget_s}, config.proposer.log_prompts)
    state_guard = StateGuard(workspace, journal, sink.results_path, sink.expected_results,
                             lock=sink.lock)
    prompt = PromptContext(workspace, task, task_rel, setup.program_path, config.seed,
                           config.proposer.kind, setup.out)
    return LoopParts(setup, state, task, guard, state_guard, backend, sched, proposals, tracker,
                 sink, prompt, Scoreboard())
