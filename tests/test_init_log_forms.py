"""`autoresearch init` finds the metric a researcher would name in every common log form
(issue 29 item 4): `| valid loss 7.28 |` from str.format, `train loss: X test loss: Y`,
%-formatting, logging calls; a sentence's words are never a metric name; a held-out split
called "test" is offered by name, never a training loss; the pattern written reads only the
number it names. Real git repos in tmp folders, the real CLI, and check-task running the
script so the pattern is proved against what it really prints."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from log_forms_repos import LOGGING, PERCENT, STEP_TEST, TOP_SCORE, WORD_LM
from helpers import (checked, commit, init, init_on_the_test_split, plain_repo, read_metric,
                     refused)
from loop.script.source import Script
from loop.init.shapes.base import from_values
from loop.setup.task import load_task


def printed(repo: Path, script: str = "train.py") -> str:
    """What the script prints, stdout and stderr (a logging call's), as a run records it."""
    done = subprocess.run([sys.executable, script], cwd=repo, capture_output=True, text=True,
                          check=True)
    return done.stdout + done.stderr


def last(text: str, regex: str) -> float:
    return float(re.findall(regex, text)[-1])


# -- pytorch/examples word_language_model: `| end of epoch 1 | ... | valid loss 7.28 | ...` ----
def test_word_language_model_end_of_epoch_line_gives_the_validation_loss(tmp_path):
    repo = plain_repo(tmp_path / "wlm", {"main.py": WORD_LM})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"metric: +valid_loss \(guessed: the validation loss, printed by main.py "
                     r"\(the perplexity printed beside it is its exp\)", done.stdout)
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("valid_loss", "minimize")
    out = printed(repo, "main.py")
    want = last(out, r"valid loss +([\d.]+)")
    assert read_metric(out, task.metric.pattern) == want       # not the test loss after it
    assert checked(repo) == pytest.approx(want, abs=0.02)


def test_metric_valid_loss_finds_the_label_valid_loss(tmp_path):
    repo = plain_repo(tmp_path / "wlm", {"main.py": WORD_LM})
    done = init(repo, "--metric", "valid_loss")
    assert done.returncode == 0, done.stderr
    out = printed(repo, "main.py")
    assert read_metric(out, load_task(repo).metric.pattern) == last(out, r"valid loss +([\d.]+)")
    assert init(repo, "--metric", "valid_ppl", "--force").returncode == 0
    assert read_metric(out, load_task(repo).metric.pattern) == last(out, r"valid ppl +([\d.]+)")


# -- `step N train loss: X test loss: Y`: "test" the only held-out split ---------------------------
def test_a_test_split_is_chosen_never_the_training_loss(tmp_path):
    repo = plain_repo(tmp_path / "steps", {"train.py": STEP_TEST})
    init_on_the_test_split(repo, "test_loss")
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("test_loss", "minimize")
    out = printed(repo)
    want = last(out, r"test loss: ([\d.]+)")
    assert read_metric(out, task.metric.pattern) == want
    assert checked(repo) == pytest.approx(want, abs=1e-3)


def test_a_bare_loss_pattern_reads_neither_the_train_nor_the_test_loss(tmp_path):
    """Accepting the per-step loss anyway (`--metric loss`) reads the minibatch loss lines,
    even when the last line printed is `train loss: X test loss: Y`."""
    repo = plain_repo(tmp_path / "steps", {"train.py": STEP_TEST})
    assert init(repo, "--metric", "loss").returncode == 0
    out = printed(repo)
    assert out.splitlines()[-1].startswith("step 60 train loss")
    assert read_metric(out, load_task(repo).metric.pattern) == last(out, r"\d loss ([\d.]+)")


# -- a sentence with a number in it ------------------------------------------------------------
def test_words_of_a_sentence_are_not_a_metric_name(tmp_path):
    repo = plain_repo(tmp_path / "top", {"train.py": TOP_SCORE})
    done = init_on_the_test_split(repo, "test_acc")          # never `score_of`
    assert "score_of" not in done.stdout
    assert "no number named `score_of`" in refused(repo, "--metric", "score_of", "--force")
    out = printed(repo)
    assert checked(repo) == last(out, r"test acc ([\d.]+)")


