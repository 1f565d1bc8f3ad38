"""The loop end to end on a seconds-long task, with a real git repo and MLflow SQLite store."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TOY_TASK, git, make_repo, processes_with_env, run_cli
from helpers import as_from_a_terminal, assert_same_story, mlflow_runs, rows, wait_for
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine


def config(repo, **kw):
    kw.setdefault("iterations", 5)
    kw.setdefault("tag", "t")
    judge = kw.pop("judge", JudgeConfig(rule="strict"))
    return Config(task="task", base_dir=repo, judge=judge, **kw)


def test_loop_end_to_end(toy_repo, mlflow_uri):
    stop = Engine(config(toy_repo, iterations=6), out=lambda s: None).run()
    assert stop.reason == "iterations" and stop.exit_code == 0
    table = assert_same_story(toy_repo, mlflow_uri)
    assert len(table) == 7
    assert float(table[0]["score"]) == pytest.approx(8.0)
    scores = [float(r["score"]) for r in table if r["status"] == "keep"]
    assert scores == sorted(scores, reverse=True) and scores[-1] < 8.0   # strictly improving
    # the branch tip holds the best code, the user's checkout still the original
    best = git(toy_repo, "show", "autoresearch/t:task/train.py")
    assert best != (toy_repo / "task" / "train.py").read_text().rstrip("\n")
    assert git(toy_repo, "status", "--porcelain") == "?? mlflow.db" or \
        "train.py" not in git(toy_repo, "status", "--porcelain")
    client, parents, children = mlflow_runs(mlflow_uri)
    arts = [a.path for a in client.list_artifacts(children[1].info.run_id)]
    assert "diff.txt" in arts and "run.log" in arts
    assert children[1].data.params["program_sha"] != "none"
    history = client.get_metric_history(parents[0].info.run_id, "best_score")
    assert len(history) == 7 and history[-1].value == pytest.approx(scores[-1])


def test_resume_continues_where_it_stopped(toy_repo, mlflow_uri):
    Engine(config(toy_repo, iterations=2), out=lambda s: None).run()
    lines = []
    stop = Engine(config(toy_repo, iterations=4), out=lines.append).run()
    assert stop.reason == "iterations"
    table = assert_same_story(toy_repo, mlflow_uri)
    assert len(table) == 5                          # baseline + 4, baseline not re-run
    assert any(line.startswith("resume:") for line in lines)
    # a third start with the same budget has nothing left to do
    Engine(config(toy_repo, iterations=4), out=lambda s: None).run()
    assert len(rows(toy_repo)) == 5


def test_bad_edit_is_recorded_not_run(toy_repo, mlflow_uri):
    from loop.proposers.base import Proposal

    class Cheater:
        def propose(self, context):
            return Proposal("edit the grader", files={"grade.py": "print('score: 0')\n"})

    Engine(config(toy_repo, iterations=2, max_consecutive_failures=5), out=lambda s: None,
           proposer=Cheater()).run()
    table = rows(toy_repo)
    assert [r["status"] for r in table] == ["keep", "bad_edit", "bad_edit"]
    assert "protected" in table[1]["reason"]
    assert git(toy_repo, "rev-list", "--count", "main..autoresearch/t") == "0"


def test_consecutive_failures_stop_the_loop(toy_repo, mlflow_uri):
    from loop.proposers.base import Proposal

    class Breaker:
        def propose(self, context):
            return Proposal(f"crash {context.iteration}",
                            files={"train.py": f"raise SystemExit({context.iteration})\n"})

    stop = Engine(config(toy_repo, iterations=10, max_consecutive_failures=3),
                  out=lambda s: None, proposer=Breaker()).run()
    assert stop.reason == "failures" and stop.exit_code == 1
    table = assert_same_story(toy_repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "crash", "crash"]


SLOW_TRAIN = """\
import os, time
X = 3.0
Y = 2
def held():   # the test holds experiments here: all of them, or one run's
    try:
        text = open(os.environ["SLOW_FLAG"]).read()
    except OSError:
        return False
    return text == "all" or text == os.environ["AUTORESEARCH_RUN_ID"]
