"""Checks made before the engine touches anything (branch, worktree, state folder, MLflow):
what a run command needs, and that a resumed tag is still the same task."""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from loop.errors import UsageError
from loop.setup.interpreter import resolve_command

SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".R", ".jl", ".js")


def check_task_committed(task_rel: str, committed) -> None:
    """The loop runs a worktree of HEAD: the task's task.yaml must be in it (`committed(path)`
    says whether a repo-relative path is in HEAD)."""
    if not committed(f"{task_rel}/task.yaml".lstrip("/") if task_rel not in ("", ".")
                     else "task.yaml"):
        raise UsageError(f"{task_rel or '.'}/task.yaml is not committed: the loop runs "
                         f"on a branch from HEAD, so commit the task first")


def check_run_command(task, task_rel: str, committed) -> None:
    """Every script the `run` command names exists in the task folder and is committed (the
    loop runs on a branch from HEAD); the program it starts exists on PATH. `committed(path)` says
    whether a repo-relative path is in HEAD."""
    where = f"{task.root / 'task.yaml'}"
    try:
        words = shlex.split(task.run)
    except ValueError as exc:
        raise UsageError(f"{where}: run: {exc}") from None
    for word in words:
        if "=" in word.split("/")[0] or word.startswith("-") or word in ("&&", "||", ";", "|"):
            continue
        if not word.endswith(SCRIPT_SUFFIXES):
            continue
        path = Path(word)
        if path.is_absolute() or ".." in path.parts:
            continue                     # outside the task folder: not ours to check
        if not (task.root / path).is_file():
            raise UsageError(f"{where}: run: '{word}' not found in the task folder "
                             f"{task.root}")
        rel = f"{task_rel}/{path.as_posix()}".lstrip("/") if task_rel not in ("", ".") \
            else path.as_posix()
        if not committed(rel):
            raise UsageError(f"{where}: run: '{word}' is not committed: the loop runs on a "
                             f"branch from HEAD, so commit it first")
    # the program as the run will start it: `uv run python` is the project's .venv python,
    # so uv itself need not be on PATH (a node or CI with the environment but no uv)
    resolved = shlex.split(resolve_command(task.run, task.root))
    program = resolved[0] if resolved else ""
    if program and "=" not in program and not program.endswith(SCRIPT_SUFFIXES) \
            and "/" not in program and program not in ("python", "python3") \
            and shutil.which(program) is None:
        raise UsageError(f"{where}: run: program '{program}' not found on PATH")


def check_same_task(start: dict | None, task_rel: str, metric: str, direction: str,
                    tag: str) -> None:
    """A resumed tag must measure the same thing: another metric or direction would mix
    values and deltas in one results.tsv."""
    if not start:
        return
    was = (start.get("task"), start.get("metric"), start.get("direction"))
    now = (task_rel, metric, direction)
    if all(w is None for w in was) or was == now:
        return
    raise UsageError(f"tag '{tag}' was started on task {was[0] or '.'} ({was[1]}, {was[2]}); "
                     f"this run asks for {now[0] or '.'} ({now[1]}, {now[2]}). Resume it with "
                     f"that task, or use a new --tag")