# -- %-formatting, the split a loop's word -----------------------------------------------------
def test_percent_formatting_with_the_split_from_a_loop(tmp_path):
    repo = plain_repo(tmp_path / "pct", {"train.py": PERCENT})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert load_task(repo).metric.name == "val_loss"
    out = printed(repo)
    assert checked(repo) == last(out, r"val loss ([\d.]+)")


def test_a_metric_its_pattern_cannot_read_alone_is_refused(tmp_path):
    """`acc` follows both the train and the val loss on the same kind of line: no pattern of
    its label reads one of them, so init says so rather than write one that reads both."""
    repo = plain_repo(tmp_path / "pct", {"train.py": PERCENT})
    line = refused(repo, "--metric", "acc")
    assert "init: no pattern reads only acc from what train.py prints: it would read 2 " \
        "numbers of the lines printed, not one; pass --metric acc --metric-pattern REGEX" in line


def test_a_split_printed_from_a_variable_is_refused_with_the_way_out(tmp_path):
    """`f"{phase} loss {x}"` over `phases` read at run time: which split a line is, only the
    run knows; the pattern of `loss` would read whichever is printed last."""
    train = ("import os\nLR = 0.1\nphases = os.environ.get('PHASES', 'train val').split()\n"
             "for phase in phases:\n    loss = LR * (2 if phase == 'val' else 1)\n"
             "    print(f'{phase} loss {loss:.4f} acc {1 - loss:.4f}')\n")
    repo = plain_repo(tmp_path / "var", {"train.py": train})
    line = refused(repo, "--metric", "loss")
    assert "no pattern reads only loss from what train.py prints: its split is printed " \
        "from `phase`, known only when the script runs; pass --metric loss --metric-pattern " \
        "REGEX" in line
    assert "acc is printed inside a log line that names no split" in refused(repo)
    assert "its split is printed from `phase`" in refused(repo, "--metric", "acc")


def test_a_bare_accuracy_in_a_log_line_is_not_taken_for_the_validation_one(tmp_path):
    train = ("LR = 0.1\nfor epoch in range(3):\n    loss = LR / (epoch + 1)\n"
             "    print(f'epoch {epoch}: loss {loss:.4f} acc {1 - loss:.4f}')\n")
    repo = plain_repo(tmp_path / "bare", {"train.py": train})
    assert refused(repo) == (
        "autoresearch: error: init: train.py: no validation metric is printed: acc is printed "
        "inside a "
        "log line that names no split (it may be the training one); if it is measured on "
        "held-out data, pass --metric acc")
    assert init(repo, "--metric", "acc").returncode == 0
    out = printed(repo)
    assert read_metric(out, load_task(repo).metric.pattern) == last(out, r"acc ([\d.]+)")


# -- logging calls -----------------------------------------------------------------------------
def test_logging_calls_with_their_own_arguments(tmp_path):
    repo = plain_repo(tmp_path / "log", {"train.py": LOGGING})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("eval_f1", "maximize")
    out = printed(repo)                           # logging writes to stderr: the run reads it
    assert checked(repo) == last(out, r"eval_f1=([\d.]+)")