while held():
    time.sleep(0.05)
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2:.6f}")
"""


def _experiments_holding(flag) -> list[int]:
    """Live processes whose environment names our flag file (the experiment and its kids)."""
    return processes_with_env(f"SLOW_FLAG={flag}")


def _as_under_nohup():
    """`nohup autoresearch run &`: SIGHUP ignored before the engine starts."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _engine_mid_experiment(tmp_path, mlflow_uri, iterations: int, preexec_fn):
    """`autoresearch run` in its own process on a task whose experiments wait on a flag
    file ("all" holds them), returned once its first experiment is running."""
    flag = tmp_path / "slow"
    flag.write_text("all")
    task = TOY_TASK + f"env: {{SLOW_FLAG: '{flag}'}}\n"
    repo = make_repo(tmp_path / "repo", {"task.yaml": task, "train.py": SLOW_TRAIN,
                                         "grade.py": "# protected\n"})
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    proc = subprocess.Popen([sys.executable, "-m", "loop", "run", "--task", "task", "--tag", "t",
                             "--iterations", str(iterations), "--judge", "strict"], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=preexec_fn)
    journal = repo / ".autoresearch" / "t" / "journal.jsonl"
    assert wait_for(lambda: journal.exists() and '"begin"' in journal.read_text())
    time.sleep(1.0)                                     # the experiment is now sleeping
    return proc, repo, env, flag


def test_nohup_keeps_the_night_running_when_the_terminal_closes(tmp_path, mlflow_uri):
    """SIGHUP stops the loop cleanly, unless the user ignored it (nohup): then the night
    goes on to the end. The engine used to install its handler over nohup's SIG_IGN."""
    proc, _, _, flag = _engine_mid_experiment(tmp_path, mlflow_uri, 1, _as_under_nohup)
    proc.send_signal(signal.SIGHUP)                     # the terminal closed
    time.sleep(0.5)
    flag.write_text("none")                             # let the experiments finish
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "interrupted" not in out
    assert "done: 1 iteration" in out, out


