"""The protected grader of an MLE-bench task, and the leaderboard arithmetic it prints.

`autoresearch task mlebench` copies this file and metrics.py into the task folder
(`grader/`), so a task graded today grades the same way in a clone on another machine,
without the engine's checkout. It scores $AUTORESEARCH_ARTIFACT_DIR/submission.csv with
the competition's own grade: `mlebench.grade.grade_csv` when mlebench is importable,
else the competition's grade function (config.yaml `grader.grade_fn`, or its grade.py
loaded from the copy), else the built-in metric named by `grader.name` (metrics.py).
With a leaderboard it also prints the medal thresholds and where the score lands,
computed as MLE-bench does (Kaggle's progression rules; see `thresholds`).

Stdlib only, apart from what the competition's own graders import (pandas, sklearn)."""
from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
from pathlib import Path

if __package__:
    from . import metrics
else:                       # loaded from a task folder's grader/, beside its metrics.py
    import metrics  # type: ignore[import-not-found,no-redef]  # found there at run time

SUBMISSION = "submission.csv"
COMPETITION_DIR = "competition"     # in the task folder: the registry entry's copy
LFS_POINTER = "version https://git-lfs"


# -- leaderboards --------------------------------------------------------------------------
def is_lfs_pointer(path: Path) -> bool:
    """A clone without git-lfs holds a small text stub in place of each CSV."""
    with open(path, "rb") as f:
        return f.read(len(LFS_POINTER)).decode("ascii", "replace") == LFS_POINTER


def read_leaderboard(path: Path) -> list[float | None] | None:
    """Scores, best first; a team with a blank score is None (it still counts as a team,
    as in MLE-bench). None when there is no usable leaderboard (missing, LFS pointer)."""
    if not path.is_file() or is_lfs_pointer(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "score" not in rows[0]:
        return None
    scores = []
    for row in rows:
        try:
            value = float(row["score"])
            scores.append(value if math.isfinite(value) else None)
        except (TypeError, ValueError):
            scores.append(None)
    return scores if any(s is not None for s in scores) else None


def direction(scores: list[float | None] | None) -> str | None:
    known = [s for s in scores or [] if s is not None]
    if not known or known[0] == known[-1]:
        return None
    return "minimize" if known[0] < known[-1] else "maximize"


def thresholds(scores: list[float | None]) -> dict:
    """Medal and median thresholds of a leaderboard (best first), per Kaggle's progression
    rules as MLE-bench applies them: the cut-offs depend on the number of teams, blank
    scores included; a cut-off that lands on a blank score is NaN (no medal), as there."""
    n = len(scores)
    known = [s for s in scores if s is not None]
    if not known:
        raise ValueError("an empty leaderboard has no thresholds")

    def at(position: int) -> float:
        value = scores[min(max(position, 1), n) - 1]
        return math.nan if value is None else value
    if n < 100:
        gold, silver, bronze = at(int(n * 0.1)), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 250:
        gold, silver, bronze = at(10), at(int(n * 0.2)), at(int(n * 0.4))
    elif n < 1000:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(50), at(100)
    else:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(int(n * 0.05)), at(int(n * 0.1))
    return {"gold": gold, "silver": silver, "bronze": bronze,
            "median": statistics.median(known), "teams": n,
            "lower_is_better": direction(scores) == "minimize"}


def rank(score: float, th: dict) -> dict:
    """Which medal `score` earns against thresholds `th`, and whether it beats the median."""
    def reaches(limit):
        return score <= limit if th["lower_is_better"] else score >= limit
    medal = next((m for m in ("gold", "silver", "bronze") if reaches(th[m])), "none")
    above = score < th["median"] if th["lower_is_better"] else score > th["median"]
    return {"medal": medal, "above_median": above}


# -- grading -------------------------------------------------------------------------------
def grade_main(grading_file: Path) -> int:
    """The protected grader's body: print the competition's score for the run's submission.
    A refused submission ends with one `error: invalid submission: ...` line, the reason
    the loop records."""
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
    lb = read_leaderboard(here / COMPETITION_DIR / cfg["leaderboard"]) \
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
    columns = list((sample or truth)[0].keys())
    id_column = columns[0]
    targets = [c for c in columns[1:] if c in truth[0]]
    value = metrics.score(cfg["grader"], truth, sub, id_column, targets)
    return round(value, 5), f"built-in {metrics.canonical(cfg['grader'])}"


def _grade_with_mlebench(submission: Path, comp_id: str, data_dir: Path) -> float | None:
    """mlebench's grade_csv, or None to grade another way: mlebench is not installed, the
    submission is invalid (grade_csv reports no score; the grade function below says why),
    or grade_csv itself failed (a leaderboard left as a Git LFS pointer, say)."""
    try:
        from mlebench.grade import grade_csv
        from mlebench.registry import registry
    except ImportError:
        return None
    try:
        competition = registry.set_data_dir(data_dir).get_competition(comp_id)
        return grade_csv(submission, competition).score
    except Exception as exc:
        print(f"note: mlebench.grade.grade_csv failed ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''}); grading with the "
              f"competition's grade function")
        return None


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
        spec = importlib.util.spec_from_file_location("competition_grade", path)
        if spec is None or spec.loader is None:
            return None, ""
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.grade, f"{COMPETITION_DIR}/grade.py"
    except (ImportError, AttributeError):   # it needs mlebench's helpers: fall back
        return None, ""
    finally:
        sys.path.remove(str(path.parent))


def _read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
