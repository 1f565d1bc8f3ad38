"""The README's main command, shortened: `autoresearch run` with no --config, in a copy of
this repository's layout, runs configs/default.yaml on experiments/tinylm (mutate proposer)."""
import csv
import os
import shutil
from pathlib import Path

import pytest

from conftest import git, run_cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_default_command_runs_the_loop_on_tinylm(tmp_path, mlflow_uri):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "configs", repo / "configs")
    shutil.copytree(ROOT / "experiments" / "tinylm", repo / "experiments" / "tinylm",
                    ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    shutil.copy(ROOT / "program.md", repo / "program.md")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "layout")
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri,
           "AUTORESEARCH_CACHE": str(tmp_path / "cache")}
    res = run_cli("run", "--tag", "smoke", "--iterations", "2", "--time-budget", "2",
                  cwd=repo, env=env, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "task experiments/tinylm, proposer mutate" in res.stdout
    with open(repo / ".autoresearch/smoke/results.tsv") as f:
        table = list(csv.DictReader(f, delimiter="\t"))
    assert [r["iteration"] for r in table] == ["0", "1", "2"]
    assert table[0]["status"] == "keep" and table[0]["runs"] == "3"   # noise judge default
    assert all(r["description"].startswith("Set ") for r in table[1:])
    assert all(1.0 < float(r["val_bpb"]) < 8.5 for r in table if r["status"] != "crash")
    kept = git(repo, "rev-list", "--count", "HEAD..autoresearch/smoke")
    assert int(kept) == sum(r["status"] == "keep" for r in table[1:])
    # the console tells the same story: repeats announced, kept counted after the baseline
    assert "[  0/2] run 2 of 3" in res.stdout and "[  0/2] run 3 of 3" in res.stdout
    assert f"kept {kept} of 2 iterations;" in res.stdout
