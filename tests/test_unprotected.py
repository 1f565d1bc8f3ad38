"""A task without a protected grader (no `evaluate`, no `grader`) is graded by what its
script prints: status, report, the run's final line and an MLflow tag say so."""
from conftest import run_cli
from graded_toy import make_graded_repo
from loop.ui import status
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine
from loop.setup.task import load_task
from helpers import mlflow_runs

SAYS = "unprotected metric"


def one_night(repo, task="task"):
    stop = Engine(Config(task=task, tag="t", base_dir=repo, iterations=1,
                         judge=JudgeConfig(rule="strict")), out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message


def test_a_printed_metric_is_marked_unprotected_everywhere(toy_repo, mlflow_uri):
    assert not load_task(toy_repo / "task").protected_metric
    one_night(toy_repo)
    shown = run_cli("status", "--tag", "t", cwd=toy_repo)
    assert shown.returncode == 0, shown.stderr
    assert f"score (minimize); {SAYS}" in shown.stdout
    assert f"({SAYS})" in status.final_line(status.summary(toy_repo, "t"))
    md = run_cli("report", "--tag", "t", "--no-mlflow", cwd=toy_repo)
    assert f"**{SAYS}**" in md.stdout
    _, parents, _ = mlflow_runs(mlflow_uri)
    assert parents[0].data.tags["metric_protection"] == SAYS


def test_a_graded_metric_is_not(tmp_path, mlflow_uri):
    repo, _ = make_graded_repo(tmp_path)
    assert load_task(repo / "task").protected_metric
    one_night(repo)
    shown = run_cli("status", "--tag", "t", cwd=repo)
    assert shown.returncode == 0 and SAYS not in shown.stdout
    assert SAYS not in status.final_line(status.summary(repo, "t"))
    assert SAYS not in run_cli("report", "--tag", "t", "--no-mlflow", cwd=repo).stdout


def test_an_evaluate_step_reading_what_the_edited_code_wrote_is_unprotected(tmp_path):
    """MLAgentBench's vectorization: its eval.py reads the time train.py itself wrote into
    submission.csv; the adapter says so (`unprotected:`), and the engine shows it."""
    repo, _ = make_graded_repo(tmp_path)
    yaml_path = repo / "task" / "task.yaml"
    yaml_path.write_text(yaml_path.read_text() + "unprotected: the score is the run time the "
                                                  "edited train.py writes\n")
    assert not load_task(repo / "task").protected_metric