# -- the forms, read from code (no run) --------------------------------------------------------
@pytest.mark.parametrize("code, labels", [
    ("print(f'step {i}: val loss {v:.4f}')", ["val loss"]),
    ("print('| valid loss {:5.2f} | valid ppl {:8.2f}'.format(a, b))",
     ["valid loss", "valid ppl"]),
    ("print('{split} acc {acc:.3f}'.format(split='dev', acc=a))", ["dev acc"]),
    ("print('test err {0:.2f} top1 {1:.2f}'.format(e, t))", ["test err", "top1"]),
    ("print('val loss %.4f' % x)", ["val loss"]),
    ("print('%(name)s bpb %(bpb).3f' % {'name': 'val', 'bpb': b})", ["val bpb"]),
    ("logging.info('epoch %d: dev f1=%.3f', e, f)", ["dev f1"]),
    ("logger.info(f'holdout rmse: {r:.3f}')", ["holdout rmse"]),
    ("print('accuracy:', acc)", ["accuracy"]),
    ("print('val_loss=' + str(v))", ["val_loss"]),
    ("print(f'best val loss {b:.3f}')", ["best val loss"]),
    ("print(f'saving model with new top score of {score}')", []),
    ("print(f'Accuracy of the network on the 10000 test images: {100 * c // t} %')",
     ["Accuracy"]),
    ("print(f'Plotting the loss landscape took: {t}')", []),
])
def test_log_forms_and_their_labels(code, labels):
    assert [v.label for v in Script("x.py", code + "\n").reported()] == labels


@pytest.mark.parametrize("code, names", [
    # pytorch/examples mnist: the split is the line's heading, not part of each label
    ("print('\\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\\n'.format("
     "loss, correct, n, 100. * correct / n))", ["test_average_loss", "test_accuracy"]),
    ("print(f'[val] loss={l:.3f} acc={a:.3f}')", ["val_loss", "val_acc"]),
    ("print(f'Epoch {e+1}/{n}, Train Loss: {t:.4f}, Val Loss: {v:.4f}, Val Acc: {a:.2%}')",
     ["epoch", "train_loss", "val_loss", "val_acc"]),
    ("print(f'val/loss {v:.4f} train-acc {t:.4f}')", ["val_loss", "train_acc"]),
    ("print('Train Epoch: {} [{}/{}]\\tLoss: {:.6f}'.format(e, i, n, loss.item()))",
     ["train_epoch", "loss"]),
    # a sentence opening the line names its metric, and the split in its words
    ("print('Test Accuracy of the model on the 10000 test images: {} %'.format(100 * c / t))",
     ["test_accuracy"]),
    ("print(f'Accuracy of the network on the 10000 test images: {100 * c // t} %')",
     ["test_accuracy"]),
    # ogbn-arxiv: a split word alone, the metric named by the value printed
    ("print(f'Train: {train_acc:.4f}, Val: {val_acc:.4f}')", ["train_acc", "val_acc"]),
    # a message built in a variable, then printed (gpt2-style-transformer)
    ("def train(l, v):\n    msg = (f'Epoch: {e}| Train Loss: {l.item()} | Val Loss: {v.item()}')"
     "\n    print(msg)", ["Epoch", "train_loss", "val_loss"]),
    # the script's own print wrapper (modded-nanogpt's print0)
    ("def print0(s, console=False):\n    if console:\n        print(s)\n"
     "print0(f'step:{step}/{n} val_loss:{v:.4f} train_time:{t:.0f}ms', console=True)",
     ["step", "val_loss", "train_time"]),
    # a dict printed as is, and one a Trainer logs; wandb.log prints nothing
    ("print({'val_loss': v, 'epoch': e})", ["val_loss", "epoch"]),
    ("class T:\n    def ev(self, a):\n        m = {'eval_stsb_spearman': a}\n        self.log(m)"
     "\n        wandb.log({'val/loss': a})", ["eval_stsb_spearman"]),
])
def test_metric_names(code, names):
    assert [v.name for v in Script("x.py", code + "\n").reported()] == names


