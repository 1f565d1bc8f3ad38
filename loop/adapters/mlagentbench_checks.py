"""What `autoresearch task mlagentbench` must tell the user before a night is spent:

- a score the editable code reports itself: eval.py's get_score compares the submission
  with nothing held out (vectorization: it reads the run time train.py wrote into
  submission.csv), so an edit can write any number;
- nothing for the offline `mutate` proposer to change (no UPPER_CASE numeric constant in
  the editable files);
- vectorization's train.py crashing under the numpy that will run it (numpy 2.4 made the
  assignment of a (1,1,1) array to one element an error; 2.3 only warned).
Reads files; the numpy probe runs the original forward on a 1x4x4x3 input, nothing more."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

# Calls a get_score may make and still compare against nothing: reading the submission,
# building its path, converting the number.
HARMLESS_CALLS = {"read_csv", "join", "float", "int", "str", "len", "print", "abs", "round"}
DATA_FILE = re.compile(r"\.(csv|tsv|json|jsonl|npy|npz|pt|pkl|txt|parquet)$")


def self_reported_score(eval_py: Path, submission: str = "submission.csv") -> str | None:
    """Why get_score's number is whatever the submission says, or None when it compares the
    submission with something (a held-out file, a dataset, an evaluator)."""
    try:
        tree = ast.parse(eval_py.read_text(errors="replace"))
    except SyntaxError:
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == "get_score"), None)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name not in HARMLESS_CALLS:
                return None
        if isinstance(node, ast.Name) and node.id == "__file__":
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and DATA_FILE.search(node.value) and node.value != submission:
            return None
    return (f"eval.py's get_score reads its number from {submission} and compares it with "
            f"nothing held out: the editable code writes that file, so an edit can report "
            f"any score")


def nothing_to_mutate(folder: Path, editable: list[str]) -> str | None:
    from loop.setup.search_space import constants
    files = {rel: (folder / rel).read_text(errors="replace") for rel in editable
             if rel.endswith(".py")}
    if constants(files):
        return None
    return (f"note: {', '.join(sorted(files))} define(s) no UPPER_CASE numeric constant: the "
            f"offline `mutate` proposer has nothing to change here (every iteration would be "
            f"bad_edit); run it with `--proposer llm`")


def is_vectorization(train_py: Path) -> bool:
    text = train_py.read_text(errors="replace") if train_py.is_file() else ""
    return bool(re.search(r"^class Conv2DLayer\b", text, re.M)) and "def forward" in text


PROBE = """\
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import train
np.random.seed(0)
layer = train.Conv2DLayer(3, 2, 3, 1, 0, 'relu')
out = layer.forward(np.random.randn(1, 4, 4, 3))
assert out.shape == (1, 2, 2, 2), out.shape
"""


def numpy_crash(folder: Path, python: str = sys.executable) -> str | None:
    """Why the original Conv2DLayer.forward fails under `python`'s numpy, or None."""
    out = subprocess.run([python, "-c", PROBE, str(folder)], capture_output=True, text=True,
                         timeout=120, cwd=folder)
    if out.returncode == 0:
        return None
    version = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"],
                             capture_output=True, text=True).stdout.strip() or "?"
    lines = out.stderr.strip().splitlines()
    last = lines[-1] if lines else f"exit {out.returncode}"
    where = next((m.group(1) for l in reversed(lines)
                  for m in [re.search(r'File ".*train\.py", line (\d+)', l)] if m), "?")
    if "setting an array element with a sequence" in last or "only length-1" in last \
            or "only 0-dimensional" in last:
        return (f"vectorization: train.py crashes under numpy {version} ({last}, train.py "
                f"line {where}: a (1,1,1) array assigned to one element, which numpy 2.4 "
                f"made an error and 2.3 only warned about). Run the loop in an environment "
                f"with numpy<2.4 (pip install 'numpy<2.4'), then make the task again")
    return f"vectorization: the original Conv2DLayer.forward fails under numpy {version}: {last}"
