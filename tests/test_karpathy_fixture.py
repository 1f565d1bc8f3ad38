"""The karpathy-shaped fixture itself: it prepares its data outside git, keeps the val split
in its own file, and its unmodified train.py prints the summary block the engine reads."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import git
from karpathy_repo import data_dir, make_karpathy_repo, val_file


def test_repo_is_committed_and_data_prepared_outside_it(tmp_path):
    repo = make_karpathy_repo(tmp_path / "repo", tmp_path / "cache")
    assert git(repo, "status", "--porcelain") == ""
    assert sorted(git(repo, "ls-files").split()) == [
        ".gitignore", "prepare.py", "program.md", "pyproject.toml", "train.py"]
    assert val_file(tmp_path / "cache").stat().st_size > 10_000
    assert sorted(p.name for p in data_dir(tmp_path / "cache").iterdir()) == [
        "shard_00000.txt", "shard_00001.txt", "shard_val.txt"]
    assert "if __name__" not in (repo / "train.py").read_text()  # like karpathy's: no guard


@pytest.mark.slow
def test_train_prints_the_summary_block(tmp_path):
    repo = make_karpathy_repo(tmp_path / "repo", tmp_path / "cache")
    env = {**os.environ, "AUTORESEARCH_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "train.py"], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = out.stdout.split("\n---\n")[-1]
    bpb = float(re.search(r"^val_bpb:\s+([\d.]+)$", summary, re.M).group(1))
    assert 0.5 < bpb < 8.0                     # learned something, not random (log2(257) ~ 8)
    for key in ("training_seconds", "peak_vram_mb", "num_steps", "depth"):
        assert re.search(rf"^{key}:\s+[\d.]+$", summary, re.M), key
