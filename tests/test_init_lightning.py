"""`autoresearch init` reads a metric a LightningModule logs (issue 36: the shape of
lightning-hydra-template and Lightning's project template). What Lightning prints when the
output is not a terminal (as a run's is): a metric logged with `self.log(name, value,
prog_bar=True)` is shown by the progress bar, in the TQDM bar's postfix (`\\r`-rewritten
lines to stderr: `Epoch 1: 100%|...| 8/8 [..., val_acc=0.961]`) or, with a RichProgressBar
(Lightning's default when `rich` is installed), printed once as fit ends (`val_acc: 0.961`,
wrapped at 80 columns, a name and its value possibly on two lines); both rounded to 3
digits; logged on both step and epoch it shows as `val_loss_step` and `val_loss_epoch`.
Without prog_bar=True the number goes to the loggers only. init reads the self.log calls
(nothing is run, Lightning need not be installed), picks the metric by the usual rules (the
one `ModelCheckpoint(monitor=...)` keeps, among several), and writes a pattern for both bars;
a validation metric only the loggers see is refused with the change that makes it readable.
The test that runs Lightning itself skips where it is not installed (it is no dependency)."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli
from helpers import commit, init, plain_repo, read_metric, refused
from loop.script.prints import lightning_logged
from loop.setup.task import load_task

# a tiny classifier on random tensors (nothing downloaded); ModelCheckpoint keeps val_acc
LIT = '''\
import json
import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, RichProgressBar, TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

LR = 0.05


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def step(self, batch):
        x, y = batch
        out = self.net(x)
        return nn.functional.cross_entropy(out, y), (out.argmax(1) == y).float().mean()

    def training_step(self, batch, batch_idx):
        loss, _ = self.step(batch)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, acc = self.step(batch)
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        self.log("test_acc", self.step(batch)[1])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)

    def on_fit_end(self):
        if os.environ.get("TRUTH_FILE"):           # the test's: the numbers unrounded
            with open(os.environ["TRUTH_FILE"], "w") as f:
                json.dump({k: float(v) for k, v in self.trainer.callback_metrics.items()}, f)


if __name__ == "__main__":
    torch.manual_seed(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    data = DataLoader(TensorDataset(x, y), batch_size=32)
    bar = RichProgressBar() if os.environ.get("BAR") == "rich" else TQDMProgressBar()
    trainer = L.Trainer(max_epochs=2, logger=False, enable_model_summary=False,
                        callbacks=[ModelCheckpoint(monitor="val_acc", mode="max",
                                                   save_top_k=0), bar])
    trainer.fit(Classifier(), data, data)
'''

# the two forms, as Lightning 2.6 prints them to a pipe (the numbers made up): TQDM's
# postfix, rewritten with \r; Rich's render, once, wrapped
TQDM_OUT = ("\rEpoch 0: 100%|##########| 8/8 [00:00<00:00, 9.36it/s, train_loss=0.462, "
            "val_loss=0.508, val_acc=0.852]\n\rValidation DataLoader 0: 100%|##########| 8/8 "
            "[00:00<00:00, 40.13it/s]\x1b[A\n\rEpoch 1: 100%|##########| 8/8 [00:00<00:00, "
            "43.96it/s, train_loss=0.380, val_loss=0.401, val_acc=0.941]\rEpoch 1: 100%|#####"
            "#####| 8/8 [00:00<00:00, 43.96it/s, train_loss=0.380, val_loss=0.401, "
            "val_acc=0.941]`Trainer.fit` stopped: `max_epochs=2` reached.\n")
RICH_OUT = ("`Trainer.fit` stopped: `max_epochs=2` reached.\n"
            "Epoch 1/1  ━━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 13.16it/s train_loss: 0.504\n"
            "                                                              val_loss:         \n"
            "                                                              0.471 val_acc:    \n"
            "                                                              0.852             \n")


def repo_of(root: Path, files: dict[str, str]) -> Path:
    """A git repo holding `files` (in folders), one commit."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    commit(root, "initial")
    return root


def lightning_repo(tmp_path: Path, text: str = LIT, name: str = "lit") -> Path:
    return plain_repo(tmp_path / name, {"train.py": text})


