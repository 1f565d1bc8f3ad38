"""`--backend slurm` on a real one-node Slurm cluster (tests/slurm_cluster.py starts it, or
skips with the reason): a 2-slot night where every run is a Slurm job, a job cancelled with
`scancel` mid-run, and the engine killed with SIGKILL and resumed with jobs in flight."""
from __future__ import annotations

import subprocess

import pytest

from slurm_cluster import slurm_cluster  # noqa: F401  (the fixture)
from test_engine import _wait_for, assert_same_story
from test_scheduler import Scripted, ended, gated_repo, journal, run_in_thread
from loop.engine.engine import Engine
from loop.run.backends.slurm import extra_lines, job_name, time_limit_min
from loop.setup.config import Config, JudgeConfig

pytestmark = pytest.mark.slow


def sacct(name: str) -> list[dict]:
    """The jobs of one job name, as sacct shows them (one line per job, not its steps)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1hour",
                          "-o", "JobID,State,ExitCode"], capture_output=True, text=True,
                         check=True).stdout
    return [dict(zip(("id", "state", "exit"), line.split("|"))) for line in out.splitlines()]


def queued(name: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "--name", name, "-o", "%i %T"], capture_output=True,
                         text=True, check=True).stdout
    return out.split("\n") if out.strip() else []


def _name(repo, tag="t"):
    return job_name(repo / ".autoresearch" / ".slots" / tag)


def test_two_slot_night_every_run_a_job(tmp_path, mlflow_uri, slurm_cluster):
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 2.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 backend="slurm", judge=JudgeConfig(rule="strict"))
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=Scripted(edits)))
    assert _wait_for(lambda: ended(repo, 0), timeout=120), "\n".join(lines)
    # iterations 1 and 2 are both staged on the baseline: two jobs in the queue at once
    assert _wait_for(lambda: len(queued(_name(repo))) == 2, timeout=60), "\n".join(lines)
    for n in (1, 2):        # in order: 2 ran on the baseline, so it is run again on 1's keep
        (gates / str(n)).write_text("")
        assert _wait_for(lambda: ended(repo, n), timeout=120), "\n".join(lines)
    thread.join(240)
    assert not thread.is_alive()
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep"]
    assert float(table[2]["score"]) == 5.0       # 3 + 2: both kept, merged
    logs = sorted(p.name for p in (repo / ".autoresearch/t/logs").glob("*.log")
                  if not p.name.endswith(".grade.log"))
    assert len(logs) == 4       # the baseline, 1, 2 on the baseline, 2 again on 1's keep
    # the accounting record of a job that just ended reaches sacct a moment later
    assert _wait_for(lambda: len(sacct(_name(repo))) == len(logs), timeout=30)
    jobs = sacct(_name(repo))
    assert [j["state"] for j in jobs] == ["COMPLETED"] * len(logs), (jobs, logs)
    assert queued(_name(repo)) == []


def test_sbatch_options_from_the_config():
    assert extra_lines(["--constraint=a100", "#SBATCH --exclusive", "--reservation night"]) == \
        {"constraint": "a100", "exclusive": True, "reservation": "night"}

    class Task:
        time_budget_s, grace_s, grade_command, grade_timeout_s = 300.0, 30.0, "x", 120.0
    assert time_limit_min(Task) == 10     # 300 + 30 + 120 + 120 s of margin, in minutes
