"""Built-in metrics for graders that have none of their own: CSV rows in, one number out.

Pure Python (no pandas, numpy or sklearn needed). `DIRECTIONS` says which way is better."""
from __future__ import annotations

import math

DIRECTIONS = {"accuracy": "maximize", "auc": "maximize", "rmse": "minimize",
              "mse": "minimize", "mae": "minimize", "logloss": "minimize"}
ALIASES = {"roc_auc": "auc", "roc-auc": "auc", "log_loss": "logloss", "log-loss": "logloss",
           "mean_absolute_error": "mae", "mean_squared_error": "mse",
           "root_mean_squared_error": "rmse", "acc": "accuracy"}
EPS = 1e-15


class InvalidSubmission(ValueError):
    """The submission cannot be graded (missing ids, bad values): a one-line reason."""


def canonical(name: str) -> str | None:
    """The built-in metric a grader name refers to, or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in DIRECTIONS else None


def score(name: str, answers: list[dict], submission: list[dict], id_column: str,
          targets: list[str]) -> float:
    """Score `submission` rows against `answers` rows, matched by `id_column`."""
    metric = canonical(name)
    if metric is None:
        raise ValueError(f"no built-in metric '{name}' (have: {', '.join(DIRECTIONS)})")
    by_id = {}
    for row in submission:
        if id_column not in row:
            raise InvalidSubmission(f"submission has no '{id_column}' column")
        by_id[row[id_column]] = row
    missing = [a[id_column] for a in answers if a[id_column] not in by_id]
    if missing:
        raise InvalidSubmission(f"submission misses {len(missing)} of {len(answers)} ids "
                                f"(first: {missing[0]})")
    for t in targets:
        if t not in submission[0]:
            raise InvalidSubmission(f"submission has no '{t}' column")
    pairs = [(a[t], by_id[a[id_column]][t]) for a in answers for t in targets]
    if metric == "accuracy":
        return sum(_same(y, p) for y, p in pairs) / len(pairs)
    truth = [_number(y, "answer") for y, _ in pairs]
    pred = [_number(p, "prediction") for _, p in pairs]
    if metric in ("mse", "rmse"):
        mse = sum((y - p) ** 2 for y, p in zip(truth, pred)) / len(pairs)
        return mse if metric == "mse" else math.sqrt(mse)
    if metric == "mae":
        return sum(abs(y - p) for y, p in zip(truth, pred)) / len(pairs)
    if metric == "auc":
        return _auc(truth, pred)
    return -sum(y * math.log(min(max(p, EPS), 1 - EPS)) +
                (1 - y) * math.log(min(max(1 - p, EPS), 1 - EPS))
                for y, p in zip(truth, pred)) / len(pairs)


def _same(a: str, b: str) -> bool:
    a, b = str(a).strip(), str(b).strip()
    if a == b or a.lower() == b.lower():
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _number(value, what: str) -> float:
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return 1.0 if text.lower() == "true" else 0.0
    try:
        x = float(text)
    except ValueError:
        raise InvalidSubmission(f"{what} '{value}' is not a number") from None
    if not math.isfinite(x):
        raise InvalidSubmission(f"{what} '{value}' is not finite")
    return x


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
