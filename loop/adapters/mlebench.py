"""MLE-bench competitions as fitness functions.

`make_task` turns a competition prepared by `mlebench prepare` into an ordinary task folder:

    <data-dir>/<id>/prepared/public/    what the experiment sees ($DATA_DIR): description.md,
                                        train/test files, sample_submission.csv
    <data-dir>/<id>/prepared/private/   the answers: the task's `private` folder, which only
                                        the protected grader is told about
    <competition folder>                MLE-bench's registry entry (mlebench/competitions/<id>/:
                                        config.yaml, grade.py, leaderboard.csv), copied into
                                        the task folder as protected files

The experiment writes $AUTORESEARCH_ARTIFACT_DIR/submission.csv; the grader (`grade_main`)
scores it with the competition's own grade: `mlebench.grade.grade_csv` when mlebench is
importable, else the competition's grade function (config.yaml `grader.grade_fn`, or its
grade.py loaded from the copy), else a built-in metric named by `grader.name` or --metric.
With a leaderboard it also prints the medal thresholds and where the score lands, computed
as MLE-bench does (Kaggle's progression rules; see `thresholds`)."""
from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import os
import re
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from loop.adapters import metrics
from loop.adapters import dump_task_yaml
from loop.errors import UsageError

DEFAULT_DATA_DIR = Path("~/.cache/mle-bench/data").expanduser()   # mlebench's own default
SUBMISSION = "submission.csv"
COMPETITION_DIR = "competition"     # in the task folder: the registry entry's copy
ENGINE_ROOT = Path(__file__).resolve().parents[2]


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
    for name, path in (("public", public), ("private", private)):
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
    for path in (public / "description.md", registry / "description.md" if registry else None):
        if path is not None and path.is_file():
            description = path.read_text(errors="replace")
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
def make_task(competition: str, out: Path, data_dir: str | Path | None = None,
              metric: str | None = None, direction: str | None = None,
              time_budget_s: float = 300.0) -> Path:
    comp = find_competition(competition, data_dir, metric)
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty; choose a new --out folder")
    leaderboard = _leaderboard_scores(comp.registry / "leaderboard.csv") if comp.registry else None
    direction = direction or _direction(leaderboard) or \
        metrics.DIRECTIONS.get(metrics.canonical(comp.grader_name) or "")
    if direction is None:
        raise UsageError(f"cannot tell whether a higher '{comp.grader_name}' is better (no "
                         f"leaderboard); pass --direction minimize|maximize")
    out.mkdir(parents=True, exist_ok=True)
    copied = out / COMPETITION_DIR
    copied.mkdir()
    if comp.registry:
        for path in sorted(comp.registry.iterdir()):
            if path.is_file() and path.suffix in (".py", ".yaml", ".csv", ".md", ".txt"):
                shutil.copy2(path, copied / path.name)
    (copied / "description.md").write_text(comp.description or f"# {comp.id}\n")
    metric_name = re.sub(r"[^A-Za-z0-9_]+", "_", comp.grader_name).strip("_") or "score"
    grading = {"id": comp.id, "metric": metric_name, "grader": comp.grader_name,
               "grade_fn": comp.grade_fn, "builtin": bool(metric), "answers": comp.answers,
               "sample_submission": comp.sample_submission,
               "leaderboard": "leaderboard.csv" if leaderboard else None}
    (out / "grading.json").write_text(json.dumps(grading, indent=2) + "\n")
    (out / "grade.py").write_text(GRADE_PY.format(engine=str(ENGINE_ROOT)))
    starter = Path(__file__).with_name("mlebench_starter.py").read_text()
    (out / "train.py").write_text(starter.replace(
        "PREDICT = 'label'", f"PREDICT = {_predict_kind(comp.grader_name)!r}"))
    (out / "task.yaml").write_text(dump_task_yaml({
        "name": f"mlebench-{comp.id}",
        "description": _task_description(comp),
        "editable": ["train.py"],
        "protected": ["grade.py", "grading.json", f"{COMPETITION_DIR}/*"],
        "run": "python train.py",
        "evaluate": "python grade.py",
        "artifact": SUBMISSION,
        "private": str(comp.private),
        "env": {"DATA_DIR": str(comp.public)},
        "metric": {"name": metric_name, "direction": direction},
        "time_budget_s": float(time_budget_s),
        "grace_s": 120.0,
    }))
    return out


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


# -- grading ---------------------------------------------------------------------------------
def thresholds(scores: list[float]) -> dict:
    """Medal and median thresholds of a leaderboard (best first), per Kaggle's progression
    rules as MLE-bench applies them: the cut-offs depend on the number of teams."""
    n = len(scores)
    if n == 0:
        raise ValueError("an empty leaderboard has no thresholds")

    def at(position: int) -> float:
        return scores[min(max(position, 1), n) - 1]
    if n < 100:
        gold, silver, bronze = at(int(n * 0.1)), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 250:
        gold, silver, bronze = at(10), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 1000:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(50), at(100)
    else:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(int(n * 0.05)), at(int(n * 0.1))
    return {"gold": gold, "silver": silver, "bronze": bronze,
            "median": statistics.median(scores), "teams": n,
            "lower_is_better": scores[0] < scores[-1]}


def rank(score: float, th: dict) -> dict:
    """Which medal `score` earns against thresholds `th`, and whether it beats the median."""
    def reaches(limit):
        return score <= limit if th["lower_is_better"] else score >= limit
    medal = next((m for m in ("gold", "silver", "bronze") if reaches(th[m])), "none")
    above = score < th["median"] if th["lower_is_better"] else score > th["median"]
    return {"medal": medal, "above_median": above}


