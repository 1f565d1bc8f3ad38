"""Settings where real code keeps them (issue 36 item 4), found by `init` through the one
settings interface (loop/script/settings.py) and searched in a real night: a Hydra app's
composed config, searched through overrides that win over its YAML (real Hydra); a dict
literal of parameters (LightGBM / XGBoost style); literal keyword arguments of calls
(`LogisticRegression(C=1.0)`). Real git repos, the real CLI."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import git, run_cli
from loop.setup.task import load_task

HYDRA_TRAIN = """\
import random

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="config", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    rng = random.Random(cfg.seed)
    lr, bs = cfg.training.learning_rate, cfg.training.batch_size
    width, depth = cfg.model.width, cfg.model.depth
    loss = (lr - 0.02) ** 2 * 1000 + (width - 48) ** 2 / 100 + depth / 10 + rng.gauss(0, 0.01)
    print(f"given: lr={lr} batch_size={bs} width={width} depth={depth}")
    print(f"val_loss: {loss:.4f}")


if __name__ == "__main__":
    main()
"""

HYDRA_FILES = {
    "config/config.yaml": "defaults:\n  - model: small\n  - training: default\n  - _self_\n\n"
                          "seed: 0\n",
    "config/model/small.yaml": "width: 32\ndepth: 2\n",
    "config/model/big.yaml": "width: 256\ndepth: 12\n",
    "config/training/default.yaml": "learning_rate: 0.01   # peak\nbatch_size: 32\n"
                                    "max_epochs: 3\nlog_every: 10\n",
}

TABULAR_TRAIN = """\
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score

