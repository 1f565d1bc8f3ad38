"""Protected grading: task keys, the guard's checks, the loop graded by its evaluate step."""
import csv
import sys

import pytest

from conftest import git, run_cli
from graded_toy import EVALUATE, TASK, baseline_error, make_graded_repo, make_private
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine
from loop.errors import TaskError
from loop.advice.check_task import check_task
from loop.run.grading import Guard, copy_task
from loop.run.process import experiment_env
from loop.run.runner import run_experiment
from loop.run.spec import PRIVATE_ENV, GradeStep, RunJob, RunSpec, make_spec, run_envs
from loop.setup.task import load_task
from loop.words import RunKey


def a_job(tmp_path) -> RunJob:
    return RunJob.make(0, RunKey.candidate(0), "", "run-x", 0, tmp_path / "log", tmp_path)


def rows(repo, tag="g"):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def write_task(folder, yaml_text, files=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml_text)
    for name, text in (files or {"train.py": "print(1)\n", "evaluate.py": "print(2)\n"}).items():
        (folder / name).write_text(text)
    return folder


BASE = """\
name: t
editable: [train.py]
protected: [evaluate.py]
run: python train.py
evaluate: python evaluate.py
metric: {name: score, direction: maximize}
"""


# -- task.yaml keys --------------------------------------------------------------------
def test_private_resolves_absolute_relative_and_from_a_variable(tmp_path, monkeypatch):
    private = make_private(tmp_path / "held")
    task = load_task(write_task(tmp_path / "a", BASE + f"private: {private}\n"))
    assert task.private_dir == private.resolve()
    task = load_task(write_task(tmp_path / "b", BASE + "private: ../held\n"))
    assert task.private_dir == private.resolve()
    monkeypatch.setenv("HELD_OUT", str(private))
    task = load_task(write_task(tmp_path / "c", BASE + "private: ${HELD_OUT}\n"))
    assert task.private_dir == private.resolve()
    # the worktree copy of a task resolves a relative path against the user's task folder
    copy = copy_task(tmp_path / "b", tmp_path / "deep" / "copy")
    assert load_task(copy, origin=tmp_path / "b").private_dir == private.resolve()


def test_env_values_expand_variables_so_task_yaml_names_no_machine_path(tmp_path, monkeypatch):
    text = BASE + "env: {DATA_DIR: '${DATA_ROOT_T}/public', PATTERN: '^a$'}\n"
    monkeypatch.delenv("DATA_ROOT_T", raising=False)
    with pytest.raises(TaskError, match="env.DATA_DIR: .* needs the environment variable "
                                        "DATA_ROOT_T, which is not set"):
        load_task(write_task(tmp_path / "a", text))
    monkeypatch.setenv("DATA_ROOT_T", str(tmp_path / "data"))
    task = load_task(tmp_path / "a")
    assert task.env == {"DATA_DIR": f"{tmp_path}/data/public", "PATTERN": "^a$"}


@pytest.mark.parametrize("extra,message", [
    ("private: ${NOT_SET_ANYWHERE}\n", "not set"),
    ("private: /no/such/folder\n", "private folder not found"),
    ("private: inside\n", "inside the task folder"),
    ("private: ..\n", "task folder is inside the private folder"),
    ("private: ../held\nenv: {LABELS: '{held}'}\n", "only the evaluate step"),
    ("artifact: ../escape.csv\n", "artifact must be a file name"),
    ("grader_env: ['NOT A NAME']\n", "not an environment variable name"),
])
def test_grading_keys_are_validated(tmp_path, extra, message):
    held = make_private(tmp_path / "held")
    folder = write_task(tmp_path / "task", BASE + extra.replace("{held}", str(held.resolve())))
    (folder / "inside").mkdir()
    with pytest.raises(TaskError, match=message):
        load_task(folder)


