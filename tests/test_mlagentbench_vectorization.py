"""MLAgentBench's vectorization task shape (env/train.py with a loop-heavy Conv2DLayer whose
run time train.py writes into submission.csv; scripts/eval.py reading that number back):
flagged unprotected when made, refused with a clear line where numpy crashes it, and graded
by the protected timed grader on request. Our own small files of the same shape."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from loop.adapters import mlagentbench
from loop.adapters.mlagentbench_checks import self_reported_score
from loop.errors import UsageError
from loop.advice.check_task import check_task
from loop.setup.task import load_task

CONV = '''\
import csv
import time
import numpy as np


class Conv2DLayer:
    def __init__(self, input_channels, num_filters, kernel_size, stride, padding, activation="relu"):
        self.kernel_matrices = np.random.randn(kernel_size, kernel_size, input_channels, num_filters)
        self.biases = np.random.randn(1, 1, 1, num_filters)
        self.stride, self.padding, self.activation = stride, padding, activation

    def forward(self, x):
        p, k, s = self.padding, self.kernel_matrices.shape[0], self.stride
        x = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
        n, h, w, _ = x.shape
        f = self.kernel_matrices.shape[3]
        out = np.zeros([n, (h - k) // s + 1, (w - k) // s + 1, f])
        for i in range(n):
            for a in range(out.shape[1]):
                for b in range(out.shape[2]):
                    for c in range(f):
                        win = x[i, a * s:a * s + k, b * s:b * s + k, :]
                        res = np.sum(win * self.kernel_matrices[:, :, :, c]) + self.biases[:, :, :, c]
                        out[i, a, b, c] = SCALAR
        return out * (out > 0) if self.activation == "relu" else out


if __name__ == "__main__":
    start = time.time()
    Conv2DLayer(3, 8, 3, 2, 2).forward(np.random.randn(2, 16, 16, 3))
    with open("submission.csv", "a+", newline="") as f:
        csv.writer(f, delimiter=";").writerow([time.time() - start])
'''
SELF_REPORTED_EVAL = '''\
import os
import pandas as pd

def get_score(submission_path="../env"):
    try:
        submission = pd.read_csv(os.path.join(submission_path, "submission.csv"), delimiter=";")
        return float(submission.columns[0])
    except:
        return 1e10
'''
HELD_OUT_EVAL = '''\
import os
import pandas as pd

def get_score(submission_folder="../env"):
    submission = pd.read_csv(os.path.join(submission_folder, "submission.csv"))
    answers = pd.read_csv(os.path.join(os.path.dirname(__file__), "answer.csv"))
    return float(abs(submission["y"] - answers["y"]).mean())
'''
DATASET_EVAL = '''\
import os
import pandas as pd
from datasets import load_dataset

def get_score(submission_folder="../env"):
    submission = pd.read_csv(os.path.join(submission_folder, "submission.csv"))
    test = load_dataset("imdb")["test"]
    return sum(int(submission.loc[i].argmax() == d["label"]) for i, d in enumerate(test)) / len(test)
'''
VECTORIZED = '''\
    def forward(self, x):
        p, k, s = self.padding, self.kernel_matrices.shape[0], self.stride
        x = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
        win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))[:, ::s, ::s]
        out = np.einsum("nabcij,ijcf->nabf", win, self.kernel_matrices) + self.biases
        return out * (out > 0) if self.activation == "relu" else out
'''


def make_vectorization(root: Path, scalar="res.item()") -> Path:
    task = root / "MLAgentBench" / "benchmarks" / "vectorization"
    (task / "env").mkdir(parents=True)
    (task / "scripts").mkdir()
    (task / "env" / "train.py").write_text(CONV.replace("SCALAR", scalar))
    (task / "scripts" / "eval.py").write_text(SELF_REPORTED_EVAL)
    (task / "scripts" / "research_problem.txt").write_text(
        "Make the forward function of train.py faster with numpy vectorisation; store the "
        "run time in submission.csv as train.py does.")
    return task


def test_a_score_read_back_from_the_submission_is_told_apart_from_a_compared_one(tmp_path):
    for name, text, expected in (("self.py", SELF_REPORTED_EVAL, True),
                                 ("held.py", HELD_OUT_EVAL, False),
                                 ("data.py", DATASET_EVAL, False)):
        (tmp_path / name).write_text(text)
        assert bool(self_reported_score(tmp_path / name)) is expected, name


def test_vectorization_is_made_with_its_metric_marked_unprotected(tmp_path, monkeypatch):
    bench = make_vectorization(tmp_path)
    monkeypatch.setenv(mlagentbench.ROOT_VAR, str(bench.parent))
    heard = []
    out = mlagentbench.make_task(bench, tmp_path / "t", direction="minimize",
                                 warn=heard.append)
    said = "\n".join(heard)
    assert "unprotected metric" in said and "--timed-grader" in said
    assert "nothing to change" in said and "--proposer llm" in said      # one line each
    assert len([h for h in heard if "mutate" in h]) == 1
    task = load_task(out)
    assert "compares it with nothing held out" in task.unprotected


@pytest.mark.skipif(tuple(map(int, np.__version__.split(".")[:2])) < (2, 4),
                    reason="numpy < 2.4 only warns")
def test_the_numpy_crash_is_named_when_the_task_is_made(tmp_path):
    bench = make_vectorization(tmp_path, scalar="res")       # a (1,1,1) array into one slot
    with pytest.raises(UsageError) as err:
        mlagentbench.make_task(bench, tmp_path / "t", direction="minimize", warn=print)
    text = str(err.value)
    assert f"numpy {np.__version__}" in text and "numpy<2.4" in text and "line 24" in text
    assert "\n" not in text and not (tmp_path / "t").exists()


def test_the_timed_grader_times_the_edited_forward_and_checks_its_output(tmp_path):
    bench = make_vectorization(tmp_path)
    out = mlagentbench.make_task(bench, tmp_path / "t", direction="minimize",
                                 warn=lambda line: None, timed_grader=True)
    spec = yaml.safe_load((out / "task.yaml").read_text())
    assert spec["metric"] == {"name": "forward_s", "direction": "minimize"}
    assert "unprotected" not in spec and "reference_train.py" in spec["protected"]
    timing = yaml.safe_load((out / "timing.yaml").read_text())
    (out / "timing.yaml").write_text(yaml.safe_dump({**timing, "input_shape": [2, 12, 12, 3],
                                                     "repeats": 1}))
    _, base = check_task(out, out=print)
    assert base.status == "ok" and base.metric > 0

    train = (out / "train.py").read_text()
    start, end = train.index("    def forward"), train.index("\n\nif __name__")
    (out / "train.py").write_text(train[:start] + VECTORIZED + train[end:])
    _, fast = check_task(out, out=print)
    assert fast.status == "ok" and fast.metric < base.metric

    lines = []
    (out / "train.py").write_text(train[:start] + VECTORIZED.replace(
        "+ self.biases", "+ 2 * self.biases") + train[end:] + "\nopen('submission.csv', 'w')"
        ".write('0.000001')\n")
    _, wrong = check_task(out, out=lines.append)
    assert wrong.status != "ok" and wrong.metric is None
    assert "differs from the original" in "\n".join(lines)
