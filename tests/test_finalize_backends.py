"""`finalize` on the remote backends: every run a Ray task (local mode, `ray.init(num_cpus=2)`)
or a Slurm job on a real one-node cluster (tests/slurm_cluster.py), two slots, the check at
scale included; the verdicts are the local backend's and each measurement is made once."""
from __future__ import annotations

import dataclasses
import subprocess

import pytest

from finalize_nights import DROP_BIAS, RAISE_LR, lr_repo, measures, night, report, verdicts
from helpers import wait_for
from loop.finalize.morning import finalize
from loop.run.backends.remote import PREFIX
from loop.run.backends.slurm import job_name
from slurm_cluster import slurm_cluster  # noqa: F401  (the fixture)

JOURNALS = ("finalize.jsonl", "finalize-x10.jsonl")


def finalized_on(tmp_path, backend: str):
    """A night kept RAISE_LR and DROP_BIAS (locally); finalize --scale 10 on `backend`, with
    no cap on its runs (the default quarter of the night's may leave the gain unmeasured)."""
    repo = lr_repo(tmp_path / "repo")
    cfg = night(repo, [RAISE_LR, DROP_BIAS])
    lines: list[str] = []
    code = finalize(dataclasses.replace(cfg, backend=backend, workers=2), out=lines.append,
                    share=None, scale=10)      # no run budget: every verdict and the gain
    assert code == 0, "\n".join(lines)
    return repo, lines


def assert_finalized(repo) -> list[dict]:
    """Both changes matter at the night's box (+0.5, +0.3), and together they reverse at ten
    times it (-0.4 + 0.3); every run was made once, and succeeded. The runs' events."""
    assert verdicts(repo) == {"raise LR to 1.0": "matters", "drop BIAS": "matters"}
    assert "final vs start +0.8 ± 0" in report(repo)
    assert "At scale the gain REVERSED" in report(repo)
    events = []
    for name in JOURNALS:
        got = measures(repo, name=name)
        keys = [(e["tree"], e["k"]) for e in got]
        assert got and len(keys) == len(set(keys)), name
        assert all(e["value"] is not None for e in got), [e["detail"] for e in got]
        events += got
    logs = [p for folder in ("logs", "logs-x10")
            for p in (repo / ".autoresearch" / "n" / "finalize" / folder).glob("*.log")
            if not p.name.endswith(".grade.log")]
    assert len(logs) == len(events)
    for log in logs:                     # run on a node, in its folder: not in the worktree
        cwd = next(line for line in log.read_text().splitlines() if line.startswith("cwd:"))
        assert PREFIX in cwd and ".worktrees" not in cwd, cwd
    return events


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_finalize_on_ray(tmp_path, mlflow_uri, ray_local):
    repo, _ = finalized_on(tmp_path, "ray")
    assert_finalized(repo)


def sacct(name: str) -> list[str]:
    """The states of the jobs of one job name (one line per job, not its steps)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1hour",
                          "-o", "State"], capture_output=True, text=True, check=True).stdout
    return out.split()


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_finalize_on_slurm(tmp_path, mlflow_uri):
    repo, _ = finalized_on(tmp_path, "slurm")
    events = assert_finalized(repo)
    name = job_name(repo / ".autoresearch" / ".slots" / "n")
    # one job per run (the night ran locally: every job of the name is finalize's), each
    # completed; the accounting record of the last jobs reaches sacct a moment later
    assert wait_for(lambda: len(sacct(name)) == len(events), timeout=60), \
        (sacct(name), len(events))
    assert set(sacct(name)) == {"COMPLETED"}
