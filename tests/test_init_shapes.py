"""`autoresearch init` on the shapes people have (issue 22): a karpathy-shaped repo whose
protected module evaluates and prints, nanoGPT-style lowercase settings and log lines,
words printed next to colons, fixed seeds, and every ambiguity refused in one line. Real
git repos in tmp folders and the real CLI in a subprocess."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shaped_repos import (NANO_CONFIGURATOR, NANO_TRAIN, TABULAR_PREPARE, TABULAR_README,
                          TABULAR_TRAIN)
from helpers import commit, init, init_on_the_test_split, plain_repo, read_metric, refused
from conftest import run_cli
from loop.script.source import Script
from loop.setup.task import load_task


def tabular(tmp_path: Path) -> Path:
    return plain_repo(tmp_path / "tabular", {"prepare.py": TABULAR_PREPARE,
                                             "train.py": TABULAR_TRAIN,
                                             "README.md": TABULAR_README})


def nano(tmp_path: Path) -> Path:
    return plain_repo(tmp_path / "nano", {"train.py": NANO_TRAIN,
                                          "configurator.py": NANO_CONFIGURATOR})


def run_output(repo: Path) -> str:
    done = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True,
                          text=True, check=True)
    return done.stdout


# -- karpathy-shaped, the protected module evaluating and printing -------------------------------
@pytest.mark.parametrize("flags", [(), ("--script", "train.py")])
def test_protected_evaluator_keeps_prepare_protected_and_picks_val(tmp_path, flags):
    repo = tabular(tmp_path)
    done = init(repo, *flags)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["editable"] == ["train.py"] and task["protected"] == ["prepare.py"]
    assert task["run"] == "python train.py"
    assert task["metric"] == {"name": "val_auc", "direction": "maximize"}
    assert "RANDOM_STATE" not in task.get("search_space", {})     # the split's seed
    assert set(task["search_space"]) == {"THRESHOLD", "NOISE"}
    out = done.stdout
    assert "printed by the protected prepare.py, which train.py imports" in out
    assert "others: test_auc" in out and "an edit to train.py could print a line" in out
    # the metric as the loop reads it: the validation number of a real run, not the test one
    loaded = load_task(repo)
    printed = run_output(repo)
    val = float(next(s for s in printed.splitlines() if s.startswith("val_auc:")).split()[1])
    assert read_metric(printed, loaded.metric.pattern) == val


def test_a_module_the_script_imports_is_never_the_editable_one(tmp_path):
    repo = tabular(tmp_path)
    line = refused(repo, "--script", "prepare.py")
    assert "train.py imports it" in line and "--script train.py" in line


def test_a_test_metric_is_chosen_when_no_validation_one_is_printed(tmp_path):
    only_test = "X = 1.0\nprint(f'test_acc: {X * 0.5:.3f}')\n"
    repo = plain_repo(tmp_path / "t", {"train.py": only_test})
    init_on_the_test_split(repo, "test_acc")
    assert yaml.safe_load((repo / "task.yaml").read_text())["metric"]["name"] == "test_acc"


def test_of_several_test_metrics_the_loss_is_chosen_and_a_validation_one_wins(tmp_path):
    two = "X = 1.0\nprint(f'test_acc: {X * 0.5:.3f}')\nprint(f'test_loss: {X / 4:.3f}')\n"
    init_on_the_test_split(plain_repo(tmp_path / "t", {"train.py": two}), "test_loss")
    three = two + "print(f'val_acc: {X / 3:.3f}')\n"
    repo = plain_repo(tmp_path / "v", {"train.py": three})
    assert init(repo).returncode == 0
    assert yaml.safe_load((repo / "task.yaml").read_text())["metric"]["name"] == "val_acc"


def test_two_validation_metrics_are_an_ambiguity(tmp_path):
    both = "X = 1.0\nprint(f'val_loss: {X:.3f}')\nprint(f'val_acc: {X / 2:.3f}')\n"
    line = refused(plain_repo(tmp_path / "t", {"train.py": both}))
    assert "several validation metrics printed (val_loss, val_acc): pass --metric val_loss, or " \
        "--metric with another of them" in line


def test_words_after_a_colon_are_not_metrics(tmp_path):
    config = ("import sys\nname = 'toy'\nfor arg in sys.argv[1:]:\n    key, attempt = "
              "arg.split('=')\n    print(f\"Overriding: {key} = {attempt}\")\n"
              "print(f\"Task: {name}\")\nprint('Features:', ', '.join(sys.argv))\n")
    train = "import config\nLR = 0.1\nprint('done')\n"
    repo = plain_repo(tmp_path / "t", {"config.py": config, "train.py": train})
    assert "no metric found" in refused(repo)
    src = Script("config.py", config)
    assert src.reported() == []
    assert [v.name for v in Script("x.py", "print(f'val_auc: {auc}')\n").reported()] == \
        ["val_auc"]                            # a metric-like name: a number, unformatted


# -- nanoGPT style -------------------------------------------------------------------------------
def test_log_line_becomes_the_metric_pattern_and_lowercase_settings_the_space(tmp_path):
    repo = nano(tmp_path)
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["metric"]["name"] == "val_loss" and task["metric"]["direction"] == "minimize"
    assert task["metric"]["pattern"]
    space = set(task["search_space"])
    assert {"learning_rate", "n_layer", "beta2", "dropout"} <= space
    assert not space & {"seed_offset", "eval_interval", "log_interval", "eval_iters",
                        "iter_num", "best_val_loss"}
    # the printed val loss is computed from batch_size * block_size: they size what it
    # measures, so they are left out, named with why (issue 36)
    assert "batch_size (sets the validation batch)" in done.stdout
    assert "block_size (sets the validation sequence length)" in done.stdout
    # the pattern written reads the last validation loss of a real run, as the runner does
    loaded = load_task(repo)
    printed = run_output(repo)
    last = [s for s in printed.splitlines() if s.startswith("step ")][-1]
    assert read_metric(printed, loaded.metric.pattern) == float(last.rsplit(" ", 1)[1])
    assert "fixes its own seed (random.seed(1337 + seed_offset))" in done.stdout
    assert "baseline spread near 0" in done.stdout and "AUTORESEARCH_SEED" in done.stdout
    # and mutate moves the lowercase settings the space names
    from loop.proposers.base import Context
    from loop.proposers.mutate import MutateProposer
    files = {"train.py": (repo / "train.py").read_text()}
    p = MutateProposer(seed=3).propose(Context(1, loaded, files, "", [], None, seed=1))
    assert p.error is None and p.description.split()[1] in space, p.description
    assert p.files["train.py"] != files["train.py"]


def test_metric_pattern_flag(tmp_path):
    repo = nano(tmp_path)
    assert "needs --metric NAME" in refused(repo, "--metric-pattern", r"val loss ([0-9.]+)")
    assert "not a valid regex" in refused(repo, "--metric", "vl", "--metric-pattern", "(")
    assert "exactly one capture group" in refused(repo, "--metric", "vl", "--metric-pattern",
                                                  "val loss")
    done = init(repo, "--metric", "vl", "--metric-pattern", r"val loss ([0-9.]+)",
                "--direction", "minimize")
    assert done.returncode == 0, done.stderr
    loaded = load_task(repo)
    assert loaded.metric.name == "vl" and read_metric(run_output(repo),
                                                       loaded.metric.pattern) is not None
    # the description says who prints it in words, not a flag followed by a comma
    assert ("vl: lower is better, printed by train.py, matched by --metric-pattern (read from"
            in " ".join(loaded.description.split())), loaded.description


def test_nothing_to_search_is_said(tmp_path):
    train = ("import os, random\nseed = int(os.environ.get('AUTORESEARCH_SEED', '0'))\n"
             "print(f'val_loss: {random.Random(seed).random():.4f}')\n")
    done = init(plain_repo(tmp_path / "t", {"train.py": train}))
    assert done.returncode == 0, done.stderr
    notes = [s for s in done.stdout.splitlines() if "mutate and tune have nothing to search" in s]
    assert len(notes) == 1 and "search_space:" in notes[0] and "fixes its own seed" \
        not in done.stdout


# -- what init says and writes -------------------------------------------------------------------
def test_guesses_are_printed_with_their_flags_and_the_judge_is_what_is_written(tmp_path):
    repo = tabular(tmp_path)
    done = init(repo)
    lines = {s.split(":", 1)[0].strip(): s for s in done.stdout.splitlines() if s[:2] == "  "}
    assert "(found:" in lines["script"] and "--script FILE" in lines["script"]
    assert "(found: the validation metric" in lines["metric"] and "--metric NAME" in \
        lines["metric"] and "--metric-pattern REGEX" in lines["metric"]
    assert "(guessed: from the name val_auc" in lines["direction"]
    assert "--direction" in lines["direction"]
    assert "(found: prepare.py:TIME_BUDGET" in lines["budget"]
    config = yaml.safe_load((repo / "autoresearch.yaml").read_text())
    assert lines["judge"].split()[1] == config["judge"]["rule"] == "sequential"
    # a script that times itself gets a grace that grows with its budget
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["time_budget_s"] == 2 and task["grace_s"] == "auto"
    assert load_task(repo).grace_s == 121


def test_the_validation_metric_the_repos_own_words_name_settles_a_tie(tmp_path):
    prepare = TABULAR_PREPARE.replace('    print(f"val_auc: {val_auc:.6f}")',
                                      '    print(f"val_accuracy: {val_auc / 2:.6f}")\n'
                                      '    print(f"val_auc: {val_auc:.6f}")')
    program = ("# goal\n\nGet the highest val_auc. Read it with grep '^val_auc:'; val_auc "
               "is the target.\n")
    repo = plain_repo(tmp_path / "t", {"prepare.py": prepare, "train.py": TABULAR_TRAIN,
                                       "program.md": program})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((repo / "task.yaml").read_text())["metric"]["name"] == "val_auc"
    assert "(guessed: named 3 times in program.md/README.md (val_accuracy 0)" in done.stdout


def test_every_local_module_the_script_imports_stays_protected(tmp_path):
    files = {"train.py": "import helpers\nfrom data.load import rows\nLR = 0.1\n"
                         "print(f'val_loss: {helpers.loss(LR, rows()):.4f}')\n",
             "helpers.py": "from metrics import squared\ndef loss(lr, xs):\n"
                           "    return squared(lr) + len(xs)\n",
             "metrics.py": "def squared(x):\n    return x * x\n"}
    repo = plain_repo(tmp_path / "t", files)
    (repo / "data").mkdir()
    (repo / "data" / "load.py").write_text("def rows():\n    return [1, 2]\n")
    commit(repo)
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["editable"] == ["train.py"]
    assert task["protected"] == ["data/load.py", "helpers.py", "metrics.py"]


@pytest.mark.parametrize("code,fixed", [
    ("import torch\ntorch.manual_seed(1337)\n", "torch.manual_seed(1337)"),
    ("import numpy as np\nnp.random.seed(42)\n", "np.random.seed(42)"),
    ("from sklearn.ensemble import RandomForestClassifier as F\nm = F(random_state=42)\n",
     "F(random_state=42)"),
    ("import os, torch\ntorch.manual_seed(int(os.environ.get('AUTORESEARCH_SEED', '0')))\n",
     None),
    ("import random\nx = random.random()\n", None),
])
def test_a_fixed_seed_is_found(code, fixed):
    from loop.script.seeds import fixed_seeds
    assert fixed_seeds(Script("train.py", code)) == ([fixed] if fixed else [])


def test_an_lm_call_the_grader_cannot_make_is_refused_with_the_way_out(tmp_path, monkeypatch):
    from karpathy_repo import FIXTURE, make_karpathy_repo
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    train = (FIXTURE / "train.py").read_text().replace(
        "val_bpb = evaluate_bpb(model, tokenizer, DEVICE_BATCH_SIZE)",
        "eval_tok = tokenizer if model else None\n"
        "val_bpb = evaluate_bpb(model, eval_tok, DEVICE_BATCH_SIZE)")
    repo = make_karpathy_repo(tmp_path / "shape", cache, {"train.py": train})
    line = refused(repo)
    assert "cannot pass `eval_tok`" in line and "pass --metric val_bpb --metric-pattern" in line
    pattern = line.split("--metric-pattern ", 1)[1].strip("'")
    done = init(repo, "--metric", "val_bpb", "--metric-pattern", pattern)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert task.grader is None and task.metric.pattern == pattern
    assert read_metric("val_bpb:          2.345678\n", task.metric.pattern) == 2.345678


def test_an_lm_call_built_inside_a_function_is_graded(tmp_path, monkeypatch):
    """A CPU fork builds its tokenizer and eval batch inside `main()`, the batch by device
    (`B if on_gpu else min(B, 4)`): the grader makes the same call, at the smaller batch."""
    from karpathy_repo import FIXTURE, make_karpathy_repo
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    train = (FIXTURE / "train.py").read_text().replace(
        "val_bpb = evaluate_bpb(model, tokenizer, DEVICE_BATCH_SIZE)",
        "def final_eval(on_gpu):\n"
        "    eval_tokenizer = Tokenizer.from_directory()\n"
        "    eval_batch = DEVICE_BATCH_SIZE if on_gpu else min(DEVICE_BATCH_SIZE, 4)\n"
        "    val_bpb = evaluate_bpb(model, eval_tokenizer, eval_batch)\n"
        "    return val_bpb\n"
        "val_bpb = final_eval(device.type == 'cuda')")
    repo = make_karpathy_repo(tmp_path / "shape", cache, {"train.py": train})
    done = init(repo)
    assert done.returncode == 0, done.stderr
    task = load_task(repo)
    assert task.grader.eval_call == "evaluate_bpb(model, Tokenizer.from_directory(), 4)"
    assert task.grader.input_shape[0] == 4
    commit(repo, "autoresearch task")
    checked = run_cli("check-task", ".", cwd=repo)
    assert checked.returncode == 0 and "status ok" in checked.stdout, checked.stdout


def test_metric_pattern_without_script_reads_train_py(tmp_path):
    """A train.py whose only report is a line the scan does not read (its number made
    text by `format(x, '.4f')`; a message built before the print is read:
    test_init_log_forms.py): with --metric and --metric-pattern, train.py is the script, as
    --script's help says (once refused: 'no metric found ... pass --script FILE')."""
    repo = plain_repo(tmp_path / "pct", {"train.py": "lr = 0.1\nloss = 2.0 + lr\n"
                                                      "line = 'val loss ' + format(loss, '.4f')\n"
                                                      "print(line)\n"})
    assert "no metric found" in refused(repo)
    done = init(repo, "--metric", "val_loss", "--metric-pattern", r"val loss ([0-9.]+)")
    assert done.returncode == 0, done.stderr
    assert "train.py (found: a train.py, its output read with --metric-pattern" in done.stdout
    loaded = load_task(repo)
    assert list(loaded.editable) == ["train.py"]
    assert read_metric(run_output(repo), loaded.metric.pattern) == pytest.approx(2.1)


