"""`autoresearch init` at the front door, on repos of the shapes issue 36 met (real tmp git
repos, the real CLI): flags only from what the run executes, metrics in a sentence or printed
twice, the script it read and where it looked, a package the script imports, and a next step
that runs."""
from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

from conftest import git, run_cli
from helpers import commit


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repo holding `files` (nested paths allowed), one commit."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    commit(root, "initial")
    return root


def task_of(repo: Path) -> dict:
    return yaml.safe_load((repo / "task.yaml").read_text())


# -- item 1: flags come from what the run executes ------------------------------------------------
ARGS_MODULE = """\
import argparse


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.01)
    return p.parse_args()


def download(n):
    print(f"downloaded {n}")


def _cli():
    p = argparse.ArgumentParser()
    p.add_argument("--num-shards", type=int, default=10)
    return p.parse_args()


if __name__ == "__main__":
    q = argparse.ArgumentParser()
    q.add_argument("--download-workers", type=int, default=8)
    download(_cli().num_shards)
"""

ARGS_SCRIPT = """\
from common import get_args
args = get_args()
print(f"val_loss: {(args.lr - 0.02) ** 2:.5f}")
"""


def test_flags_come_from_the_parser_the_run_calls_not_a_modules_own_main(tmp_path):
    """common.get_args() parses the run's command line: its --lr is a flag of the run;
    common.py's own `python common.py --num-shards N` (its __main__, and a function only
    that calls) is not."""
    repo = make_repo(tmp_path / "toy", {"train.py": ARGS_SCRIPT, "common.py": ARGS_MODULE})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    flags = yaml.safe_load((repo / "autoresearch.flags.yaml").read_text())
    assert flags == {"lr": 0.01}
    assert task_of(repo)["protected"] == ["common.py"]
    assert "lr" in task_of(repo)["search_space"]
