"""Built-in metrics for graders that have none of their own: CSV rows in, one number out.

Pure Python (no pandas, numpy or sklearn needed), and made to agree with MLE-bench's own
graders on what is valid and on the score (docs/benchmarks.md has the parity table):
values are typed as pandas reads a CSV column (all True/False -> booleans, all numbers ->
numbers, else text), so a 0/1 prediction of a True/False answer counts as MLE-bench
counts it; the submission must hold exactly the answers' ids, one row each; a blank
prediction, a text label for a number, or a probability outside [0, 1] is refused.
`DIRECTIONS` says which way is better."""
from __future__ import annotations

import math
import sys

DIRECTIONS = {"accuracy": "maximize", "auc": "maximize", "rmse": "minimize",
              "mse": "minimize", "mae": "minimize", "logloss": "minimize"}
ALIASES = {"roc_auc": "auc", "roc-auc": "auc", "auc-roc": "auc", "log_loss": "logloss",
           "log-loss": "logloss", "mean_absolute_error": "mae", "mean-absolute-error": "mae",
           "mean_squared_error": "mse", "root_mean_squared_error": "rmse",
           "root-mean-squared-error": "rmse", "acc": "accuracy",
           "multi-class-classification-accuracy": "accuracy"}
EPS = sys.float_info.epsilon    # sklearn's log_loss clips to the dtype's machine epsilon
TRUE, FALSE = {"True", "TRUE", "true"}, {"False", "FALSE", "false"}   # pandas' defaults
MISSING = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
           "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}


class InvalidSubmission(ValueError):
    """The submission cannot be graded (missing ids, bad values): a one-line reason."""


def canonical(name: str) -> str | None:
    """The built-in metric a grader name refers to, or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in DIRECTIONS else None


def typed(values: list[str]) -> tuple[str, list]:
    """(kind, values) of a CSV column as pandas reads it: 'bool', 'number' or 'text';
    a blank cell (or one pandas reads as missing: NA, nan, null, ...) is None."""
    cells = [None if v is None or v in MISSING else v for v in values]
    filled = [v for v in cells if v is not None]
    if filled and all(v in TRUE or v in FALSE for v in filled):
        return "bool", [None if v is None else v in TRUE for v in cells]
    try:
        return "number", [None if v is None else float(v) for v in cells]
    except ValueError:
        return "text", cells


def score(name: str, answers: list[dict], submission: list[dict], id_column: str,
          targets: list[str]) -> float:
    """Score `submission` rows against `answers` rows, matched by `id_column`."""
    metric = canonical(name)
    if metric is None:
        raise ValueError(f"no built-in metric '{name}' (have: {', '.join(DIRECTIONS)})")
    header = submission[0].keys() if submission else ()
    for column in (id_column, *targets):
        if column not in header:
            raise InvalidSubmission(f"Submission must have a `{column}` column")
    if len(submission) != len(answers):
        raise InvalidSubmission(f"Submission has {len(submission)} rows, the answers "
                                f"{len(answers)}: one row per test id is required")
    sub_ids, true_ids = _ids(submission, id_column), _ids(answers, id_column)
    if sorted(sub_ids) != sorted(true_ids):
        raise InvalidSubmission(f"Submission and answers `{id_column}`s do not match "
                                f"({len(set(true_ids) - set(sub_ids))} answer ids missing)")
    order = {key: i for i, key in enumerate(sub_ids)}
    truth, pred = [], []
    for t in targets:
        t_kind, t_vals = typed([a[t] for a in answers])
        p_kind, p_vals = typed([s[t] for s in submission])
        for key, y in zip(true_ids, t_vals):
            p = p_vals[order[key]]
            if p is None:
                raise InvalidSubmission(f"blank `{t}` for {id_column} {key[1]}")
            truth.append(y)
            pred.append(p)
        if metric == "accuracy" and "text" in (t_kind, p_kind) and t_kind != p_kind:
            raise InvalidSubmission(f"`{t}` mixes label types ({p_kind} predictions of "
                                    f"{t_kind} answers)")
        if metric != "accuracy" and p_kind == "text":
            raise InvalidSubmission(f"`{t}` must be numeric")
    if metric == "accuracy":
        return sum(y == p for y, p in zip(truth, pred)) / len(pred)
    truth, pred = [float(y) for y in truth], [float(p) for p in pred]
    if any(not math.isfinite(p) for p in pred):
        raise InvalidSubmission("predictions must be finite numbers")
    if metric in ("auc", "logloss") and not all(0.0 <= p <= 1.0 for p in pred):
        raise InvalidSubmission("predictions must be probabilities between 0 and 1 inclusive")
    if metric in ("mse", "rmse"):
        mse = sum((y - p) ** 2 for y, p in zip(truth, pred)) / len(pred)
        return mse if metric == "mse" else math.sqrt(mse)
    if metric == "mae":
        return sum(abs(y - p) for y, p in zip(truth, pred)) / len(pred)
    if metric == "auc":
        return _auc(truth, pred)
    if len(set(truth)) < 2:
        raise InvalidSubmission("log loss needs both classes among the answers")
    clip = [min(max(p, EPS), 1 - EPS) for p in pred]
    return -sum(y * math.log(p) + (1 - y) * math.log(1 - p)
                for y, p in zip(truth, clip)) / len(pred)


def _ids(rows: list[dict], id_column: str) -> list[tuple]:
    """Ids typed as pandas types them, tagged with their kind (text never equals a number)."""
    kind, values = typed([r[id_column] for r in rows])
    if None in values:
        raise InvalidSubmission(f"a row has a blank `{id_column}`")
    return [(kind, v) for v in values]


def _auc(truth: list[float], pred: list[float]) -> float:
    """Binary ROC AUC as the Mann-Whitney statistic (ties count one half)."""
    pos = sum(1 for y in truth if y > 0.5)
    neg = len(truth) - pos
    if pos == 0 or neg == 0:
        raise InvalidSubmission("AUC needs both classes among the answers")
    order = sorted(range(len(pred)), key=lambda i: pred[i])
    ranks = [0.0] * len(pred)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and pred[order[j + 1]] == pred[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, truth) if y > 0.5)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
