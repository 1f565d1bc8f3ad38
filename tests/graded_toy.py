"""A seconds-long task graded the protected way: the run writes predictions to the artifact
dir, a protected grader scores them against held-out answers in a private folder."""
from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import make_repo

INPUTS = [0.5, 1.0, 2.0, 3.5, 5.0]
ANSWERS = [2 * x + 1 for x in INPUTS]          # held out: only the grader sees them

TASK = """\
name: graded
description: fit y = W*x + B to hidden answers; only train.py may change
editable: [train.py]
protected: [evaluate.py, data.py]
run: python train.py
evaluate: python evaluate.py
artifact: predictions.txt
private: {private}
metric: {{name: error, direction: minimize}}
time_budget_s: 10
grace_s: 5
"""

DATA = f"INPUTS = {INPUTS!r}\n"

TRAIN = """\
import os
import data
W = 1.0
B = 0.0
out = os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "predictions.txt")
with open(out, "w") as f:
    f.write("\\n".join(str(W * x + B) for x in data.INPUTS) + "\\n")
print("training done")
"""

EVALUATE = """\
import os
private = os.environ["AUTORESEARCH_PRIVATE_DIR"]
with open(os.path.join(private, "answers.txt")) as f:
    answers = [float(line) for line in f if line.strip()]
with open(os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "predictions.txt")) as f:
    preds = [float(line) for line in f if line.strip()]
if len(preds) != len(answers):
    raise SystemExit(f"expected {len(answers)} predictions, got {len(preds)}")
error = sum((p - a) ** 2 for p, a in zip(preds, answers)) / len(answers)
print(f"error: {error:.6f}")
"""


def baseline_error(w: float = 1.0, b: float = 0.0) -> float:
    return sum((w * x + b - a) ** 2 for x, a in zip(INPUTS, ANSWERS)) / len(INPUTS)


def make_private(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answers.txt").write_text("".join(f"{a}\n" for a in ANSWERS))
    return folder


def make_graded_repo(tmp_path: Path, private_ref: str | None = None,
                     train: str = TRAIN) -> tuple[Path, Path]:
    """(repo, private folder). `private_ref` is what task.yaml says (default: the absolute
    path; e.g. '${TOY_PRIVATE}' to keep the path out of the task folder)."""
    private = make_private(tmp_path / "held-out")
    repo = make_repo(tmp_path / "repo", {
        "task.yaml": TASK.format(private=private_ref or str(private)),
        "train.py": textwrap.dedent(train), "evaluate.py": EVALUATE, "data.py": DATA})
    return repo, private
