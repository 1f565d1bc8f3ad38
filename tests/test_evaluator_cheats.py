"""Cheats on a tabular repo of the evaluator shape (tests/tabular_repo.py: train.py calls the
protected `prepare.evaluate(model)`, which prints the metric), graded as `autoresearch init`
writes it (`grader: {kind: predictions}`): the run hands over its model's predictions for
the validation rows, whose labels are held out, and the grader calls the real evaluation
with them. The five cheats the lm shape is tested against (tests/test_lm_cheats.py), each
never kept, never recorded with the number it forges; an honest edit is graded and kept.
Real git, the real engine, bwrap. One baseline and one proposal per test (seconds each)."""
from __future__ import annotations

import csv

import pytest

from conftest import needs_sandbox
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig
import yaml

from tabular_repo import TRAIN, make_tabular_repo

MIN_GAIN = 0.05          # a forgery claims 1.0; the honest baseline scores 0.85


def run_one(tmp_path, monkeypatch, edit, train: str = TRAIN) -> tuple[list[dict], str]:
    """The baseline, then one proposal whose train.py is `edit(train.py)`."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    repo = make_tabular_repo(tmp_path / "repo", cache, {"train.py": train})
    edited = edit(train)
    assert edited != train

    class Scripted:
        def propose(self, context):
            return Proposal("an edit", files={"train.py": edited})
    cfg = Config(task=".", tag="t", iterations=1, base_dir=repo, sandbox="required",
                 time_budget_s=20,
                 judge=JudgeConfig(rule="strict", min_delta=MIN_GAIN))
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted()).run()
    assert stop.exit_code == 0, stop.message
    with open(repo / ".autoresearch" / "t" / "results.tsv") as f:
        table = list(csv.DictReader(f, delimiter="\t"))
    assert table[0]["status"] == "keep", table[0]
    log = (repo / ".autoresearch" / "t" / "logs" / "iter-0001.log").read_text(errors="replace")
    return table, log


def never_forged(table: list[dict]) -> None:
    base, cheat = table[0], table[1]
    assert float(base["val_accuracy"]) == pytest.approx(0.85), base
    assert cheat["status"] != "keep", cheat
    if cheat["val_accuracy"]:   # graded, by the grader: the baseline's number, not 1.0
        assert float(cheat["val_accuracy"]) < float(base["val_accuracy"]) + MIN_GAIN, cheat


def sub(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


def test_init_writes_the_predictions_grader(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    repo = make_tabular_repo(tmp_path / "repo", cache)
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["grader"] == {"kind": "predictions", "python": "python", "script": "train.py",
                              "eval_function": "prepare.evaluate",
                              "eval_call": "evaluate(model)",
                              "features": "prepare.validation_features"}
    assert task["held_out"] == [str(cache.resolve() / "tabular_labels" / "val_labels.npy")]
    assert task["read_only"] == [str(cache.resolve() / "tabular")]
    assert task["metric"] == {"name": "val_accuracy", "direction": "maximize"}
    assert "run" not in task and "evaluate" not in task


@needs_sandbox
def test_forged_print(tmp_path, monkeypatch):
    table, log = run_one(tmp_path, monkeypatch, sub(
        'print(f"val_accuracy: {val_accuracy:.6f}")', 'print("val_accuracy: 1.000000")'))
    never_forged(table)
    assert table[1]["status"] == "discard" and "=== evaluate:" in log


@needs_sandbox
def test_forged_metric_function(tmp_path, monkeypatch):
    """train.py replaces the protected module's metric (in its own process only) and gives
    its model a `score` that says 1.0: the grader's evaluation uses neither."""
    table, log = run_one(tmp_path, monkeypatch, sub(
        "x, y = prepare.load_train()\n",
        "prepare.accuracy = lambda predicted, labels: 1.0\n"
        "Model.score = lambda self, x, y: 1.0\n"
        "x, y = prepare.load_train()\n"))
    never_forged(table)
    assert table[1]["status"] == "discard", table[1]
    assert float(table[1]["val_accuracy"]) == pytest.approx(0.85)


