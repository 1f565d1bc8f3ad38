"""A tabular repo of the evaluator shape (issue 37 item 7), plain numpy: `prepare.py`
(protected) makes the data and holds `evaluate(model)`, which predicts the validation rows
and prints `val_accuracy: ...`; `train.py` (editable) fits a logistic regression and calls
`prepare.evaluate(model)`. The validation labels live in a folder of their own, held out
from training; the graded task hands the model's predictions over (`grader: {kind:
predictions}`)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import git, run_cli

PREPARE = '''\
"""Data and evaluation (protected): 8 features, a noisy linear boundary."""
import os

import numpy as np

CACHE = os.environ.get("AUTORESEARCH_CACHE") or os.path.expanduser("~/.cache/autoresearch")
DATA_DIR = os.path.join(CACHE, "tabular")
LABELS_DIR = os.path.join(CACHE, "tabular_labels")
VAL_LABELS = os.path.join(LABELS_DIR, "val_labels.npy")


def make_data():
    rng = np.random.default_rng(0)
    w = rng.normal(size=8)
    x = rng.normal(size=(600, 8))
    y = (x @ w + 1.0 * rng.normal(size=600) > 0).astype(np.int64)
    os.makedirs(DATA_DIR, exist_ok=True)
    os.makedirs(LABELS_DIR, exist_ok=True)
    np.savez(os.path.join(DATA_DIR, "train.npz"), x=x[:400], y=y[:400])
    np.save(os.path.join(DATA_DIR, "val_features.npy"), x[400:])
    np.save(VAL_LABELS, y[400:])


def load_train():
    data = np.load(os.path.join(DATA_DIR, "train.npz"))
    return data["x"], data["y"]


def validation_features():
    return np.load(os.path.join(DATA_DIR, "val_features.npy"))


def accuracy(predicted, labels):
    return float(np.mean(np.asarray(predicted) == labels))


def evaluate(model):
    x = validation_features()
    labels = np.load(VAL_LABELS)
    acc = accuracy(model.predict(x), labels)
    print(f"val_accuracy: {acc:.6f}")
    return acc


if __name__ == "__main__":
    make_data()
'''

TRAIN = '''\
"""Logistic regression by gradient descent (editable)."""
import numpy as np

import prepare

LEARNING_RATE = 0.5
STEPS = 200


class Model:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def predict(self, x):
        return (x @ self.w + self.b > 0).astype(np.int64)


def fit(x, y):
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        w -= LEARNING_RATE * x.T @ (p - y) / len(y)
        b -= LEARNING_RATE * float(np.mean(p - y))
    return Model(w, b)


x, y = prepare.load_train()
model = fit(x, y)
val_accuracy = prepare.evaluate(model)
print(f"val_accuracy: {val_accuracy:.6f}")
'''

def make_tabular_repo(root: Path, cache: Path, files: dict[str, str] | None = None) -> Path:
    """The repo at `root` (prepare.py, train.py, or `files`) in one commit, its data made
    under `cache`; then `autoresearch init` writes its task, committed. Tests pass
    AUTORESEARCH_CACHE=cache on (init reads the data paths with it)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in {"prepare.py": PREPARE, "train.py": TRAIN, **(files or {})}.items():
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm",
        "a tabular repo")
    env = {**os.environ, "AUTORESEARCH_CACHE": str(cache)}
    subprocess.run([sys.executable, "prepare.py"], cwd=root, check=True, env=env)
    done = run_cli("init", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    git(root, "add", "task.yaml", "autoresearch.yaml")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm",
        "autoresearch task")
    return root