# -- a training loss is not an objective (issue 22 acceptance) -------------------------------
def test_a_training_loss_alone_is_refused_unless_named(tmp_path):
    no_val = "\n".join(line for line in NANO_TRAIN.splitlines() if "val loss" not in line)
    repo = plain_repo(tmp_path / "noval", {"train.py": no_val + "\n",
                                           "configurator.py": NANO_CONFIGURATOR})
    line = refused(repo)
    assert "only a training metric is printed" in line and "--metric loss" in line
    done = init(repo, "--metric", "loss")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((repo / "task.yaml").read_text())["metric"]["name"] == "loss"


def test_keywords_of_data_and_tensor_plumbing_are_no_settings(tmp_path):
    """A `df.insert(loc=0, ..., value=1.0)` (MLAgentBench's house-price) or `x.masked_fill_(
    mask, value=-1e4)` (SimCSE) keyword says where a column or a mask goes: no setting."""
    from loop.init.onboard import analyse
    repo = plain_repo(tmp_path / "plumbing", {"train.py": (
        "import numpy as np\n"
        "import pandas as pd\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "X = pd.DataFrame(np.random.default_rng(0).normal(size=(80, 3)))\n"
        "X.insert(loc=0, column='bias', value=1.0)\n"
        "y = (X[0] > 0).astype(int)\n"
        "clf = LogisticRegression(C=1.0).fit(X[:60], y[:60])\n"
        "print(f'val_accuracy: {clf.score(X[60:], y[60:]):.4f}')\n")})
    assert set(analyse(repo).space) == {"LogisticRegression.C"}


def test_the_longest_sequence_a_model_is_built_for_is_not_searched(tmp_path):
    """MEGABYTE's `MEGABYTE(max_seq_len=(512, 4, 4), depth=(6, 4, 2))`: below the data's
    length the model refuses it, above it nothing measured changes; the depths are searched."""
    from loop.init.onboard import analyse
    repo = plain_repo(tmp_path / "capacity", {"train.py": (
        "import torch\n"
        "class Hier(torch.nn.Module):\n"
        "    def __init__(self, max_seq_len, depth):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(max_seq_len[-1], sum(depth))\n"
        "LEARNING_RATE = 2e-4\n"
        "model = Hier(max_seq_len=(512, 4, 4), depth=(6, 4, 2))\n"
        "opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)\n"
        "print(f'val_loss: {float(model.lin.weight.sum()):.4f}')\n")})
    plan = analyse(repo)
    assert {"Hier.depth.0", "Hier.depth.1", "Hier.depth.2", "LEARNING_RATE"} <= set(plan.space)
    assert not any("max_seq_len" in name for name in plan.space)
    assert any(s.startswith("Hier.max_seq_len.0 (the longest sequence") for s in plan.skipped)