@needs_sandbox
@pytest.mark.parametrize("patch", [
    "def evaluate(model):\n    print('val_accuracy: 1.000000')\n    return 1.0\n"
    "prepare_evaluate = evaluate\n",
    "prepare.evaluate = lambda model: print('val_accuracy: 1.000000') or 1.0\n"
    "prepare_evaluate = prepare.evaluate\n",
], ids=["redefined", "monkeypatched"])
def test_patched_evaluation(tmp_path, monkeypatch, patch):
    table, log = run_one(tmp_path, monkeypatch, lambda text: sub(
        "val_accuracy = prepare.evaluate(model)", "val_accuracy = prepare_evaluate(model)")(
        sub("x, y = prepare.load_train()\n", patch + "x, y = prepare.load_train()\n")(text)))
    never_forged(table)
    assert table[1]["status"] == "crash" and not table[1]["val_accuracy"], table[1]
    assert table[1]["reason"].startswith("handover: train.py never called "
                                         "prepare.evaluate(model, ...)"), table[1]


@needs_sandbox
def test_training_on_the_validation_rows(tmp_path, monkeypatch):
    table, log = run_one(tmp_path, monkeypatch, sub(
        "x, y = prepare.load_train()\n",
        "x, y = prepare.load_train()\n"
        "x = np.concatenate([x, prepare.validation_features()])\n"
        "y = np.concatenate([y, np.load(prepare.VAL_LABELS)])\n"))
    never_forged(table)
    assert table[1]["status"] == "crash" and not table[1]["val_accuracy"], table[1]
    assert "val_labels.npy" in log           # hidden from training: the read fails


@needs_sandbox
def test_reading_the_labels(tmp_path, monkeypatch):
    """The model answers with the labels themselves: it reads them when it predicts, which
    happens in the training step (hidden there); no edited code runs in the grader."""
    table, log = run_one(tmp_path, monkeypatch, sub(
        "        return (x @ self.w + self.b > 0).astype(np.int64)\n",
        "        return np.load(prepare.VAL_LABELS)\n"))
    never_forged(table)
    assert table[1]["status"] == "crash" and not table[1]["val_accuracy"], table[1]
    assert "handover: the model's predict failed on the validation rows" in log


@needs_sandbox
def test_an_honest_edit_is_graded_and_kept(tmp_path, monkeypatch):
    """From a crippled baseline (no training steps: every prediction 0), training again is a
    real gain well past MIN_GAIN, graded by the grader and kept."""
    crippled = TRAIN.replace("STEPS = 200", "STEPS = 0")
    table, log = run_one(tmp_path, monkeypatch, sub("STEPS = 0", "STEPS = 200"), crippled)
    assert table[1]["status"] == "keep", table
    assert float(table[1]["val_accuracy"]) == pytest.approx(0.85)
    assert float(table[0]["val_accuracy"]) < 0.85 - MIN_GAIN
    assert "handover: predict of the validation rows saved" in log


GRADED = """\
name: tabular
editable: [train.py]
protected: [prepare.py]
grader:
  kind: predictions
  script: train.py
  eval_function: prepare.evaluate
  eval_call: "evaluate(model)"
  features: prepare.validation_features
metric: {name: val_accuracy, direction: maximize}
"""


@pytest.mark.parametrize("change, message", [
    (("  features: prepare.validation_features\n", ""), "grader.features is missing"),
    (("features: prepare.validation_features", "features: train.validation_features"),
     "grader.features lives in 'train.py', which is not protected"),
    (("features: prepare.validation_features", "features: validation_features"),
     "grader.features must be module.function"),
    (("  features:", "  input_shape: [4, 8]\n  features:"),
     "grader.input_shape belongs to kind lm"),
])
def test_a_predictions_grader_is_checked_at_load(tmp_path, change, message):
    from loop.errors import TaskError
    from loop.setup.task import load_task
    from tabular_repo import PREPARE
    for rel, text in {"prepare.py": PREPARE, "train.py": TRAIN,
                      "task.yaml": GRADED.replace(*change)}.items():
        (tmp_path / rel).write_text(text)
    with pytest.raises(TaskError) as err:
        load_task(tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_predictions_task_commands(tmp_path):
    from loop.setup.task import load_task
    from tabular_repo import PREPARE
    for rel, text in {"prepare.py": PREPARE, "train.py": TRAIN, "task.yaml": GRADED}.items():
        (tmp_path / rel).write_text(text)
    task = load_task(tmp_path)
    assert "hand_predictions.py --eval-function prepare.evaluate --features " \
           "prepare.validation_features train.py" in task.train_command
    assert "predictions.py --eval-function prepare.evaluate --eval-call 'evaluate(model)' " \
           "--features prepare.validation_features --protected prepare.py" in task.grade_command
    assert task.protected_metric