def test_the_written_pattern_reads_exactly_the_split_it_names():
    code = ("print(f'step {i}: loss {a:.4f} | train loss {b:.4f} | val loss {c:.4f} | "
            "test loss {d:.4f}')\nprint(f'best val loss {e:.4f}')\n")
    line = "step 100: loss 3.0000 | train loss 2.0000 | val loss 2.5000 | test loss 2.7000\n" \
           "best val loss 2.4000\n"
    patterns = {c.name: c.pattern for c in from_values(Script("x.py", code), "script", "x")}
    assert {n: read_metric(line, p) for n, p in patterns.items() if n != "step"} == {
        "loss": 3.0, "train_loss": 2.0, "val_loss": 2.5, "test_loss": 2.7,
        "best_val_loss": 2.4}
    assert read_metric("train_loss: 1.5 Val Loss = 2.25", patterns["val_loss"]) == 2.25
    assert read_metric("train_loss: 1.5 val/loss 2.5 val-loss 2.5", patterns["loss"]) is None


# -- a pattern the engine cannot use is refused before any run ------------------------------
@pytest.mark.parametrize("pattern, why", [("val loss [0-9.]+", "needs one capture group"),
                                          ("val loss ([0-9.]+", "not a valid regex")])
def test_check_task_refuses_a_metric_pattern_it_cannot_read_with(tmp_path, pattern, why):
    repo = plain_repo(tmp_path / "bad", {"train.py": "print('val loss %.4f' % 2.5)\n"})
    (repo / "task.yaml").write_text(textwrap.dedent(f"""\
        name: bad
        run: python train.py
        editable: [train.py]
        metric: {{name: val_loss, direction: minimize, pattern: '{pattern}'}}
        """))
    commit(repo)
    done = run_cli("check-task", ".", cwd=repo)
    assert done.returncode == 2 and why in done.stderr, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and yaml.safe_load(
        (repo / "task.yaml").read_text())["metric"]["pattern"] == pattern


# -- pytorch-tutorial's CNN: the test accuracy in a sentence, the training loss per step -----------
SENTENCE_CNN = """\
import random
LEARNING_RATE = 0.01
random.seed(0)
for epoch in range(2):
    for step in range(3):
        loss = LEARNING_RATE * 10 / (1 + step + epoch) + random.random() / 100
        print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'.format(epoch + 1, 2, step + 1, 3, loss))
correct, total = 9863 + int(100 * LEARNING_RATE), 10000
print('Test Accuracy of the model on the 10000 test images: {} %'.format(100 * correct / total))
"""


def test_a_sentence_naming_the_test_accuracy_is_chosen_never_the_training_loss(tmp_path):
    repo = plain_repo(tmp_path / "cnn", {"main.py": SENTENCE_CNN})
    init_on_the_test_split(repo, "test_accuracy")
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("test_accuracy", "maximize")
    out = printed(repo, "main.py")
    want = last(out, r"test images: ([\d.]+)")
    assert read_metric(out, task.metric.pattern) == want == 98.64
    assert checked(repo) == pytest.approx(want)


# -- MLAgentBench's house-price: `Validation MAE: {:,.0f}` prints 18,450 ---------------------------
def test_a_number_with_thousands_separators_is_read_whole(tmp_path):
    train = ("LEARNING_RATE = 0.1\ntrain_mae, valid_mae = 7504.2, 18000 + 4500 * LEARNING_RATE\n"
             "print('Train MAE: {:,.0f}'.format(train_mae))\n"
             "print('Validation MAE: {:,.0f}'.format(valid_mae))\n")
    repo = plain_repo(tmp_path / "house", {"train.py": train})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("validation_mae", "minimize")
    out = printed(repo)
    assert "Validation MAE: 18,450" in out
    assert read_metric(out, task.metric.pattern) == 18450.0
    assert checked(repo) == 18450.0


# -- an attribute of a library object printed as is: LightGBM's best_score is a dict ---------------
def test_a_library_objects_attribute_printed_as_is_is_no_metric(tmp_path):
    train = ("from types import SimpleNamespace\nLEARNING_RATE = 0.05\n"
             "model = SimpleNamespace(best_score={'train': {'l2': 0.1}, 'valid': {'l2': 0.2}})\n"
             "print('best_score', model.best_score)\n")
    repo = plain_repo(tmp_path / "lgbm", {"train.py": train})
    line = refused(repo)
    assert "best_score is `model.best_score` printed as is" in line
    assert "--metric" not in line                     # no flag makes a dict a metric


