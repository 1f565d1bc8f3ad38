"""Scripts whose settings are command-line flags or keys of a config file, as most public
training scripts keep them: `init` finds them, writes them where a candidate's commit shows
them (the flags file, the config file), and mutate and tune search them in a real night
(real git, real runs, the real CLI). Also: tune on lowercase settings, an empty search
space refused before the baseline, a seed flag given each run's own seed."""
from __future__ import annotations

import csv
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import git, run_cli
from shaped_repos import NANO_CONFIGURATOR, NANO_TRAIN

ARGPARSE_TRAIN = """\
import argparse, random

WIDTH = 32
parser = argparse.ArgumentParser(description="a toy trainer")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate")
parser.add_argument("--width", type=int, default=WIDTH)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--no-cuda", action="store_true", default=False)
args = parser.parse_args()
rng = random.Random(args.seed)
loss = (args.lr - 0.02) ** 2 * 1000 + (args.width - 48) ** 2 / 100 + args.dropout
loss += rng.gauss(0, 0.01)
print(f"given: lr={args.lr} width={args.width} dropout={args.dropout} seed={args.seed}")
print(f"val_loss: {loss:.4f}")
"""

CONFIG_TRAIN = """\
import argparse, random
import yaml

parser = argparse.ArgumentParser()
parser.add_argument("--config", default="configs/base.yaml")
args = parser.parse_args()
cfg = yaml.safe_load(open(args.config))
rng = random.Random(cfg["seed"])
lr, width = float(cfg["optim"]["lr"]), cfg["model"]["width"]
loss = (lr - 0.02) ** 2 * 1000 + (width - 48) ** 2 / 100 + rng.gauss(0, 0.01)
print(f"given: lr={lr} width={width}")
print(f"val_loss: {loss:.4f}")
"""

CONFIG_YAML = """\
seed: 0
optim:
  lr: 0.01      # peak learning rate
  weight_decay: 0.1
model:
  width: 32
train:
  epochs: 2
  log_every: 10
"""

EMPTY_TRAIN = 'import random\nloss = 1.0 + random.random() / 100\nprint(f"val_loss: {loss:.4f}")\n'


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    (root / "README.md").write_text("# toy\n\nFit a toy loss.\n")
    commit(root, "initial")
    return root


def commit(repo: Path, msg: str = "files") -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def rows(repo: Path, tag: str) -> list[dict]:
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def logs(repo: Path, tag: str, iteration: int) -> str:
    return "".join(p.read_text() for p in
                   sorted((repo / ".autoresearch" / tag / "logs").glob(f"*{iteration:04d}*")))


