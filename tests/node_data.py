"""A task whose grading needs data outside git of every kind (a private folder, a held_out
file its grader opens by name, a read_only folder training reads, an `inputs` link), for
the Ray and Slurm tests of what reaches a node (loop/run/backends/reach.py). Each test
makes its node not see the head's data for real: a Ray worker, or the engine itself, runs
in a bwrap mount namespace where a folder shows other contents."""
from __future__ import annotations

import sys
from pathlib import Path

from conftest import make_repo

XS = [0.5, 1.0, 2.0, 3.5]          # read_only: training reads them
SCALE = 2.0                        # inputs: an untracked file of the task folder
OFFSET = 0.25                      # private: the grader adds it
ANSWERS = [2 * x + 1 for x in XS]  # held_out: the grader opens it by name

TASK = """\
name: nodes
description: fit y = W*x + B; the data lives outside git
editable: [train.py]
protected: [evaluate.py]
run: python train.py
evaluate: python evaluate.py
artifact: predictions.txt
private: {private}
held_out: [{held_out}]
read_only: [{read_only}]
inputs: [data/scale.txt]
metric: {{name: error, direction: minimize}}
time_budget_s: 10
grace_s: 5
"""

TRAIN = """\
import os
W = 1.0
B = 0.0
ro = os.environ["AUTORESEARCH_READ_ONLY_0"]
with open(os.path.join(ro, "xs.txt")) as f:
    xs = [float(v) for v in f.read().split()]
with open("data/scale.txt") as f:
    scale = float(f.read())
out = os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "predictions.txt")
with open(out, "w") as f:
    f.write("\\n".join(str(scale * (W * x + B)) for x in xs) + "\\n")
print("training done")
"""

EVALUATE = """\
import os
with open({held_out!r}) as f:                  # by name, as karpathy's prepare.py does
    answers = [float(v) for v in f.read().split()]
with open(os.path.join(os.environ["AUTORESEARCH_PRIVATE_DIR"], "offset.txt")) as f:
    offset = float(f.read())
with open(os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "predictions.txt")) as f:
    preds = [float(v) for v in f.read().split()]
error = sum((p + offset - a) ** 2 for p, a in zip(preds, answers)) / len(answers)
print(f"error: {{error:.6f}}")
"""


def expected_error(w: float = 1.0, b: float = 0.0) -> float:
    return sum((SCALE * (w * x + b) + OFFSET - a) ** 2 for x, a in zip(XS, ANSWERS)) / len(XS)


def make_world(world: Path, name: str = "repo", read_only_extra: int = 0) -> Path:
    """The repo and its data under `world`; `read_only_extra`: bytes of a sparse file in
    the read_only folder (the size shipping would cost, none of it on disk)."""
    data = world / "data"
    (data / "ro").mkdir(parents=True, exist_ok=True)
    (data / "ro" / "xs.txt").write_text(" ".join(map(str, XS)) + "\n")
    if read_only_extra:
        with open(data / "ro" / "big.bin", "wb") as f:
            f.truncate(read_only_extra)
    (data / "answers.txt").write_text(" ".join(map(str, ANSWERS)) + "\n")
    (data / "private").mkdir(exist_ok=True)
    (data / "private" / "offset.txt").write_text(f"{OFFSET}\n")
    repo = make_repo(world / name, {
        "task.yaml": TASK.format(private=data / "private", held_out=data / "answers.txt",
                                 read_only=data / "ro"),
        "train.py": TRAIN, "evaluate.py": EVALUATE.format(held_out=str(data / "answers.txt")),
        ".gitignore": "data/\n"})
    (repo / "task" / "data").mkdir()
    (repo / "task" / "data" / "scale.txt").write_text(f"{SCALE}\n")
    return repo


def hidden_by(view: Path, folder: Path, argv: list[str]) -> list[str]:
    """`argv` run where `folder` shows what `view` holds (a bwrap mount namespace; the rest
    of the file system as it is)."""
    return ["bwrap", "--dev-bind", "/", "/", "--bind", str(view), str(folder), "--", *argv]


PYTHON = sys.executable
