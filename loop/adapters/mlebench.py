"""MLE-bench competitions as fitness functions.

`make_task` turns a competition prepared by `mlebench prepare` into an ordinary task folder:

    <data-root>/<id>/prepared/public/   what the experiment sees ($DATA_DIR): description.md,
                                        train/test files, sample_submission.csv
    <data-root>/<id>/prepared/private/  the answers: the task's `private` folder, which only
                                        the protected grader is told about
    <competition folder>                MLE-bench's registry entry (mlebench/competitions/<id>/:
                                        config.yaml, grade.py, leaderboard.csv), copied into
                                        the task folder as protected files

task.yaml names both data folders relative to ${AUTORESEARCH_DATA_ROOT} (the data dir), so
the research repo holds no path of this machine: a clone elsewhere sets the variable to its
own copy of the prepared data. The grader (mlebench_grade.py, copied into the task's
`grader/` with metrics.py) scores $AUTORESEARCH_ARTIFACT_DIR/submission.csv."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from loop.adapters import metrics
from loop.adapters.taskfile import dump_task_yaml
from loop.adapters.mlebench_grade import (COMPETITION_DIR, SUBMISSION, direction as
                                          _direction, is_lfs_pointer, rank, read_leaderboard,
                                          thresholds)
from loop.errors import UsageError

DEFAULT_DATA_DIR = Path("~/.cache/mle-bench/data").expanduser()   # mlebench's own default
DATA_ROOT_VAR = "AUTORESEARCH_DATA_ROOT"
GRADER_DIR = "grader"               # in the task folder: the grading code, copied
__all__ = ["make_task", "from_args", "find_competition", "thresholds", "rank"]


@dataclass
class Competition:
    id: str
    public: Path
    private: Path
    answers: str                    # relative to `private`
    sample_submission: str          # relative to `public`
    grader_name: str
    grade_fn: str | None            # "module:function" from config.yaml
    registry: Path | None           # the registry folder (config.yaml, grade.py, leaderboard)
    description: str


# -- finding a competition -----------------------------------------------------------------
def find_competition(competition: str, data_dir: str | Path | None = None,
                     metric: str | None = None) -> Competition:
    """Locate a prepared competition by id or by its registry folder (holding config.yaml)."""
    folder = Path(competition).expanduser()
    config: dict = {}
    registry = None
    if (folder / "config.yaml").is_file():
        registry = folder.resolve()
        config = _yaml(registry / "config.yaml")
        comp_id = str(config.get("id") or registry.name)
    else:
        comp_id = competition
        registry = _mlebench_registry(comp_id)
        if registry is not None:
            config = _yaml(registry / "config.yaml")
    data = Path(data_dir).expanduser().resolve() if data_dir else DEFAULT_DATA_DIR
    prepared = data / comp_id / "prepared"
    public, private = prepared / "public", prepared / "private"
    for path in (public, private):
        if not path.is_dir():
            raise UsageError(f"{path} not found: prepare the competition first "
                             f"(`mlebench prepare -c {comp_id}`) or pass --data-dir")
    dataset = config.get("dataset") or {}
    answers = _relative(dataset.get("answers"), data, private) or _only_csv(private)
    sample = _relative(dataset.get("sample_submission"), data, public) or "sample_submission.csv"
    if not (private / answers).is_file():
        raise UsageError(f"answers file not found: {private / answers}")
    if not (public / sample).is_file():
        raise UsageError(f"sample submission not found: {public / sample}")
    grader = config.get("grader") or {}
    name = metric or grader.get("name")
    if not name:
        raise UsageError(f"{comp_id}: no grader in a config.yaml; pass --metric "
                         f"({', '.join(metrics.DIRECTIONS)})")
    description = ""
    for doc in (public / "description.md", registry / "description.md" if registry else None):
        if doc is not None and doc.is_file():
            description = doc.read_text(errors="replace")
            break
    return Competition(comp_id, public, private, answers, sample, str(name),
                       None if metric else grader.get("grade_fn"), registry, description)


def _yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping")
    return data


def _mlebench_registry(comp_id: str) -> Path | None:
    try:
        from mlebench.registry import registry  # optional: only when mlebench is installed
    except ImportError:
        return None
    folder = registry.get_competitions_dir() / comp_id
    return folder if (folder / "config.yaml").is_file() else None


def _relative(value, data: Path, base: Path) -> str | None:
    """A config.yaml dataset path (relative to the data dir) as a path relative to `base`."""
    if not value:
        return None
    path = (data / value).resolve()
    try:
        return path.relative_to(base.resolve()).as_posix()
    except ValueError:
        return None


def _only_csv(private: Path) -> str:
    found = sorted(p.name for p in private.glob("*.csv"))
    if len(found) != 1:
        raise UsageError(f"{private}: cannot tell which file holds the answers "
                         f"({', '.join(found) or 'no CSV'}); add a config.yaml")
    return found[0]


# -- writing the task folder ----------------------------------------------------------------
def from_args(args: argparse.Namespace) -> Path:
    """`autoresearch task mlebench`'s parsed arguments -> make_task."""
    return make_task(args.competition, Path(args.out), data_dir=args.data_dir,
                     metric=args.metric, direction=args.direction,
                     time_budget_s=args.time_budget_s)