def _leaderboard_scores(path: Path) -> list[float] | None:
    if not path.is_file() or path.read_text(errors="replace").startswith("version https://git-lfs"):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    scores = []
    for row in rows:
        try:
            scores.append(float(row.get("score", "")))
        except ValueError:
            continue
    return scores or None


def _direction(scores: list[float] | None) -> str | None:
    if not scores or scores[0] == scores[-1]:
        return None
    return "minimize" if scores[0] < scores[-1] else "maximize"


def grade_main(grading_file: Path) -> int:
    """The protected grader's body: print the competition's score for the run's submission."""
    here = Path(grading_file).resolve().parent
    cfg = json.loads(Path(grading_file).read_text())
    private = os.environ.get("AUTORESEARCH_PRIVATE_DIR")
    if not private:
        print("error: AUTORESEARCH_PRIVATE_DIR is not set (run me as the task's evaluate step)")
        return 2
    submission = Path(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "artifacts") / SUBMISSION
    if not submission.is_file():
        print(f"error: submission not found: {submission}")
        return 2
    answers = Path(private) / cfg["answers"]
    try:
        score, how = _grade(submission, answers, cfg, here, Path(private))
    except metrics.InvalidSubmission as exc:
        print(f"error: invalid submission: {exc}")
        return 1
    if score is None or score != score:
        print("error: invalid submission: the competition's grader returned no score")
        return 1
    print(f"graded_by:         {how}")
    lb = _leaderboard_scores(here / COMPETITION_DIR / cfg["leaderboard"]) \
        if cfg.get("leaderboard") else None
    if lb:
        th = thresholds(lb)
        r = rank(score, th)
        print(f"leaderboard_teams: {th['teams']}")
        for key in ("gold", "silver", "bronze", "median"):
            print(f"{key}_threshold:{' ' * (8 - len(key))}{th[key]:.6g}")
        print(f"medal:             {r['medal']}")
        print(f"above_median:      {str(r['above_median']).lower()}")
    print(f"{cfg['metric']}: {score:.6f}")
    return 0


def _grade(submission: Path, answers: Path, cfg: dict, here: Path,
           private: Path) -> tuple[float | None, str]:
    """(score, which grader): mlebench itself, the competition's grade function, or built-in."""
    if private.parts[-2:] == ("prepared", "private") and not cfg.get("builtin"):
        report = _grade_with_mlebench(submission, cfg["id"], private.parents[2])
        if report is not None:
            return report, "mlebench.grade.grade_csv"
    fn, origin = (None, "") if cfg.get("builtin") else _grade_function(cfg, here)
    if fn is not None:
        import pandas as pd   # the competition graders' interface: (submission_df, answers_df)
        try:
            value = fn(pd.read_csv(submission), pd.read_csv(answers))
        except Exception as exc:  # their InvalidSubmissionError and friends
            raise metrics.InvalidSubmission(f"{type(exc).__name__}: {exc}") from None
        return (None if value is None else round(float(value), 5)), origin
    if metrics.canonical(cfg["grader"]) is None:
        raise metrics.InvalidSubmission(f"no grader available for '{cfg['grader']}' "
                                        f"(install mlebench)")
    sample = _read_rows(Path(os.environ.get("DATA_DIR", "")) / cfg["sample_submission"]) \
        if os.environ.get("DATA_DIR") else None
    truth, sub = _read_rows(answers), _read_rows(submission)
    if not sub:
        raise metrics.InvalidSubmission("the submission has no rows")
    columns = list((sample or truth)[0].keys())
    id_column = columns[0]
    targets = [c for c in columns[1:] if c in truth[0]]
    return metrics.score(cfg["grader"], truth, sub, id_column, targets), \
        f"built-in {metrics.canonical(cfg['grader'])}"


def _grade_with_mlebench(submission: Path, comp_id: str, data_dir: Path) -> float | None:
    try:
        from mlebench.grade import grade_csv
        from mlebench.registry import registry
    except ImportError:
        return None
    try:
        competition = registry.set_data_dir(data_dir).get_competition(comp_id)
    except Exception:
        return None
    return grade_csv(submission, competition).score


def _grade_function(cfg: dict, here: Path):
    """The competition's grade function: importable by name, else from the copied grade.py."""
    spec = cfg.get("grade_fn")
    if spec and ":" in spec:
        module, _, name = spec.partition(":")
        try:
            return getattr(importlib.import_module(module), name), spec
        except (ImportError, AttributeError):
            pass
    path = here / COMPETITION_DIR / "grade.py"
    if not path.is_file():
        return None, ""
    sys.path.insert(0, str(path.parent))
    try:
        loader = importlib.util.spec_from_file_location("competition_grade", path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        return getattr(module, "grade"), f"{COMPETITION_DIR}/grade.py"
    except (ImportError, AttributeError):   # it needs mlebench's helpers: fall back
        return None, ""
    finally:
        sys.path.remove(str(path.parent))


def _read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


GRADE_PY = '''\
"""Protected grader, written by `autoresearch task mlebench`: scores
$AUTORESEARCH_ARTIFACT_DIR/submission.csv against the answers in $AUTORESEARCH_PRIVATE_DIR
with the competition's own metric (see loop/adapters/mlebench.py)."""
import sys
from pathlib import Path

try:
    from loop.adapters.mlebench import grade_main
except ImportError:   # the engine is not installed: use the checkout that wrote this file
    sys.path.insert(0, {engine!r})
    from loop.adapters.mlebench import grade_main

sys.exit(grade_main(Path(__file__).resolve().parent / "grading.json"))
'''