def test_an_editable_grader_is_rejected(tmp_path):
    text = BASE.replace("editable: [train.py]", "editable: ['*.py']").replace(
        "protected: [evaluate.py]", "protected: []")
    with pytest.raises(TaskError, match="evaluate runs 'evaluate.py', which is editable"):
        load_task(write_task(tmp_path / "t", text))


# -- the guard ---------------------------------------------------------------------------
def test_guard_catches_modified_deleted_and_replaced_protected_files(tmp_path):
    repo, private = make_graded_repo(tmp_path)
    task = load_task(repo / "task")
    guard = Guard(task, repo / "task")
    run = copy_task(repo / "task", tmp_path / "run")
    assert guard.check_folder(run) is None
    (run / "evaluate.py").write_text("print('error: 0')\n")
    assert guard.check_folder(run) == "modified protected file evaluate.py"
    (run / "evaluate.py").unlink()
    assert guard.check_folder(run) == "deleted protected file evaluate.py"
    (run / "fake.py").write_text(EVALUATE)
    (run / "evaluate.py").symlink_to(run / "fake.py")       # same bytes, but a symlink
    assert guard.check_folder(run) == "replaced protected file evaluate.py"
    assert guard.check_private() is None
    (private / "answers.txt").write_text("0\n0\n0\n0\n0\n")
    assert "private data" in guard.check_private()


def test_guard_refuses_private_data_tracked_by_git(tmp_path):
    repo, _ = make_graded_repo(tmp_path)
    tracked = make_private(repo / "labels")
    git(repo, "add", "labels")
    task = load_task(repo / "task")
    from dataclasses import replace
    with pytest.raises(Exception, match="tracked by git"):
        Guard(replace(task, private=str(tracked)), repo / "task", repo)


def test_private_dir_reaches_the_grader_only(tmp_path):
    repo, private = make_graded_repo(tmp_path)
    task = load_task(repo / "task")
    env, grader = run_envs(task, a_job(tmp_path), tmp_path / "artifacts")
    assert PRIVATE_ENV not in env and not any(str(private) in v for v in env.values())
    assert grader[PRIVATE_ENV] == str(private.resolve())
    # what only the grader is told of is hidden from training by the sandbox
    spec = make_spec(a_job(tmp_path), task, repo / "task", tmp_path / "grader")
    assert str(private.resolve()) in spec.hidden


def test_pass_env_reaches_both_steps_grader_env_only_the_grader(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_API_KEY", "agent-secret")
    monkeypatch.setenv("JUDGE_API_KEY", "judge-secret")
    task = load_task(write_task(tmp_path / "t", BASE + "pass_env: [AGENT_API_KEY]\n"
                                                      "grader_env: [JUDGE_API_KEY]\n"))
    run_env, grader = run_envs(task, a_job(tmp_path), tmp_path / "artifacts")
    assert run_env["AGENT_API_KEY"] == "agent-secret" and "JUDGE_API_KEY" not in run_env
    assert grader["JUDGE_API_KEY"] == "judge-secret" and grader["AGENT_API_KEY"] == "agent-secret"
    assert "JUDGE_API_KEY" not in experiment_env({})            # scrubbed by default


def test_runner_stops_before_grading_when_the_check_says_so(tmp_path):
    (tmp_path / "job.py").write_text("print('score: 1')\n")
    (tmp_path / "grade.py").write_text("print('score: 2')\n")
    calls = []

    def check():
        calls.append(1)
        return "no_metric", "artifact x not written"
    env = experiment_env()
    res = run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, env, 10,
                                 tmp_path / "log", r"^score: (\S+)$", r"^mem: (\S+)$",
                                 GradeStep(f"{sys.executable} grade.py", tmp_path, env, 10)),
                         after_run=check)
    assert (res.status, res.metric, res.detail) == ("no_metric", None, "artifact x not written")
    assert calls == [1] and "artifact x not written" in (tmp_path / "log").read_text()


