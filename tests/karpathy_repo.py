"""A tiny CPU repo in karpathy/autoresearch's shape (tests/fixtures/karpathy_shape), copied
into a tmp git repo with its data prepared in a tmp cache (never ~/.cache)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import git

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "karpathy_shape"
FILES = ("program.md", "prepare.py", "train.py", "pyproject.toml", ".gitignore")


def data_dir(cache: Path) -> Path:
    """Where the fixture's prepare.py keeps its shards for AUTORESEARCH_CACHE=cache."""
    return cache / "tinyshape" / "data"


def val_file(cache: Path) -> Path:
    """The held-out split: its own file, which the training run must never read."""
    return data_dir(cache) / "shard_val.txt"


def prepare_data(cache: Path) -> None:
    """Run the fixture's own `python prepare.py` against `cache` (fast: generated text)."""
    env = {**os.environ, "AUTORESEARCH_CACHE": str(cache)}
    subprocess.run([sys.executable, str(FIXTURE / "prepare.py")], cwd=FIXTURE, env=env,
                   check=True, capture_output=True, text=True)


def make_karpathy_repo(root: Path, cache: Path, extra: dict[str, str] | None = None) -> Path:
    """A git repo at `root` with the fixture's files (plus `extra`: relative path -> text,
    e.g. a task.yaml) in one commit, and its data prepared under `cache`. Tests that run it
    must pass AUTORESEARCH_CACHE=cache to the process (the engine passes that variable on)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy(FIXTURE / name, root / name)
    for rel, text in (extra or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Tester", "-c", "user.email=t@example.com",
        "commit", "-qm", "initial tinyshape repo")
    prepare_data(cache)
    return root
