"""`check-task`: a task folder validated, and its baseline run once in a throwaway copy (no
git needed), run and graded as the loop runs it: the same job, spec and checks as a backend's
(`run_in_folder`), with the pristine copy made from the task folder instead of a commit."""
from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from loop.run.backends import run_in_folder
from loop.run.grading import Guard, copy_task
from loop.run.runner import OK, RunResult
from loop.run.spec import RunJob
from loop.setup.task import Task, load_task, with_budget
from loop.words import RunKey


def check_task(path: str | Path, time_budget_s: float | None = None,
               out: Callable[[str], None] = print) -> tuple[Task, RunResult]:
    """Validate a task folder and run its baseline once in a temporary copy."""
    task = with_budget(load_task(path), time_budget_s)
    tmp = Path(tempfile.mkdtemp(prefix="autoresearch-check-"))
    try:
        work = copy_task(task.root, tmp / "work")
        guard = Guard(task, work)
        job = RunJob.make(0, RunKey.candidate(0), "", f"check-{uuid.uuid4().hex[:12]}", 0,
                          tmp / "run" / "run.log", tmp / "run")
        grading = "the lm grader" if task.grader else f"`{task.evaluate}`"
        out(f"check-task: {task.name}: running `{task.run}`"
            + (f", then grading with {grading}" if task.grade_command else "")
            + f" (budget {task.time_budget_s:g}s)")
        result = run_in_folder(job, work, task, guard, ".",
                               lambda dest: copy_task(task.root, dest))
        if result.status != OK and job.log_path.exists():
            tail = job.log_path.read_text(errors="replace").splitlines()[-25:]
            out("\n".join(f"  | {line}" for line in tail))
        return task, result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