# -- SimCSE: a Trainer's `self.log(metrics)` prints the dict; --metric_for_best_model picks ------
TRAINER_DICT = """\
import argparse
import logging
import sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
logger = logging.getLogger(__name__)
parser = argparse.ArgumentParser()
parser.add_argument("--metric_for_best_model", default="stsb_spearman")
parser.add_argument("--learning_rate", type=float, default=3e-5)
args = parser.parse_args()


class Trainer:
    def log(self, logs):
        print(dict(logs, epoch=1.0))

    def evaluate(self, step):
        stsb = 0.70 + step / 100 + args.learning_rate * 1000
        sickr = 0.60 + step / 200
        metrics = {"eval_stsb_spearman": stsb, "eval_sickr_spearman": sickr}
        self.log(metrics)
        return metrics


trainer = Trainer()
best = max(trainer.evaluate(step)["eval_stsb_spearman"] for step in range(3))
logger.info(f"Loading best model from result/checkpoint (score: {best}).")
"""


def test_a_trainers_logged_dict_gives_the_metric_for_best_model(tmp_path):
    repo = plain_repo(tmp_path / "simcse", {"train.py": TRAINER_DICT})
    line = refused(repo)
    assert "several validation metrics printed (eval_stsb_spearman, eval_sickr_spearman): " \
        "pass --metric eval_stsb_spearman" in line
    assert "--metric score" not in line
    done = init(repo, "--args", "--metric_for_best_model stsb_spearman")
    assert done.returncode == 0, done.stderr
    assert "--metric_for_best_model" in done.stdout
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("eval_stsb_spearman", "maximize")
    out = printed(repo)
    want = last(out, r"'eval_stsb_spearman': ([\d.]+)")
    assert read_metric(out, task.metric.pattern) == want
    assert checked(repo) == pytest.approx(want)


# -- MLAgentBench's ogbn-arxiv: `Train: X, Val: Y`, the metric named by the value ---------------
def test_a_split_word_alone_takes_its_metric_from_the_value_printed(tmp_path):
    train = ("LEARNING_RATE = 0.01\n\n\ndef test(epoch):\n"
             "    return 0.5 + epoch / 100, 0.45 + epoch / 200 + LEARNING_RATE, 0.4\n\n\n"
             "for epoch in range(3):\n    train_acc, val_acc, test_acc = test(epoch)\n"
             "    print(f'Train: {train_acc:.4f}, Val: {val_acc:.4f}')\n")
    repo = plain_repo(tmp_path / "arxiv", {"train.py": train})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("val_acc", "maximize")
    out = printed(repo)
    assert read_metric(out, task.metric.pattern) == 0.47 == last(out, r"Val: ([\d.]+)")
    assert checked(repo) == 0.47


# -- minGPT's adder: the split a parameter every call passes a word, the score after `=` ---------
ADDER = """\
LEARNING_RATE = 5e-4


def eval_split(split, n):
    correct = n - (7 if split == 'test' else 3) - int(LEARNING_RATE * 1000)
    print("%s final score: %d/%d = %.2f%% correct" % (split, correct, n, 100 * correct / n))
    return correct / n


for it in range(2):
    print(f"iter {it}: train loss {LEARNING_RATE * 1000 / (it + 1):.5f}")
train_score = eval_split('train', 50)
test_score = eval_split(split='test', n=40)
"""


def test_a_split_each_call_passes_and_the_ratio_after_the_fraction(tmp_path):
    repo = plain_repo(tmp_path / "adder", {"adder.py": ADDER})
    init_on_the_test_split(repo, "test_final_score")
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("test_final_score", "maximize")
    out = printed(repo, "adder.py")
    assert "test final score: 33/40 = 82.50% correct" in out
    assert read_metric(out, task.metric.pattern) == 82.5        # the ratio, not 33 nor 40
    assert checked(repo) == 82.5