def make_task(competition: str, out: Path, data_dir: str | Path | None = None,
              metric: str | None = None, direction: str | None = None,
              time_budget_s: float = 300.0, warn=None) -> Path:
    """Write the task folder. `warn(line)` hears what the user must know (stderr by
    default): a leaderboard left as a Git LFS pointer, the data root to export."""
    warn = warn or (lambda line: print(line, file=sys.stderr))
    comp = find_competition(competition, data_dir, metric)
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    direction, leaderboard = _direction_and_board(comp, direction, warn)
    out.mkdir(parents=True, exist_ok=True)
    _copy_grading(comp, out)
    metric_name = re.sub(r"[^A-Za-z0-9_]+", "_", comp.grader_name).strip("_") or "score"
    grading = {"id": comp.id, "metric": metric_name, "grader": comp.grader_name,
               "grade_fn": comp.grade_fn, "builtin": bool(metric), "answers": comp.answers,
               "sample_submission": comp.sample_submission,
               "leaderboard": "leaderboard.csv" if leaderboard else None}
    (out / "grading.json").write_text(json.dumps(grading, indent=2) + "\n")
    (out / "grade.py").write_text(GRADE_PY)
    starter = Path(__file__).with_name("mlebench_starter.py").read_text()
    (out / "train.py").write_text(starter.replace(
        "PREDICT = 'label'", f"PREDICT = {_predict_kind(comp.grader_name)!r}"))
    root = "${%s}/%s/prepared" % (DATA_ROOT_VAR, comp.id)
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": f"mlebench-{comp.id}",
        "description": _task_description(comp),
        "editable": ["train.py"],
        "protected": ["grade.py", "grading.json", f"{COMPETITION_DIR}/*", f"{GRADER_DIR}/*"],
        "run": "python train.py",
        "evaluate": "python grade.py",
        "artifact": SUBMISSION,
        "private": f"{root}/private",
        "env": {"DATA_DIR": f"{root}/public"},
        "metric": {"name": metric_name, "direction": direction},
        "time_budget_s": float(time_budget_s),
        "grace_s": 120.0,
    }))
    data_root = comp.public.parents[2]
    if Path(os.environ.get(DATA_ROOT_VAR) or "/nonexistent").expanduser().resolve() != data_root:
        warn(f"note: the task finds its data through ${DATA_ROOT_VAR}; before running it, "
             f"export {DATA_ROOT_VAR}={data_root}")
    return out


def _direction_and_board(comp: Competition, direction: str | None, warn
                         ) -> tuple[str, list[float | None] | None]:
    """(the metric's direction, the leaderboard or None), with a warning for a leaderboard
    left as an LFS pointer and for a grader that needs mlebench installed."""
    board = comp.registry / "leaderboard.csv" if comp.registry else None
    leaderboard = read_leaderboard(board) if board else None
    if board is not None and board.is_file() and is_lfs_pointer(board):
        warn(f"warning: {board} is a Git LFS pointer, not the leaderboard: medal thresholds "
             f"unavailable. Fetch the real files with `git lfs install && git lfs pull` in "
             f"the mle-bench checkout, then make the task again")
    if metrics.canonical(comp.grader_name) is None and importlib.util.find_spec("mlebench") \
            is None:
        warn(f"warning: no built-in grader for '{comp.grader_name}': the competition's "
             f"grade.py needs mlebench's helpers, so grading fails until mlebench is "
             f"installed where the loop runs")
    direction = direction or _direction(leaderboard) or \
        metrics.DIRECTIONS.get(metrics.canonical(comp.grader_name) or "")
    if direction is None:
        raise UsageError(f"cannot tell whether a higher '{comp.grader_name}' is better (no "
                         f"leaderboard); pass --direction minimize|maximize")
    return direction, leaderboard


def _copy_grading(comp: Competition, out: Path) -> None:
    """The competition's registry files and our grader, into the (protected) folders."""
    copied = out / COMPETITION_DIR
    copied.mkdir()
    if comp.registry:
        for path in sorted(comp.registry.iterdir()):
            if path.is_file() and path.suffix in (".py", ".yaml", ".csv", ".md", ".txt") \
                    and not is_lfs_pointer(path):
                shutil.copy2(path, copied / path.name)
    (copied / "description.md").write_text(comp.description or f"# {comp.id}\n")
    grader = out / GRADER_DIR
    grader.mkdir()
    for name in ("mlebench_grade.py", "metrics.py"):
        shutil.copy2(Path(__file__).with_name(name), grader / name)


def _predict_kind(grader_name: str) -> str:
    return "probability" if metrics.canonical(grader_name) in ("auc", "logloss") else "label"


def _task_description(comp: Competition) -> str:
    text = comp.description.strip()
    if len(text) > 4000:
        text = text[:4000].rsplit("\n", 1)[0] + "\n[... see $DATA_DIR/description.md]"
    return (f"MLE-bench competition {comp.id}. The data is in $DATA_DIR (read-only). Write "
            f"predictions for the test set to $AUTORESEARCH_ARTIFACT_DIR/{SUBMISSION} in the "
            f"format of $DATA_DIR/{comp.sample_submission}; the protected grader scores them "
            f"against held-out answers with the competition's metric ({comp.grader_name}).\n\n"
            f"{text}\n")


GRADE_PY = '''\
"""Protected grader, written by `autoresearch task mlebench`: scores
$AUTORESEARCH_ARTIFACT_DIR/submission.csv against the answers in $AUTORESEARCH_PRIVATE_DIR
with the competition's own metric (grader/mlebench_grade.py, a copy of the engine's)."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "grader"))
from mlebench_grade import grade_main  # noqa: E402

sys.exit(grade_main(HERE / "grading.json"))
'''