X, y = make_classification(n_samples=300, n_features=8, random_state=0)
X_train, X_val, y_train, y_val = X[:200], X[200:], y[:200], y[200:]
params = {"learning_rate": 0.1, "max_leaf_nodes": 31, "l2_regularization": 0.5}
booster = HistGradientBoostingClassifier(**params)
booster.fit(X_train, y_train)
clf = LogisticRegression(max_iter=1000, C=1.0)
clf.fit(X_train, y_train)
acc = (accuracy_score(y_val, booster.predict(X_val)) + accuracy_score(y_val, clf.predict(X_val)))
print(f"val_accuracy: {acc / 2:.4f}")
"""


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    (root / ".gitignore").write_text("outputs/\n")        # Hydra's run folders
    commit(root, "initial")
    return root


def commit(repo: Path, msg: str = "files") -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def rows(repo: Path, tag: str) -> list[str]:
    return (repo / ".autoresearch" / tag / "results.tsv").read_text().splitlines()[1:]


def night(repo: Path, tag: str, proposer: str, iterations: int):
    done = run_cli("run", "--tag", tag, "--proposer", proposer, "--iterations",
                   str(iterations), cwd=repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done


def test_a_hydra_config_is_composed_as_hydra_composes_it(tmp_path):
    """Packages (`group@pkg`, `# @package _global_`), a group file's own defaults, a plain
    config, `_self_` first (the files after it win), and a later file overriding a key."""
    from loop.script import hydra_config
    from loop.script.source import Script
    files = {
        "src/train.py": HYDRA_TRAIN.replace('config_path="config"', 'config_path="../conf"'),
        "conf/config.yaml": "defaults:\n  - _self_\n  - base\n  - model: big\n"
                            "  - optim@training.optimizer: adamw\n  - extra: tweaks\n\n"
                            "seed: 0\nlr_scale: 2.0\n",
        "conf/base.yaml": "lr_scale: 1.0\nwarmup: 100\n",
        "conf/model/big.yaml": "defaults:\n  - encoder: deep\n\nwidth: 256\n",
        "conf/model/encoder/deep.yaml": "layers: 12\n",
        "conf/optim/adamw.yaml": "lr: 0.0003\nbetas: [0.9, 0.95]\n",
        "conf/extra/tweaks.yaml": "# @package _global_\nwarmup: 50\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    app = hydra_config.app(tmp_path, Script("src/train.py", files["src/train.py"]))
    assert app is not None and app.primary == "conf/config.yaml"
    assert app.values == {"seed": "0", "lr_scale": "1.0", "warmup": "50",
                          "model.encoder.layers": "12", "model.width": "256",
                          "training.optimizer.lr": "0.0003"}
    assert app.where["warmup"] == "conf/extra/tweaks.yaml"


def test_a_hydra_app_is_searched_through_overrides_that_win_over_its_yaml(tmp_path,
                                                                          mlflow_uri):
    pytest.importorskip("hydra", reason="Hydra is not installed (the test extra: hydra-core)")
    repo = make_repo(tmp_path / "hydra", {"train.py": HYDRA_TRAIN, **HYDRA_FILES})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["flags"] == "autoresearch.flags.yaml" and task["flags_style"] == "hydra"
    # the composed config's keys by their path; length and cadence left out
    assert set(task["search_space"]) == {"model.width", "model.depth",
                                         "training.learning_rate", "training.batch_size"}
    assert "left out: training.max_epochs, training.log_every" in done.stdout
    assert "composes config/model/small.yaml, config/training/default.yaml" in done.stdout
    assert yaml.safe_load((repo / "autoresearch.flags.yaml").read_text()) == {
        "model.width": 32, "model.depth": 2, "training.learning_rate": 0.01,
        "training.batch_size": 32, "seed": "$AUTORESEARCH_SEED"}
    # a search space naming a composed key is accepted as written by hand
    task["search_space"] = {"training.learning_rate": {"log_range": [0.005, 0.04]}}
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    assert load_task(repo).search_space == task["search_space"]
    commit(repo, "autoresearch task")

    night(repo, "m", "mutate", iterations=2)
    table = rows(repo, "m")
    assert table[0].split("\t")[3] == "keep"
    for i, row in enumerate(table[1:], 1):
        lr = re.search(r"training\.learning_rate to ([^\s,;]+) \(was", row)
        assert lr and "in autoresearch.flags.yaml" in row, row
        log = "".join(p.read_text() for p in
                      (repo / ".autoresearch" / "m" / "logs").glob(f"*{i:04d}*"))
        # the override took effect where the run reads it, over config/training/default.yaml
        assert f"given: lr={float(lr[1])} " in log, log[-500:]


def test_dict_and_keyword_argument_settings_are_found_and_searched(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "tab", {"train.py": TABULAR_TRAIN})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert {"params.learning_rate", "params.max_leaf_nodes", "params.l2_regularization",
            "LogisticRegression.C"} <= set(task["search_space"])
    # the data the accuracy is measured on is not searched
    assert not {k for k in task["search_space"] if k.startswith("make_classification")}
    commit(repo, "autoresearch task")
    done = night(repo, "m", "mutate", iterations=2)    # not refused: "nothing to search"
    table = rows(repo, "m")
    assert len(table) == 3
    for row in table[1:]:
        assert re.search(r"Set (params\.\w+|LogisticRegression\.C) to .* in train\.py", row), row
    attempt = git(repo, "for-each-ref", "--format=%(refname)",
                  "refs/autoresearch/m/attempt-1").split()[0]
    diff = git(repo, "diff", f"{attempt}^", attempt, "--", "train.py")
    changed = [line for line in diff.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert 2 <= len(changed) <= 4, diff        # the settings' own lines, nothing else

    night(repo, "t", "tune", iterations=2)     # tune writes whole points of the same space
    for row in rows(repo, "t")[1:]:
        assert re.search(r"Set (params\.\w+|LogisticRegression\.C) to .* in train\.py", row), row


def test_a_refusal_for_nothing_to_search_names_the_settings_to_declare(tmp_path, mlflow_uri):
    """A hand-written task.yaml without search_space over a script whose settings are
    keyword arguments: refused before the baseline, naming them; declared, they are run."""
    repo = make_repo(tmp_path / "hand", {"train.py": TABULAR_TRAIN})
    task = {"name": "hand", "editable": ["train.py"], "run": "python train.py",
            "metric": {"name": "val_accuracy", "direction": "maximize"}, "time_budget_s": 60}
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    (repo / "autoresearch.yaml").write_text("task: .\n")
    commit(repo, "task")
    done = run_cli("run", "--tag", "x", "--proposer", "mutate", "--iterations", "1", cwd=repo)
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert "nothing to search" in line and "LogisticRegression.C" in line, line
    task["search_space"] = {"LogisticRegression.C": {"log_range": [0.01, 10.0]}}
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    commit(repo, "declare the space the refusal named")
    night(repo, "m", "mutate", iterations=1)
    assert re.search(r"Set LogisticRegression\.C to \S+ \(was 1\.0\) in train\.py",
                     rows(repo, "m")[1]), rows(repo, "m")
