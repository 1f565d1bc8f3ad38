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

import argparse
import fnmatch
import os
import re
import shutil
import sys
from pathlib import Path

from loop.adapters.taskfile import dump_task_yaml
from loop.adapters.mlagentbench_checks import (is_vectorization, nothing_to_mutate,
                                               numpy_crash, self_reported_score)
from loop.errors import UsageError

SUBMISSION = "submission.csv"
ROOT_VAR = "AUTORESEARCH_MLAGENTBENCH"   # the benchmarks folder (MLAgentBench/benchmarks)
SKIP = {"__pycache__", ".git", "backup", ".ipynb_checkpoints"}
LARGE_MB = 100    # a task folder holding more data than this is worth a warning: it is committed


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


def graded_files(eval_py: Path) -> list[str]:
    """What get_score reads from the folder it is given, besides submission.csv: the
    real babylm and CLRS tasks grade a model or checkpoints left in the workspace, which
    this adapter does not hand over (only submission.csv travels to the grader)."""
    text = eval_py.read_text(errors="replace")
    head = re.search(r"def get_score\(\s*(\w+)", text)
    if not head:
        return []
    name = head.group(1)
    body = text[head.end():]
    uses = re.findall(rf"{name}\s*\+\s*[\"']([^\"']+)[\"']|"
                      rf"os\.path\.join\(\s*{name}\s*,\s*[\"']([^\"']+)[\"']", body)
    found = {a or b for a, b in uses}
    return sorted(f.lstrip("/") for f in found if f.lstrip("/") != SUBMISSION)


def from_args(args: argparse.Namespace) -> Path:
    """`autoresearch task mlagentbench`'s parsed arguments -> make_task."""
    return make_task(Path(args.benchmark), Path(args.out), direction=args.direction,
                     metric=args.metric, time_budget_s=args.time_budget_s,
                     timed_grader=args.timed_grader)


def make_task(benchmark: Path, out: Path, direction: str, metric: str = "score",
              time_budget_s: float = 300.0, warn=None, timed_grader: bool = False) -> Path:
    """Write the task folder. `warn(line)` hears what the user must know (stderr by default):
    data not prepared, data that will be committed, the variable to export."""
    warn = warn or (lambda line: print(line, file=sys.stderr))
    benchmark = Path(benchmark).expanduser().resolve()
    self_reported, vectorization = _check_benchmark(benchmark, direction, timed_grader)
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    editable, read_only = _copy_env(benchmark, out, warn)
    problem = benchmark / "scripts" / "research_problem.txt"
    description = problem.read_text(errors="replace").strip()
    if timed_grader:
        return _timed_task(benchmark, out, editable, read_only, description, time_budget_s)
    if self_reported:
        warn(f"warning: unprotected metric: {self_reported}"
             + ("; `--timed-grader` makes a task whose protected grader times the edited "
                "forward itself and checks its output" if vectorization else ""))
    (out / "grade.py").write_text(GRADE_PY.replace("METRIC", repr(metric)))
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
        "private": "${%s}/%s/scripts" % (ROOT_VAR, benchmark.name),
        "metric": {"name": metric, "direction": direction},
        "time_budget_s": float(time_budget_s),
        "grace_s": 120.0,
        **({"unprotected": self_reported} if self_reported else {}),
    }))
    if Path(os.environ.get(ROOT_VAR) or "/nonexistent").expanduser().resolve() != \
            benchmark.parent:
        warn(f"note: the task finds the benchmark's scripts/ through ${ROOT_VAR}; before "
             f"running it, export {ROOT_VAR}={benchmark.parent}")
    return out


def _check_benchmark(benchmark: Path, direction: str, timed_grader: bool
                     ) -> tuple[str | None, bool]:
    """Refuse what cannot become a task; (why its score is self-reported or None, whether
    it is the vectorization task)."""
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
    other = graded_files(scripts / "eval.py")
    if other:
        raise UsageError(f"{benchmark.name}: eval.py grades {', '.join(other)} from the "
                         f"workspace, not only {SUBMISSION}; this adapter hands the grader "
                         f"{SUBMISSION} alone (write a task.yaml by hand, docs/tasks.md)")
    if direction not in ("minimize", "maximize"):
        raise UsageError(f"direction must be minimize or maximize, got '{direction}'")
    self_reported = self_reported_score(scripts / "eval.py", SUBMISSION)
    vectorization = is_vectorization(env / "train.py")
    if timed_grader and not vectorization:
        raise UsageError(f"{benchmark.name}: --timed-grader knows vectorization's "
                         f"Conv2DLayer.forward only; this train.py has none")
    if vectorization:
        crash = numpy_crash(env)
        if crash:
            raise UsageError(crash)
    return self_reported, vectorization