def night(repo: Path, tag: str, proposer: str, iterations: int = 3):
    done = run_cli("run", "--tag", tag, "--proposer", proposer, "--iterations",
                   str(iterations), cwd=repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done


def test_argparse_flags_become_a_flags_file_that_mutate_and_tune_search(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "argrepo", {"train.py": ARGPARSE_TRAIN})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert re.search(r"flags: +autoresearch.flags.yaml: 6 argparse flags of train.py",
                     done.stdout)
    assert "git add task.yaml autoresearch.flags.yaml autoresearch.yaml" in done.stdout
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["flags"] == "autoresearch.flags.yaml" and task["run"] == "python train.py"
    assert task["editable"] == ["train.py", "autoresearch.flags.yaml"]
    # what a researcher would search: no training length, cadence or seed; dropout <= 0.5;
    # WIDTH only feeds --width's default, so moving it would change nothing
    assert set(task["search_space"]) == {"lr", "width", "dropout"}
    assert task["search_space"]["dropout"] == {"range": [0.0, 0.5]}
    flags = yaml.safe_load((repo / "autoresearch.flags.yaml").read_text())
    assert flags == {"lr": 0.01, "width": 32, "dropout": 0.1, "epochs": 3,
                     "log-interval": 10, "seed": "$AUTORESEARCH_SEED"}
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    assert check.returncode == 0 and "status ok" in check.stdout, check.stdout + check.stderr

    night(repo, "m", "mutate")
    table = rows(repo, "m")
    assert [r["status"] for r in table][0] == "keep"
    assert all(r["status"] in ("keep", "discard") for r in table), table
    assert all("in autoresearch.flags.yaml" in r["description"] for r in table[1:])
    # the run got the flags of its own commit, and each run its own seed
    first = table[1]["description"]
    lr = re.search(r"lr to ([^\s,;]+)", first)
    if lr:
        assert f"lr={float(lr[1])}" in logs(repo, "m", 1)
    seeds = set(re.findall(r"seed=(\d+)", logs(repo, "m", 0)))
    assert len(seeds) == 3                       # the baseline's 3 runs, 3 seeds
    # a candidate is a commit whose diff shows the settings it changed, and nothing else
    attempt = git(repo, "for-each-ref", "--format=%(refname)",
                  "refs/autoresearch/m/attempt-1").split()[0]
    assert git(repo, "diff", "--name-only", f"{attempt}^", attempt) == "autoresearch.flags.yaml"

    night(repo, "t", "tune")
    table = rows(repo, "t")
    assert all(r["status"] in ("keep", "discard") for r in table), table
    assert all(re.match(r"Set .* in autoresearch.flags.yaml", r["description"])
               for r in table[1:])


def test_a_yaml_config_the_script_reads_is_searched_by_key_path(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "cfgrepo", {"train.py": CONFIG_TRAIN,
                                            "configs/base.yaml": CONFIG_YAML})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert "configs/base.yaml" in task["editable"]
    assert set(task["search_space"]) == {"optim.lr", "optim.weight_decay", "model.width"}
    assert "left out: seed, train.epochs, train.log_every" in done.stdout
    commit(repo, "autoresearch task")
    night(repo, "t", "tune", iterations=2)
    table = rows(repo, "t")
    assert all(r["status"] in ("keep", "discard") for r in table), table
    assert all(r["description"].endswith("in configs/base.yaml")
               or "in configs/base.yaml;" in r["description"] for r in table[1:])
    # the edited config still parses, with the comment kept and numbers as numbers
    attempt = git(repo, "for-each-ref", "--format=%(refname)",
                  "refs/autoresearch/t/attempt-1").split()[0]
    text = git(repo, "show", f"{attempt}:configs/base.yaml")
    cfg = yaml.safe_load(text)
    assert "# peak learning rate" in text and isinstance(cfg["optim"]["lr"], float)
    # zero spread: the config fixes the seed, and the night says what that means
    done = night(repo, "u", "mutate", iterations=1)
    assert "note: the baseline's 3 runs all gave val_loss" in done.stdout
    assert "judge.min_delta" in done.stdout


def test_tune_searches_lowercase_settings(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "nano", {"train.py": NANO_TRAIN,
                                         "configurator.py": NANO_CONFIGURATOR})
    assert run_cli("init", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    night(repo, "t", "tune", iterations=2)
    table = rows(repo, "t")
    assert not any(r["status"] == "bad_edit" for r in table), table
    assert all(r["description"].startswith("Set ") for r in table[1:])


@pytest.mark.parametrize("proposer", ["mutate", "tune"])
def test_an_empty_search_space_is_refused_before_the_baseline(tmp_path, mlflow_uri, proposer):
    repo = make_repo(tmp_path / "empty", {"train.py": EMPTY_TRAIN})
    assert run_cli("init", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    done = run_cli("run", "--tag", "x", "--proposer", proposer, cwd=repo)
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"autoresearch: error: --proposer {proposer}: nothing to search in")
    assert "run --proposer llm" in line
    assert not (repo / ".autoresearch" / "x" / "results.tsv").exists()


@pytest.mark.parametrize("flags_key, text, expect", [
    ("flags: f.yaml", "- a\n", "expected `name: value` lines"),
    ("flags: ../f.yaml", "lr: 1\n", "must be a .yaml file inside the task folder"),
    ("flags: g.yaml", "lr: 1\n", "g.yaml must be editable"),
])
def test_a_bad_flags_key_is_one_line_exit_2(tmp_path, flags_key, text, expect):
    files = {"train.py": EMPTY_TRAIN, "task.yaml": f"""\
        name: t
        editable: [train.py, "f*.yaml"]
        run: python train.py
        metric: val_loss
        {flags_key}
        """}
    files["f.yaml" if "f.yaml" in flags_key else "g.yaml"] = text
    files["f1.yaml"] = "lr: 1\n"             # so the editable glob matches a file
    repo = make_repo(tmp_path / "bad", files)
    done = run_cli("check-task", ".", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expect in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_key_value_overrides_given_to_init_are_searched_where_they_win(tmp_path, mlflow_uri):
    """nanoGPT's configurator: `--batch_size=8` last on the command line overrides train.py's
    own value, so a search must move it in the flags file, not in train.py."""
    repo = make_repo(tmp_path / "nano", {"train.py": NANO_TRAIN,
                                         "configurator.py": NANO_CONFIGURATOR})
    done = run_cli("init", "--args", "--batch_size=8 --n_layer=2", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["run"] == "python train.py" and task["flags"] == "autoresearch.flags.yaml"
    assert yaml.safe_load((repo / "autoresearch.flags.yaml").read_text()) == \
        {"batch_size": 8, "n_layer": 2}
    assert "--args sets batch_size, n_layer as --key=value" in done.stdout
    assert {"n_layer", "learning_rate"} <= set(task["search_space"])
    # the printed val loss reads batch_size: passed as given, never searched (issue 36)
    assert "batch_size" not in task["search_space"]
    assert "batch_size (sets the validation batch)" in done.stdout
    task["search_space"] = {"n_layer": task["search_space"]["n_layer"]}   # narrowed by hand
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    commit(repo, "autoresearch task")
    night(repo, "m", "mutate", iterations=3)
    table = rows(repo, "m")
    moved = [r for r in table[1:] if re.search(r"\bn_layer to", r["description"])]
    assert moved, table
    for r in moved:        # flags are changed where they win, and the run got the new value
        assert "in autoresearch.flags.yaml" in r["description"]
        name, value = re.search(r"\b(n_layer) to ([^\s,;]+)", r["description"]).groups()
        assert f"Overriding: {name} = {value}" in logs(repo, "m", int(r["iteration"]))


COARSE_TRAIN = """\
import argparse
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.03)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
print(f"val_loss: {4.0 + (0.01 if a.lr > 0.02 else 0.0):.2f}")
"""


def test_a_gain_of_one_printed_unit_is_not_kept_when_the_baseline_runs_agree(tmp_path,
                                                                             mlflow_uri):
    """word_language_model prints `valid loss {:5.2f}`: seeded runs that all print 4.28, then a
    candidate printing 4.27 was kept as a gain. One printed unit is no evidence."""
    from loop.engine.engine import Engine
    from loop.proposers.base import Proposal
    from loop.setup.config import Config
    repo = make_repo(tmp_path / "coarse", {"train.py": COARSE_TRAIN})
    assert run_cli("init", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    flags = (repo / "autoresearch.flags.yaml").read_text()

    class Lower:
        def propose(self, context):
            return Proposal("Set lr to 0.01 (was 0.03) in autoresearch.flags.yaml",
                            files={"autoresearch.flags.yaml": flags.replace("lr: 0.03",
                                                                            "lr: 0.01")})
    said: list[str] = []
    stop = Engine(Config(task=".", base_dir=repo, iterations=1, tag="c"), out=said.append,
                  proposer=Lower()).run()
    assert stop.exit_code == 0
    note = next(s for s in said if s.startswith("note: the baseline's 3 runs all gave"))
    assert "val_loss is printed to 0.01, coarser than its run-to-run noise" in note
    table = rows(repo, "c")
    assert [r["status"] for r in table] == ["keep", "discard"], table


LBFGS_TRAIN = """\
import argparse, random
parser = argparse.ArgumentParser()
parser.add_argument('--steps', type=int, default=3, help='steps to run')
opt = parser.parse_args()
random.seed(0)
for i in range(opt.steps):
    print('STEP: ', i)
    def closure():
        loss = 1.0 / (i + 1) + random.random() / 100
        print('loss:', loss)
        return loss
    closure()
    print('test loss:', 2.0 / (i + 1))
"""


def test_an_unlabeled_loss_beside_a_test_loss_gives_the_test_loss(tmp_path):
    """pytorch/examples' time_sequence_prediction: the closure prints `loss:` (training), the
    step prints `test loss:`; init once chose the training loss and exited 0."""
    repo = make_repo(tmp_path / "tsp", {"train.py": LBFGS_TRAIN})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    metric = next(x for x in done.stdout.splitlines() if x.strip().startswith("metric:"))
    assert metric.split()[1] == "test_loss" and "the test split's" in metric
    assert "loss names no split (likely training)" in metric
    assert "left out: --steps" in done.stdout            # the training's length
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    assert "test_loss = 0.666667" in check.stdout, check.stdout + check.stderr
