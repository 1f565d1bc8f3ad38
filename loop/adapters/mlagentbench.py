"""MLAgentBench tasks as fitness functions.

An MLAgentBench task (MLAgentBench/benchmarks/<task>/) is laid out as

    env/       the agent's workspace: starter code (train.py), data, descriptions
    scripts/   research_problem.txt (the prompt), read_only_files.txt (globs into env/),
               prepare.py (run once, beforehand), eval.py with get_score(submission_folder),
               and held-out answers next to it (e.g. answer.csv)

`make_task` writes an ordinary task folder from it: env/'s files become the task folder
(the .py files editable, read_only_files.txt's matches protected), the research problem
becomes the task's description (the LLM proposer's prompt), and scripts/ stays where it is
as the task's `private` folder: only the protected grader (grade.py) is told where, and it
calls eval.py's get_score on the submission the run handed over. The run step runs
train.py, then copies the submission.csv it wrote into $AUTORESEARCH_ARTIFACT_DIR;
nothing else it leaves behind is graded."""
from __future__ import annotations

import fnmatch
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from loop.adapters import dump_task_yaml
from loop.errors import UsageError

SUBMISSION = "submission.csv"
ENGINE_ROOT = Path(__file__).resolve().parents[2]
SKIP = {"__pycache__", ".git", "backup", ".ipynb_checkpoints"}


def read_only_globs(scripts: Path) -> list[str]:
    path = scripts / "read_only_files.txt"
    if not path.is_file():
        return []
    globs = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("./"):
            line = line[2:]
        if line and not line.startswith("#"):
            globs.append(line)
    return globs


def make_task(benchmark: Path, out: Path, direction: str, metric: str = "score",
              time_budget_s: float = 300.0) -> Path:
    benchmark = Path(benchmark).expanduser().resolve()
    env, scripts = benchmark / "env", benchmark / "scripts"
    for path in (env, scripts):
        if not path.is_dir():
            raise UsageError(f"{path} not found: expected an MLAgentBench task folder "
                             f"(env/ and scripts/)")
    problem = scripts / "research_problem.txt"
    if not problem.is_file():
        raise UsageError(f"{problem} not found")
    if not (scripts / "eval.py").is_file():
        raise UsageError(f"{scripts / 'eval.py'} not found: the task has no grader")
    if direction not in ("minimize", "maximize"):
        raise UsageError(f"direction must be minimize or maximize, got '{direction}'")
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    shutil.copytree(env, out, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns(*SKIP, SUBMISSION))
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    read_only = [g for g in read_only_globs(scripts) if any(fnmatch.fnmatch(f, g) for f in files)]
    editable = [f for f in files if f.endswith(".py")
                and not any(fnmatch.fnmatch(f, g) for g in read_only)]
    if not editable:
        raise UsageError(f"{env}: no editable .py file (all are read-only)")
    (out / "grade.py").write_text(GRADE_PY.format(engine=str(ENGINE_ROOT), metric=metric))
    description = problem.read_text(errors="replace").strip()
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": f"mlagentbench-{benchmark.name}",
        "description": f"{description}\n\n(MLAgentBench task {benchmark.name}. Write the test "
                       f"predictions to {SUBMISSION} in the working folder: it is collected "
                       f"after the run and scored by the benchmark's eval.py against held-out "
                       f"answers.)\n",
        "editable": editable,
        "protected": ["grade.py"] + read_only,
        "run": f"rm -f {SUBMISSION} && python train.py && if [ -f {SUBMISSION} ]; then "
               f"cp {SUBMISSION} \"$AUTORESEARCH_ARTIFACT_DIR/\"; fi",
        "evaluate": "python grade.py",
        "artifact": SUBMISSION,
        "private": str(scripts),
        "metric": {"name": metric, "direction": direction},
        "time_budget_s": float(time_budget_s),
        "grace_s": 120.0,
    }))
    return out


def grade_main(metric: str) -> int:
    """The protected grader's body: get_score(the artifact folder) from the task's eval.py."""
    private = os.environ.get("AUTORESEARCH_PRIVATE_DIR")
    if not private or not (Path(private) / "eval.py").is_file():
        print("error: the benchmark's scripts/eval.py is not available "
              "(AUTORESEARCH_PRIVATE_DIR unset or wrong)")
        return 2
    artifacts = os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "."
    sys.dont_write_bytecode = True          # leave the private folder exactly as it was
    sys.path.insert(0, private)
    spec = importlib.util.spec_from_file_location("mlagentbench_eval", Path(private) / "eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    score = float(module.get_score(artifacts))
    print(f"{metric}: {score:.6f}")
    return 0


GRADE_PY = '''\
"""Protected grader, written by `autoresearch task mlagentbench`: calls the benchmark's
scripts/eval.py get_score() on the submission the run handed over (see
loop/adapters/mlagentbench.py)."""
import sys

try:
    from loop.adapters.mlagentbench import grade_main
except ImportError:   # the engine is not installed: use the checkout that wrote this file
    sys.path.insert(0, {engine!r})
    from loop.adapters.mlagentbench import grade_main

sys.exit(grade_main({metric!r}))
'''