# -- the loop, graded ----------------------------------------------------------------------
def test_loop_is_graded_by_the_evaluate_step(tmp_path, mlflow_uri):
    repo, _ = make_graded_repo(tmp_path)
    cfg = Config(task="task", tag="g", iterations=4, base_dir=repo,
                 judge=JudgeConfig(rule="strict"))
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    table = rows(repo)
    assert float(table[0]["error"]) == pytest.approx(baseline_error(), abs=1e-5)
    kept = [float(r["error"]) for r in table if r["status"] == "keep"]
    assert kept == sorted(kept, reverse=True)
    for r in table:   # every metric is the grader's: the one the kept train.py earns
        assert r["status"] in ("keep", "discard"), r
    log = (repo / ".autoresearch/g/logs/iter-0000.log").read_text()
    assert "=== evaluate: python evaluate.py ===" in log


def test_check_task_runs_the_baseline_at_head(tmp_path):
    repo, _ = make_graded_repo(tmp_path)
    lines = []
    task, result = check_task(repo / "task", out=lines.append)
    assert result.status == "ok" and result.metric == pytest.approx(baseline_error(), abs=1e-5)
    assert not list((repo / "task").glob("predictions*"))        # the folder is untouched
    res = run_cli("check-task", str(repo / "task"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "status ok" in res.stdout and "error" in res.stdout
    # an uncommitted edit is named, not run: HEAD is what the night runs
    (repo / "task" / "train.py").write_text("raise SystemExit(0)\n")
    res = run_cli("check-task", str(repo / "task"), cwd=tmp_path)
    assert res.returncode == 0 and "status ok" in res.stdout
    assert "differs from HEAD in task/train.py (modified, editable)" in res.stdout
    # a failing baseline exits 1, a broken task folder exits 2
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qam", "no output")
    res = run_cli("check-task", str(repo / "task"), cwd=tmp_path)
    assert res.returncode == 1 and "artifact predictions.txt not written" in res.stdout
    (repo / "task" / "task.yaml").write_text(TASK.format(private="/no/such/dir"))
    res = run_cli("check-task", str(repo / "task"), cwd=tmp_path)
    assert res.returncode == 2 and "private folder not found" in res.stderr


def test_builtin_tasks_are_listed(tmp_path):
    res = run_cli("tasks", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name, direction in (("tinylm", "minimize"), ("classify", "maximize"),
                            ("fastsum", "minimize")):
        line = next(l for l in res.stdout.splitlines() if l.startswith(name))
        assert direction in line


# -- the built-in graded tasks ---------------------------------------------------------------
EXPERIMENTS = __import__("pathlib").Path(__file__).resolve().parent.parent / "experiments"


def test_classify_is_graded_from_its_submission_file(tmp_path):
    task = load_task(EXPERIMENTS / "classify")
    assert (task.metric.name, task.metric.direction, task.artifact) == \
        ("accuracy", "maximize", "submission.csv")
    # train.py may print any accuracy it likes; the grader's test accuracy is the metric
    copy = copy_task(EXPERIMENTS / "classify", tmp_path / "classify")
    train = (copy / "train.py").read_text()
    (copy / "train.py").write_text(train.replace('print(f"epochs:', 'print("accuracy: 1.0")\n'
                                                                    '    print(f"epochs:'))
    _, faked = check_task(copy, out=lambda s: None)
    assert faked.status == "ok" and 0.4 < faked.metric < 0.9      # the baseline's, about 0.63
    # a submission with a missing row is not graded
    (copy / "train.py").write_text(train.replace("writer.writerows(zip(ids, preds))",
                                                 "writer.writerows(list(zip(ids, preds))[1:])"))
    _, short = check_task(copy, out=lambda s: None)
    assert short.status == "crash" and short.metric is None


def test_fastsum_wrong_output_is_a_crash_not_a_speedup(tmp_path):
    task, result = check_task(EXPERIMENTS / "fastsum", out=lambda s: None)
    assert (task.metric.name, task.metric.direction) == ("time_ms", "minimize")
    assert result.status == "ok" and result.metric > 0
    copy = copy_task(EXPERIMENTS / "fastsum", tmp_path / "fastsum")
    kernel = (copy / "kernel.py").read_text()
    (copy / "kernel.py").write_text(kernel.replace(
        "def prefix_sum(x: torch.Tensor) -> torch.Tensor:",
        "def prefix_sum(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()  # fast, wrong\n"
        "\n\ndef _old(x):").replace('if __name__ == "__main__":', "if False:"))
    lines = []
    _, wrong = check_task(copy, out=lines.append)
    assert wrong.status == "crash" and wrong.metric is None
    assert any("wrong output" in line for line in lines)


@pytest.mark.slow
def test_tinylm_metric_is_the_graders_not_train_pys(tmp_path, mlflow_uri):
    """A fake val_bpb from train.py changes nothing (a print, an exit hook): the lm grader
    computes val_bpb from the handed-over model; a patched prepare.evaluate_bpb never hands
    one over, a crash (tests/test_lm_cheats.py has every cheat on a karpathy-shaped repo)."""
    from conftest import make_repo
    from loop.proposers.base import Proposal
    src = EXPERIMENTS / "tinylm"
    repo = make_repo(tmp_path / "repo", {p.name: p.read_text() for p in src.iterdir()
                                         if p.is_file() and p.suffix in (".py", ".yaml")})
    train = (repo / "task" / "train.py").read_text()
    faked = train.replace("import prepare\n", "import prepare\nprint('val_bpb: 0.01')\n"
                          "import atexit; atexit.register(print, 'val_bpb: 0.01')\n", 1)
    assert faked != train

    class Faker:
        def propose(self, context):
            return Proposal("print a fake val_bpb", files={"train.py": faked})
    cfg = Config(task="task", tag="lm", iterations=1, base_dir=repo, time_budget_s=3.0,
                 judge=JudgeConfig(rule="strict"))
    Engine(cfg, out=lambda s: None, proposer=Faker()).run()
    table = rows(repo, "lm")
    assert table[0]["status"] == "keep" and float(table[0]["val_bpb"]) > 1.0
    # graded, and by the grader: whether it is kept is up to training noise, not the fake
    assert table[1]["status"] in ("keep", "discard") and float(table[1]["val_bpb"]) > 1.0
    log = (repo / ".autoresearch/lm/logs/iter-0001.log").read_text()
    assert "val_bpb: 0.01" in log and "tokens_per_second" in log and "mfu_percent" in log


# -- the grader's own time limit ---------------------------------------------------------------
def test_a_grader_that_runs_out_is_a_grading_timeout_not_killed_at_the_time_budget(tmp_path):
    """Training finished well inside its budget; the grader hangs past grade_timeout_s. The
    reason names the grader and its limit; the training budget does not bound the grader."""
    folder = write_task(tmp_path / "t", BASE + "time_budget_s: 1\ngrace_s: 1\n"
                        "grade_timeout_s: 4\n",
                        {"train.py": "print('trained')\n",
                         "evaluate.py": "import time\nprint('grading', flush=True)\n"
                                        "time.sleep(2.5)\nprint('score: 0.5')\n"})
    _, result = check_task(folder, out=lambda line: None)
    assert result.status == "ok" and result.metric == 0.5   # 2.5 s > budget + grace, < 4 s

    (folder / "task.yaml").write_text(BASE + "time_budget_s: 1\ngrace_s: 1\ngrade_timeout_s: 1\n")
    _, result = check_task(folder, out=lambda line: None)
    assert result.status == "timeout"
    assert "grading timed out" in result.detail and "grade_timeout_s (1s)" in result.detail
    assert "killed at the time budget" not in result.detail


@pytest.mark.parametrize("value", ["0", "-1", ".inf", ".nan"])
def test_grade_timeout_must_be_a_positive_finite_number(tmp_path, value):
    with pytest.raises(TaskError, match=r"grade_timeout_s(: expected a finite number| must be)"):
        load_task(write_task(tmp_path / "t", BASE + f"grade_timeout_s: {value}\n"))
