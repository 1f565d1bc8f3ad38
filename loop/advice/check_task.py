"""`check-task`: a task folder validated, and its baseline run once as the night's first run
would run it, in a throwaway place that is removed afterwards (also on Ctrl-C or an error).

In a git repository that place is a detached worktree of HEAD, made where `autoresearch run`
makes the loop's (.autoresearch/.worktrees/), with the same preflight checks, the task as HEAD
has it, the same grading guard (`Guard.at_commit`), job, spec, sandbox and environment
(`run_in_folder`, as every backend runs a job). So what is not committed is not there: the
working folder's edits and files that are untracked or ignored are named
(loop/advice/uncommitted.py) rather than silently tested. Outside git (a benchmark's task
folder), a plain copy of the
folder is run instead, without environments, caches or run state."""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from loop.errors import UsageError
from loop.repo.queries import head_commit
from loop.repo.workspace import Workspace, git_toplevel, worktree_path
from loop.run.backends.base import grader_folder, run_in_folder
from loop.run.grading import Guard, copy_task
from loop.run.process import Limits
from loop.run.runner import RunResult
from loop.run.spec import RunJob, grade_log
from loop.advice import uncommitted
from loop.run import sandbox
from loop.setup.preflight import check_run_command, check_task_committed
from loop.setup.task import Task, load_task, with_budget
from loop.pids import alive
from loop.words import RunKey, Status

CHECK_PREFIX = ".check-"     # a check's worktree: .check-<pid>-<random> (a tag never starts
                             # with '.', so it is never a tag's worktree)
Out = Callable[[str], None]


def check_task(path: str | Path, time_budget_s: float | None = None, out: Out = print,
               limits: Limits | None = None,
               slot_env: dict[str, str] | None = None) -> tuple[Task, RunResult]:
    """Validate a task folder and run its baseline once: at HEAD in a git repository, else
    in a temporary copy. `limits` and `slot_env`: the run config's, as a night's run gets."""
    user_task = with_budget(load_task(path), time_budget_s)
    repo_root = git_toplevel(user_task.root) if shutil.which("git") else None
    tmp = Path(tempfile.mkdtemp(prefix="autoresearch-check-"))
    try:
        if repo_root is None:
            return _in_a_copy(user_task, tmp, time_budget_s, out, limits, slot_env)
        return _at_head(user_task, repo_root, tmp, time_budget_s, out, limits, slot_env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _at_head(user_task: Task, repo_root: Path, tmp: Path, time_budget_s: float | None,
             out: Out, limits: Limits | None, slot_env) -> tuple[Task, RunResult]:
    task_rel = user_task.root.relative_to(repo_root).as_posix()
    ws = _throwaway_workspace(repo_root)
    head = head_commit(repo_root)
    if not head:
        raise UsageError(f"{repo_root} has no commits yet: commit the task first "
                         f"(check-task, as run does, runs HEAD)")
    check_task_committed(task_rel, ws.committed)          # what `run` checks first
    check_run_command(user_task, task_rel, ws.committed)
    dirty = uncommitted.dirty_line(ws.git, task_rel, user_task)
    if dirty:
        out(dirty)
    try:
        ws.open_detached(head)
        folder = ws.worktree / task_rel
        task = with_budget(load_task(folder, origin=user_task.root), time_budget_s)
        guard = Guard.at_commit(task, ws, task_rel, tmp / "pristine", head)
        job = _job(tmp)
        out(_header(task, f"a checkout of HEAD ({head[:10]}), as `autoresearch run` does"))
        result = run_in_folder(job, folder, task, guard, task_rel,
                               lambda dest: ws.export(head, task_rel, dest), slot_env, limits)
        if result.status != Status.OK:
            _show_tail(job, out)
            logs = "\n".join(p.read_text(errors="replace") for p in
                             (job.log_path, grade_log(job.log_path)) if p.exists())
            hint = uncommitted.failure_hint(
                logs, repo_root, task_rel, task, ws.git, ws.committed,
                [ws.worktree, grader_folder(job.run_dir)],
                sandbox.active((limits or Limits()).sandbox))
            if hint:
                out(hint)
        return task, result
    finally:
        ws.remove_worktree()


def _in_a_copy(user_task: Task, tmp: Path, time_budget_s: float | None, out: Out,
               limits: Limits | None, slot_env) -> tuple[Task, RunResult]:
    out(f"check-task: {user_task.root} is not in a git repository: running a copy of the "
        f"folder as it is (`autoresearch run` needs it committed in one)")
    work = copy_task(user_task.root, tmp / "work")
    task = with_budget(load_task(work, origin=user_task.root), time_budget_s)
    guard = Guard(task, work)
    job = _job(tmp)
    out(_header(task, "a copy of the folder"))
    result = run_in_folder(job, work, task, guard, ".",
                           lambda dest: copy_task(user_task.root, dest), slot_env, limits)
    if result.status != Status.OK:
        _show_tail(job, out)
    return task, result


def _job(tmp: Path) -> RunJob:
    return RunJob.make(0, RunKey.candidate(0), "", f"check-{uuid.uuid4().hex[:12]}", 0,
                       tmp / "run" / "run.log", tmp / "run")


def _header(task: Task, where: str) -> str:
    grading = f"the {task.grader.kind} grader" if task.grader else f"`{task.evaluate}`"
    return (f"check-task: {task.name}: running `{task.run}` in {where}"
            + (f", then grading with {grading}" if task.grade_command else "")
            + f" (budget {task.time_budget_s:g}s)")


def _show_tail(job: RunJob, out: Out) -> None:
    if job.log_path.exists():
        tail = job.log_path.read_text(errors="replace").splitlines()[-25:]
        out("\n".join(f"  | {line}" for line in tail))


def _throwaway_workspace(repo_root: Path) -> Workspace:
    """A workspace for one check, its worktree not made yet; those of checks whose process
    is gone (killed outright, no chance to clean up) are removed first."""
    for path in worktree_path(repo_root, "x").parent.glob(f"{CHECK_PREFIX}*"):
        pid = path.name[len(CHECK_PREFIX):].split("-")[0]
        if pid.isdigit() and not alive(int(pid)):
            Workspace(repo_root, "check", path).remove_worktree()
    name = f"{CHECK_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return Workspace(repo_root, "check", worktree_path(repo_root, name))