def _copy_env(benchmark: Path, out: Path, warn) -> tuple[list[str], list[str]]:
    """env/ copied into the task folder: (its editable .py files, its read-only globs
    found there), with a warning for what the user must know."""
    env, scripts = benchmark / "env", benchmark / "scripts"
    env_files = sorted(p.relative_to(env).as_posix() for p in env.rglob("*") if p.is_file()
                       and not SKIP.intersection(p.relative_to(env).parts))
    globs = read_only_globs(scripts)
    missing = [g for g in globs if not any(fnmatch.fnmatch(f, g) for f in env_files)]
    if globs and len(missing) == len(globs):
        raise UsageError(f"{benchmark.name}: none of its read-only data is in env/ "
                         f"({', '.join(globs)}): prepare the task first (run "
                         f"`python prepare.py` in {scripts}; it downloads the data)")
    if missing:
        warn(f"warning: read-only files not found in env/: {', '.join(missing)}")
    shutil.copytree(env, out, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns(*SKIP, SUBMISSION))
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    read_only = [g for g in globs if any(fnmatch.fnmatch(f, g) for f in files)]
    editable = [f for f in files if f.endswith(".py")
                and not any(fnmatch.fnmatch(f, g) for g in read_only)]
    if not editable:
        raise UsageError(f"{env}: no editable .py file (all are read-only)")
    starter = out / "train.py"
    if starter.is_file() and "# *****" in starter.read_text(errors="replace"):
        warn("warning: train.py is an incomplete starter (its model section, between the "
             "`# ****` lines, is left for the agent): the baseline fails until you fill it in")
    size_mb = sum((out / f).stat().st_size for f in files) / 2**20
    if size_mb > LARGE_MB:
        warn(f"warning: the task folder holds {size_mb:.0f} MB of env/ data, which will be "
             f"committed with it; consider git-lfs for it")
    quiet = nothing_to_mutate(out, editable)
    if quiet:
        warn(quiet)
    return editable, read_only


def _timed_task(benchmark: Path, out: Path, editable: list[str], read_only: list[str],
                description: str, time_budget_s: float) -> Path:
    """vectorization with a grader that measures: times the edited Conv2DLayer.forward and
    checks its output against the original (reference_train.py, protected)."""
    here = Path(__file__).resolve().parent
    shutil.copyfile(out / "train.py", out / "reference_train.py")
    shutil.copyfile(here / "vectorization_grade.py", out / "timed_grade.py")
    (out / "timing.yaml").write_text(dump_task_yaml({
        "init": [3, 8, 3, 2, 2, "relu"], "input_shape": [32, 64, 64, 3], "seed": 0,
        "repeats": 3, "rtol": 1e-6, "atol": 1e-8}))
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": f"mlagentbench-{benchmark.name}-timed",
        "description": f"{description}\n\n(MLAgentBench task {benchmark.name}, graded here "
                       f"by timing: the protected timed_grade.py times Conv2DLayer.forward "
                       f"of train.py on a fixed input and checks its output against the "
                       f"original's; the time train.py writes is not used. Lower forward_s "
                       f"is better.)\n",
        "editable": editable,
        "protected": ["timed_grade.py", "timing.yaml", "reference_train.py"] + read_only,
        "run": "python train.py",
        "evaluate": "python timed_grade.py",
        "metric": {"name": "forward_s", "direction": "minimize"},
        "time_budget_s": float(time_budget_s),
        "grace_s": 120.0,
    }))
    return out


# The protected grader, self-contained (a clone of the research repo needs no engine
# checkout): get_score(the artifact folder) from the task's eval.py.
GRADE_PY = '''\
"""Protected grader, written by `autoresearch task mlagentbench`: calls the benchmark's
scripts/eval.py get_score() on the submission the run handed over."""
import importlib.util
import os
import sys
from pathlib import Path

private = os.environ.get("AUTORESEARCH_PRIVATE_DIR")
if not private or not (Path(private) / "eval.py").is_file():
    print("error: the benchmark's scripts/eval.py is not available "
          "(AUTORESEARCH_PRIVATE_DIR unset or wrong)")
    sys.exit(2)
sys.dont_write_bytecode = True          # leave the private folder exactly as it was
sys.path.insert(0, private)
spec = importlib.util.spec_from_file_location("mlagentbench_eval", Path(private) / "eval.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
score = float(module.get_score(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "."))
print(f"{METRIC}: {score:.6f}")
'''