def test_the_metric_the_checkpoint_keeps_is_read_from_either_progress_bar(tmp_path):
    repo = lightning_repo(tmp_path)
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"metric: +val_acc \(guessed: the one ModelCheckpoint\(monitor='val_acc'\) "
                     r"in train.py keeps the best model by, shown by Lightning's progress bar",
                     done.stdout), done.stdout
    assert "rounds it to 3 digits" in done.stdout
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("val_acc", "maximize")
    assert read_metric(TQDM_OUT, task.metric.pattern) == 0.941
    assert read_metric(RICH_OUT, task.metric.pattern) == 0.852     # wrapped onto the next line
    assert read_metric("val_acc_best=0.99\nlast val_acc 0.5\n", task.metric.pattern) is None


def test_a_validation_metric_only_the_loggers_see_is_refused_with_the_change_to_make(tmp_path):
    only_logged = LIT.replace('        self.log("val_loss", loss, prog_bar=True)\n', "").replace(
        'self.log("val_acc", acc, prog_bar=True)', 'self.log("valid_loss", loss)').replace(
        'monitor="val_acc"', 'monitor="valid_loss"')
    repo = lightning_repo(tmp_path, only_logged)
    line = refused(repo)
    assert "train.py logs it with self.log('valid_loss', ...) in validation_step() without " \
           "prog_bar=True: it goes to the Lightning loggers" in line, line
    assert line.endswith("add prog_bar=True to that call (Lightning's progress bar then prints "
                         "valid_loss=<value>), commit, and run init again"), line
    # followed as said
    train = repo / "train.py"
    train.write_text(train.read_text().replace('self.log("valid_loss", loss)',
                                               'self.log("valid_loss", loss, prog_bar=True)'))
    commit(repo, "log valid_loss on the progress bar")
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("valid_loss", "minimize")
    assert read_metric("[..., train_loss=0.3, valid_loss=0.418]\n", task.metric.pattern) == 0.418


def test_a_trainer_without_a_progress_bar_is_refused_with_the_change_to_make(tmp_path):
    repo = lightning_repo(tmp_path, LIT.replace(
        "L.Trainer(max_epochs=2,", "L.Trainer(max_epochs=2, enable_progress_bar=False,"))
    line = refused(repo)
    assert "but train.py builds L.Trainer(enable_progress_bar=False): no progress bar prints " \
           "it; drop enable_progress_bar=False there, commit, and run init again" in line, line


def test_a_metric_logged_on_step_and_epoch_is_read_under_its_epoch_name():
    tree = ast.parse(textwrap.dedent('''\
        import pytorch_lightning as pl
        class M(pl.LightningModule):
            def training_step(self, batch, i):
                self.log("train_loss", 1.0, on_epoch=True, prog_bar=True)
            def validation_step(self, batch, i):
                self.log("val_loss", 1.0, on_step=True, on_epoch=True, prog_bar=True)
                self.log_dict({"val_acc": 0.5, "val_f1": 0.4}, prog_bar=True)
                self.log(f"{self.stage}/acc", 0.5, prog_bar=True)
            def on_validation_epoch_end(self):
                self.log("val_acc_best", 0.9)
        class NotLightning:
            def validation_step(self):
                self.log("val_other", 1.0, prog_bar=True)
        '''))
    assert [(m.name, m.on_bar, m.hook) for m in lightning_logged(tree)] == [
        ("train_loss_epoch", True, "training_step"), ("val_loss_epoch", True, "validation_step"),
        ("val_acc", True, "validation_step"), ("val_f1", True, "validation_step"),
        ("val_acc_best", False, "on_validation_epoch_end")]


# no Lightning: a stand-in base class of that name whose bar prints the postfix as TQDM does
# (to stderr, each update after a \r); the module derives it through a base class of its own
STAND_IN = '''\
import os
import random
import sys

LR = 0.1


class LightningModule:
    def log(self, name, value, prog_bar=False, **kwargs):
        if prog_bar:
            self.shown[name] = value

    def fit(self):
        self.shown = {}
        rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
        for epoch in range(3):
            self.validation_step(rng, epoch)
            postfix = ", ".join(k + "=" + format(v, ".3f") for k, v in self.shown.items())
            sys.stderr.write("\\rEpoch " + str(epoch) + ": 100%|###| 8/8 [00:00, " + postfix + "]")
        sys.stderr.write("\\n")


class Base(LightningModule):
    pass


class Model(Base):
    def validation_step(self, rng, epoch):
        loss = 1.0 / (epoch + 1) + abs(LR - 0.1) + rng.random() / 100
        self.log("val/loss", loss, prog_bar=True)


Model().fit()
'''


