"""`--backend slurm` on a real one-node Slurm cluster (tests/slurm_cluster.py starts it, or
skips with the reason): a 2-slot night where every run is a Slurm job, a job cancelled with
`scancel` mid-run, and the engine killed with SIGKILL and resumed with jobs in flight."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import TOY_TASK, TOY_TRAIN, make_repo, processes_with_env, require, run_cli
from slurm_cluster import slurm_cluster  # noqa: F401  (the fixture)
from graded_toy import baseline_error, make_graded_repo
from node_data import expected_error, hidden_by, make_world
from helpers import (GATED_TASK, GATED_TRAIN, EditsByIteration, as_from_a_terminal,
                     assert_same_story, ended, gated_repo, journal, rows, run_in_thread,
                     wait_for)
from loop.engine.engine import Engine
from loop.errors import ConfigError
from loop.run.backends.slurm import (SlurmBackend, extra_lines, job_name,
                                     sbatch_parameters, time_limit_min)
from loop.setup.config import Config, JudgeConfig, SlurmConfig, load_config



def sacct(name: str) -> list[dict]:
    """The jobs of one job name, as sacct shows them (one line per job, not its steps)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "--name", name, "-S", "now-1hour",
                          "-o", "JobID,State,ExitCode"], capture_output=True, text=True,
                         check=True).stdout
    return [dict(zip(("id", "state", "exit"), line.split("|"))) for line in out.splitlines()]


def queued(name: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "--name", name, "-o", "%i %T"], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def _name(repo, tag="t"):
    return job_name(repo / ".autoresearch" / ".slots" / tag)


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_two_slot_night_every_run_a_job(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 2.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 backend="slurm", judge=JudgeConfig(rule="strict"))
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    assert wait_for(lambda: ended(repo, 0), timeout=120), "\n".join(lines)
    # iterations 1 and 2 are both staged on the baseline: two jobs in the queue at once
    assert wait_for(lambda: len(queued(_name(repo))) == 2, timeout=60), "\n".join(lines)
    for n in (1, 2):        # in order: 2 ran on the baseline, so it is run again on 1's keep
        (gates / str(n)).write_text("")
        assert wait_for(lambda n=n: ended(repo, n), timeout=120), "\n".join(lines)
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
    assert wait_for(lambda: len(sacct(_name(repo))) == len(logs), timeout=30)
    jobs = sacct(_name(repo))
    assert [j["state"] for j in jobs] == ["COMPLETED"] * len(logs), (jobs, logs)
    assert queued(_name(repo)) == []