@pytest.mark.parametrize("sig,expected_rc", [(signal.SIGINT, 130), (signal.SIGKILL, -9)])
def test_interrupted_mid_experiment_then_resumed(tmp_path, mlflow_uri, sig, expected_rc):
    """Stopped (Ctrl-C) or killed outright during an experiment, the loop resumes exactly."""
    proc, repo, env, flag = _engine_mid_experiment(tmp_path, mlflow_uri, 2,
                                                   as_from_a_terminal)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == expected_rc, out
    worktree_train = repo / ".autoresearch" / ".worktrees" / "t" / "task" / "train.py"
    if sig == signal.SIGINT:   # a clean stop leaves no experiment running
        assert wait_for(lambda: not _experiments_holding(flag), timeout=10)
        flag.write_text("none")
    else:                      # killed outright: its experiment goes with it, no resume needed
        assert wait_for(lambda: not _experiments_holding(flag), timeout=10)
        flag.write_text("none")
    # resume: the cut-off step is redone, nothing counted twice, no orphan left behind
    res = run_cli("run", "--task", "task", "--tag", "t", "--iterations", "2", "--judge", "strict",
                  "--time-budget", "10", cwd=repo, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not _experiments_holding(flag)
    if sig == signal.SIGINT:
        assert "interrupted" in out                     # it cleaned up itself
    else:
        assert "interrupted; redoing it" in res.stdout  # the resume rolled the step back
    assert worktree_train.exists()
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 3


def test_cli_status_json(toy_repo, mlflow_uri):
    Engine(config(toy_repo, iterations=2), out=lambda s: None).run()
    res = run_cli("status", "--json", cwd=toy_repo)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    for key in ("tag", "branch", "iterations", "kept", "best_metric", "metric_name",
                "direction", "results_tsv", "tracking_uri"):
        assert key in s
    assert s["tag"] == "t" and s["iterations"] == 2 and s["metric_name"] == "score"
    assert s["tracking_uri"] == mlflow_uri.replace("sqlite:///", "sqlite:///")
    assert run_cli("status", "--tag", "nope", cwd=toy_repo).returncode == 2
    from_subfolder = run_cli("status", "--json", cwd=toy_repo / "task")
    assert json.loads(from_subfolder.stdout)["tag"] == "t"
    report = run_cli("report", cwd=toy_repo)
    assert report.returncode == 0 and "| 2 |" in report.stdout


def test_a_running_tag_cannot_be_started_twice(toy_repo, mlflow_uri):
    from loop.errors import UsageError
    from loop.repo.taglock import TagLock
    held = TagLock(toy_repo / ".autoresearch" / "t" / "lock")
    held.acquire()
    with pytest.raises(UsageError, match="already running"):
        Engine(config(toy_repo, iterations=1), out=lambda s: None).run()
    held.release()
    assert Engine(config(toy_repo, iterations=1), out=lambda s: None).run().exit_code == 0


def test_discarded_attempts_leave_no_artifacts_behind(toy_repo, mlflow_uri):
    from loop.proposers.base import Proposal

    class WritesArtifacts:
        def propose(self, context):
            x = {1: "1.0", 2: "9.0"}[context.iteration]        # a keep, then a discard
            return Proposal(f"X={x}", files={"train.py": (
                f"import os\nX = {x}\nY = 2\n"
                "open(os.path.join(os.environ['AUTORESEARCH_ARTIFACT_DIR'], 'ckpt'), 'w')"
                ".write('w')\n"
                "print(f'score: {(X - 1) ** 2 + (Y - 4) ** 2}')\n")})

    Engine(config(toy_repo, iterations=2), out=lambda s: None, proposer=WritesArtifacts()).run()
    assert [r["status"] for r in rows(toy_repo)] == ["keep", "keep", "discard"]
    runs = toy_repo / ".autoresearch" / "t" / "runs"
    assert (runs / "0001-0" / "artifacts" / "ckpt").exists()      # the kept one's checkpoint
    assert not list(runs.glob("0002-*"))                          # the discarded one's: gone


def test_a_proposer_bug_costs_an_iteration_not_the_night(toy_repo, mlflow_uri):
    from loop.proposers.base import Proposal

    class Flaky:             # raises once, then proposes: the night goes on
        def propose(self, context):
            if context.iteration == 1:
                raise KeyError("oops")
            return Proposal(f"edit {context.iteration}",
                            files={"train.py": f"print('score: {context.iteration}')\n"})

    stop = Engine(config(toy_repo, iterations=3), out=lambda s: None, proposer=Flaky()).run()
    table = rows(toy_repo)
    assert stop.exit_code == 0 and stop.reason == "iterations"
    assert [r["status"] for r in table][:2] == ["keep", "bad_edit"] and len(table) == 4
    assert table[2]["status"] != "bad_edit" and float(table[2]["score"]) == 2
    assert "proposer raised KeyError" in table[1]["reason"]


def test_a_proposer_that_raises_the_same_way_twice_stops_the_night_with_exit_1(toy_repo,
                                                                                mlflow_uri):
    class Buggy:             # tune's KeyError on every lowercase setting, as seen
        def propose(self, context):
            raise KeyError("batch_size")

    stop = Engine(config(toy_repo, iterations=20), out=lambda s: None, proposer=Buggy()).run()
    table = rows(toy_repo)
    assert stop.reason == "proposer" and stop.exit_code == 1
    assert "failed twice in a row the same way (proposer raised KeyError: 'batch_size')" \
        in stop.message
    assert [r["status"] for r in table] == ["keep", "bad_edit", "bad_edit"]


def test_mlflow_failure_is_survived_and_repaired_on_resume(toy_repo, mlflow_uri, monkeypatch):
    from loop.state.tracking import Tracker
    real = Tracker._finish

    def flaky(self, rec, *args, **kw):
        if rec.iteration == 1:
            raise RuntimeError("database is locked")
        return real(self, rec, *args, **kw)

    monkeypatch.setattr(Tracker, "_finish", flaky)
    lines = []
    stop = Engine(config(toy_repo, iterations=2), out=lines.append).run()
    assert stop.exit_code == 0 and len(rows(toy_repo)) == 3       # the loop went on
    assert any("MLflow store unavailable" in line for line in lines)
    monkeypatch.setattr(Tracker, "_finish", real)
    Engine(config(toy_repo, iterations=2), out=lambda s: None).run()   # resume repairs it
    client, _, children = mlflow_runs(mlflow_uri)
    repaired = children[1]
    assert repaired.data.tags["status"] == rows(toy_repo)[1]["status"]
    assert "diff.txt" in {a.path for a in client.list_artifacts(repaired.info.run_id)}
    assert_same_story(toy_repo, mlflow_uri)