def test_check_task_reads_the_bar_of_a_module_derived_through_a_base_class(tmp_path):
    repo = lightning_repo(tmp_path, STAND_IN)
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("val/loss", "minimize")
    run = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True, text=True,
                         check=True)
    want = float(re.findall(r"val/loss=([\d.]+)", run.stderr)[-1])
    commit(repo, "autoresearch task")
    checked = run_cli("check-task", ".", cwd=repo)
    assert checked.returncode == 0 and "status ok" in checked.stdout, checked.stdout + \
        checked.stderr
    assert float(re.search(r"status ok; \S+ = ([-\d.]+)", checked.stdout)[1]) == want


HYDRA_TRAIN = '''\
import hydra
from hydra.utils import instantiate


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg):
    model = instantiate(cfg.model)
    trainer = instantiate(cfg.trainer, callbacks=[instantiate(c) for c in cfg.callbacks.values()])
    trainer.fit(model, datamodule=instantiate(cfg.data))


if __name__ == "__main__":
    main()
'''
HYDRA_MODULE = '''\
import lightning as L
import torch


class LitModel(L.LightningModule):
    def __init__(self, lr: float, hidden: int, input_size: int):
        super().__init__()
        self.net = torch.nn.Linear(input_size, hidden)
        self.lr = lr

    def validation_step(self, batch, batch_idx):
        loss, acc = self.net(batch).sum(), 0.5
        self.log("val/loss", loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/acc", acc, on_step=False, on_epoch=True, prog_bar=True)
'''


def test_a_hydra_app_reads_the_module_its_config_instantiates(tmp_path):
    repo = repo_of(tmp_path / "hy", {
        "train.py": HYDRA_TRAIN, "models/__init__.py": "", "models/lit.py": HYDRA_MODULE,
        "configs/train.yaml": "defaults:\n  - _self_\n  - model: lit\n  - callbacks: default\n"
                              "  - data: random\nseed: 1\n",
        "configs/model/lit.yaml": "_target_: models.lit.LitModel\nlr: 0.002\nhidden: 64\n"
                                  "input_size: 8\n",
        "configs/callbacks/default.yaml": "checkpoint:\n  _target_: lightning.pytorch.callbacks."
                                          "ModelCheckpoint\n  monitor: val/acc\n  mode: max\n",
        "configs/data/random.yaml": "_target_: models.lit.Data\nval_fraction: 0.1\n"})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert "the one `monitor: val/acc` in configs/callbacks/default.yaml keeps the best model " \
           "by" in done.stdout, done.stdout
    task = load_task(repo)
    assert (task.metric.name, task.metric.direction) == ("val/acc", "maximize")
    assert "configs/model/lit.yaml" in task.editable          # the model config, not the data
    assert "configs/data/random.yaml" not in task.editable
    # searched through overrides; the input's width is the data's, never searched
    assert "model.lr" in task.search_space and "model.input_size" not in task.search_space
    assert "model.input_size (fixed by the data)" in done.stdout
    assert read_metric("Epoch 0: 100%|#| 4/4 [00:00, val/loss=0.4, val/acc=0.731]\n",
                       task.metric.pattern) == 0.731


def _lightning_here() -> bool:
    return subprocess.run([sys.executable, "-c", "import lightning"],
                          capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _lightning_here(), reason="lightning is not installed (no dependency)")
@pytest.mark.parametrize("bar", ["tqdm", "rich"])
def test_the_pattern_reads_what_lightning_really_prints(tmp_path, bar):
    """Lightning run for real, its output a pipe (stdout and stderr together, as a run's):
    the number read is the validation accuracy of the last epoch, to the bar's 3 digits."""
    repo = lightning_repo(tmp_path)
    assert init(repo).returncode == 0
    truth = tmp_path / "truth.json"
    done = subprocess.run([sys.executable, "train.py"], cwd=repo, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                          env={**os.environ, "BAR": bar, "TRUTH_FILE": str(truth)})
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, out[-2000:]
    got = read_metric(out, load_task(repo).metric.pattern)
    assert got == pytest.approx(json.loads(truth.read_text())["val_acc"], abs=6e-4), out[-2000:]