def _sleeping_job(name: str, seconds: int, folder: Path) -> str:
    """A plain job (its output file in `folder`, not in the cwd) of the backend's name."""
    out = subprocess.run(["sbatch", "--parsable", "--job-name", name, "--output",
                          str(folder / "slurm-%j.out"), "--wrap", f"sleep {seconds}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().split(";")[0]


@pytest.mark.usefixtures("slurm_cluster")
def test_closing_lets_a_job_whose_result_landed_end_before_cancelling_the_rest(tmp_path):
    """A job whose result was read is RUNNING or COMPLETING a moment longer while its process
    exits; the loop's end then cancelled it by name, and sacct said CANCELLED for a run that
    completed (CI saw it on the last run of a night). Closing now waits for such a job."""
    task = SimpleNamespace(time_budget_s=60.0, grace_s=5.0, grade_command="",
                           grade_timeout_s=60.0)
    guard = SimpleNamespace(private=None, held_out=(), held_out_digest=(), read_only=(),
                            read_only_digest=(), inputs=(), inputs_digest=())
    backend = SlurmBackend(None, task, "", guard, workers=1, slot_root=tmp_path / "t")
    try:
        # one that stands for a job whose result was read, one still queued or running
        landed = _sleeping_job(backend.name, 4, tmp_path)
        stray = _sleeping_job(backend.name, 300, tmp_path)
        assert wait_for(lambda: f"{landed} RUNNING" in queued(backend.name), timeout=30)
        backend._landed.add(landed)
        backend.close()
        assert wait_for(lambda: queued(backend.name) == [], timeout=30)
    finally:
        subprocess.run(["scancel", "--name", backend.name], check=False)
    assert wait_for(lambda: len(sacct(backend.name)) == 2, timeout=30)
    states = {j["id"]: j["state"] for j in sacct(backend.name)}
    assert states[landed] == "COMPLETED", states
    assert states[stray].startswith("CANCELLED"), states


def test_sbatch_options_from_the_config():
    assert extra_lines(["--constraint=a100", "#SBATCH --exclusive", "--reservation night"]) == \
        {"constraint": "a100", "exclusive": True, "reservation": "night"}

    class Task:
        time_budget_s, grace_s, grade_command, grade_timeout_s = 300.0, 30.0, "x", 120.0
    assert time_limit_min(Task) == 10     # 300 + 30 + 120 + 120 s of margin, in minutes


def _running(name: str) -> list[str]:
    return [line.split()[0] for line in queued(name) if line.endswith("RUNNING")]


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_job_cancelled_with_scancel_is_recorded_as_such(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 2.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=1,
                 backend="slurm", judge=JudgeConfig(rule="strict"))
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    assert wait_for(lambda: ended(repo, 0), timeout=120), "\n".join(lines)
    # iteration 1's run waits for its gate, inside a running job: cancel that job
    assert wait_for(lambda: processes_with_env(f"GATE_DIR={gates}")
                     and _running(_name(repo)), timeout=60), "\n".join(lines)
    [job_id] = _running(_name(repo))
    subprocess.run(["scancel", job_id], check=True)
    assert wait_for(lambda: ended(repo, 1), timeout=60), "\n".join(lines)
    (gates / "2").write_text("")
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"]
    assert f"slurm job {job_id} cancelled on the cluster (scancel)" in table[1]["reason"]
    assert float(table[2]["score"]) == 6.0          # the night went on
    assert wait_for(lambda: not processes_with_env(f"GATE_DIR={gates}"), timeout=15), \
        "the cancelled job's run outlived it"
    assert wait_for(lambda: any(j["id"] == job_id and j["state"].startswith("CANCELLED")
                                 for j in sacct(_name(repo))), timeout=30), sacct(_name(repo))


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_engine_killed_with_jobs_running_then_resumed(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    args = ["run", "--task", "task", "--tag", "t", "--iterations", "2", "--judge", "strict",
            "--workers", "2", "--backend", "slurm"]
    proc = subprocess.Popen([sys.executable, "-m", "loop", *args], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    name = _name(repo)
    try:
        assert wait_for(lambda: len(_running(name)) == 2, timeout=120)   # 1 and 2 wait
        left = _running(name)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -9
        assert sorted(_running(name)) == sorted(left)   # a killed engine's jobs run on ...
        resumed = subprocess.Popen([sys.executable, "-m", "loop", *args], cwd=repo, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        # ... until the resumed engine cancels them, before it runs those runs again
        assert wait_for(lambda: _cancelled(name, left), timeout=60)
        for n in (1, 2):
            (gates / str(n)).write_text("")
        out, _ = resumed.communicate(timeout=240)
    finally:
        proc.kill()
        subprocess.run(["scancel", "--name", name], check=False)
    assert resumed.returncode == 0, out
    assert out.count("interrupted; redoing it") == 2, out
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 3 and all(r["status"] in ("keep", "discard") for r in table), table
    assert queued(name) == []
    assert wait_for(lambda: not processes_with_env(f"GATE_DIR={gates}"), timeout=15)
    # slurmdbd learns a job's end a moment after slurmctld: wait for the record, then check it
    wait_for(lambda: _cancelled(name, left), timeout=30)
    jobs = sacct(name)
    assert sum(j["state"].startswith("CANCELLED") for j in jobs) == 2, jobs


def _cancelled(name: str, ids) -> bool:
    """Whether sacct records every job in `ids` as cancelled (a job it does not list yet is
    not: an empty answer must not pass)."""
    states = {j["id"]: j["state"] for j in sacct(name)}
    return all(states.get(i, "").startswith("CANCELLED") for i in ids)


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_job_pending_past_its_limit_is_cancelled_and_recorded(tmp_path, mlflow_uri):
    repo, _ = gated_repo(tmp_path)
    # --begin holds the job in the queue (reason BeginTime) as a busy partition would
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=0, backend="slurm",
                 slurm=SlurmConfig(extra=("--begin=now+1hour",), pending_limit_s=3))
    lines: list[str] = []
    Engine(cfg, out=lines.append).run()
    [baseline] = [e for e in journal(repo) if e["event"] == "end"]
    assert baseline["status"] == "crash", baseline
    assert "pending past slurm.pending_limit_s (3 s): BeginTime" in baseline["reason"], baseline
    assert "pending past" in (repo / ".autoresearch/t/results.tsv").read_text()
    assert queued(_name(repo)) == []


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_job_past_its_time_limit_is_recorded_as_such(tmp_path, mlflow_uri):
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "0").write_text("")
    # the run's own time box (300 s) is far past the job's (1 minute, from `extra`)
    repo = make_repo(tmp_path / "repo", {
        "task.yaml": GATED_TASK.replace("time_budget_s: 60", "time_budget_s: 300") % gates,
        "train.py": GATED_TRAIN, "grade.py": "# protected\n"})
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 2.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, backend="slurm",
                 judge=JudgeConfig(rule="strict"), slurm=SlurmConfig(extra=("--time=1",)))
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    assert wait_for(lambda: ended(repo, 1), timeout=240), "\n".join(lines)
    (gates / "2").write_text("")
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"], table
    assert "past its Slurm time limit" in table[1]["reason"], table
    assert wait_for(lambda: not processes_with_env(f"GATE_DIR={gates}"), timeout=15)


def test_the_slurm_section_of_a_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("backend: slurm\nslurm:\n  partition: gpu\n  gpus_per_run: 1\n"
                    "  mem_gb: 64\n  extra: ['--constraint=a100']\n")
    cfg = load_config(path)
    assert (cfg.backend, cfg.slurm.partition, cfg.slurm.gpus_per_run, cfg.slurm.extra) == \
        ("slurm", "gpu", 1, ("--constraint=a100",))
    params = sbatch_parameters(cfg.slurm, type("T", (), {
        "time_budget_s": 60.0, "grace_s": 5.0, "grade_command": None})(), "n")
    assert (params["partition"], params["gpus_per_node"], params["mem"], params["time"]) == \
        ("gpu", 1, "64GB", 4)
    path.write_text("slurm:\n  mem_gb: 0\n")
    with pytest.raises(ConfigError, match="slurm.mem_gb"):
        load_config(path)
    path.write_text("slurm:\n  partitions: gpu\n")
    with pytest.raises(ConfigError, match="partitions"):
        load_config(path)


def _node() -> str:
    return subprocess.run(["sinfo", "-h", "-o", "%n"], capture_output=True, text=True,
                          check=True).stdout.split()[0]


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_job_whose_node_fails_is_run_again(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 3.0")]}
    # --no-requeue: Slurm's own requeue (its default) would run it again, after ~2 minutes
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=1, backend="slurm",
                 judge=JudgeConfig(rule="strict"), slurm=SlurmConfig(extra=("--no-requeue",)))
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    node = _node()
    try:
        assert wait_for(lambda: ended(repo, 0), timeout=120), "\n".join(lines)
        assert wait_for(lambda: processes_with_env(f"GATE_DIR={gates}")
                         and _running(_name(repo)), timeout=60), "\n".join(lines)
        [first] = _running(_name(repo))
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down",
                        "reason=autoresearch-test"], check=True)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                       capture_output=True)
    # the run is submitted once more, and this time it finishes
    assert wait_for(lambda: [j for j in _running(_name(repo)) if j != first], timeout=90), \
        "\n".join(lines)
    (gates / "1").write_text("")
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep"], table
    assert wait_for(lambda: {j["id"]: j["state"] for j in sacct(_name(repo))}
                     .get(first) == "NODE_FAIL", timeout=30), sacct(_name(repo))


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_keeps_and_discards_as_the_local_backend_does(tmp_path, mlflow_uri):
    """The same seeded night on both backends: the same decisions, the same metrics."""
    stories = {}
    for backend in ("local", "slurm"):
        repo = make_repo(tmp_path / backend, {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                              "grade.py": "# protected harness\n"})
        cfg = Config(task="task", tag=backend, base_dir=repo, iterations=4, seed=3,
                     backend=backend, judge=JudgeConfig(rule="strict"))
        Engine(cfg, out=lambda line: None).run()
        table = assert_same_story(repo, mlflow_uri, tag=backend)
        stories[backend] = [(r["status"], r["score"], r["description"]) for r in table]
    assert stories["slurm"] == stories["local"]
    assert len(stories["slurm"]) == 5
    assert {"keep", "discard"} <= {status for status, _, _ in stories["slurm"][1:]}, stories


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_ctrl_c_cancels_the_nights_jobs(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    proc = subprocess.Popen([sys.executable, "-m", "loop", "run", "--task", "task", "--tag",
                             "t", "--iterations", "2", "--workers", "2", "--backend", "slurm"],
                            cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=as_from_a_terminal)
    name = _name(repo)
    try:
        assert wait_for(lambda: len(_running(name)) == 2, timeout=120)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        subprocess.run(["scancel", "--name", name], check=False)
    assert queued(name) == [], out
    assert wait_for(lambda: not processes_with_env(f"GATE_DIR={gates}"), timeout=15), out


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_a_protected_grading_task_gives_the_local_metric(tmp_path, mlflow_uri):
    """The grader runs in the job, from a pristine copy, against the private folder the job
    received; the metric is the one a local run gives."""
    repo, _ = make_graded_repo(tmp_path)
    Engine(Config(task="task", tag="t", base_dir=repo, iterations=0, backend="slurm"),
           out=lambda line: None).run()
    table = rows(repo)
    assert table[0]["status"] == "keep", table
    assert float(table[0]["error"]) == pytest.approx(baseline_error(), abs=1e-6)
    assert (repo / ".autoresearch/t/logs/iter-0000.grade.log").exists()


@pytest.mark.usefixtures("slurm_cluster")
def test_without_accounting_the_backend_refuses_to_start(tmp_path, mlflow_uri):
    """sacct against a cluster without slurmdbd fails; submitit would then never learn that a
    job ended without a result: a clear error at start instead (exit 2)."""
    conf = tmp_path / "etc" / "slurm.conf"
    conf.parent.mkdir()
    text = Path(os.environ["SLURM_CONF"]).read_text()
    conf.write_text(text.replace("AccountingStorageType=accounting_storage/slurmdbd",
                                 "AccountingStorageType=accounting_storage/none"))
    repo, _ = gated_repo(tmp_path)
    res = run_cli("run", "--task", "task", "--tag", "t", "--iterations", "0", "--backend",
                  "slurm", cwd=repo, env={**os.environ, "SLURM_CONF": str(conf),
                                          "MLFLOW_TRACKING_URI": mlflow_uri})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "needs Slurm accounting (slurmdbd): `sacct` fails here" in res.stderr, res.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_data_the_node_lacks_is_shipped_or_refused_at_start(tmp_path, mlflow_uri):
    """The engine runs in a bwrap mount namespace where the data folder holds the task's
    data; the Slurm node sees the real folder, empty: what is small is shipped (the held-out
    file put at its own path there) and graded with the local backend's metric; what is too
    big to ship is one line at start, exit 2, before any baseline."""
    require("sandbox", None if shutil.which("bwrap") else
            "bwrap is needed to show the engine a folder the node does not see")
    repo = make_world(tmp_path / "w")
    data, head = tmp_path / "w" / "data", tmp_path / "head-data"
    data.rename(head)
    data.mkdir()
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}

    def night(tag):
        argv = [sys.executable, "-m", "loop", "run", "--task", "task", "--tag", tag,
                "--iterations", "0", "--backend", "slurm"]
        return subprocess.run(hidden_by(head, data, argv), cwd=repo, env=env,
                              capture_output=True, text=True, timeout=240)

    with open(head / "ro" / "big.bin", "wb") as f:
        f.truncate(300 * 2**20)                   # sparse: no disk, and over the limit
    res = night("big")
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        f"autoresearch: error: node {_node()} cannot see {data / 'ro'} (300 MiB, over the "
        f"256 MiB shipped to a node); put it on a filesystem the nodes share"], res.stderr
    assert not (repo / ".autoresearch" / "big" / "results.tsv").exists()

    (head / "ro" / "big.bin").unlink()
    res = night("t")
    assert res.returncode == 0, res.stdout + res.stderr
    [base] = rows(repo, "t")
    assert base["status"] == "keep", base
    assert float(base["error"]) == pytest.approx(expected_error(), abs=1e-6)   # the local
    assert (data / "answers.txt").read_text() == (head / "answers.txt").read_text()
    assert queued(_name(repo)) == []
