"""Bad input gets one clear line and exit code 2; good input loads into typed settings."""
import subprocess
import sys
import textwrap

import pytest

from conftest import TOY_TASK, run_cli
from loop.setup.config import load_config
from loop.errors import ConfigError, TaskError
from loop.setup.task import load_task


def write_task(tmp_path, yaml_text, files=("train.py", "grade.py")):
    folder = tmp_path / "task"
    folder.mkdir(exist_ok=True)
    (folder / "task.yaml").write_text(textwrap.dedent(yaml_text))
    for name in files:
        (folder / name).write_text("X = 1\n")
    return folder


@pytest.mark.parametrize("change,message", [
    (("editable: [train.py]", "editabel: [train.py]"), "unknown key 'editabel' (did you mean 'editable'?)"),
    (("direction: minimize", "direction: down"), "metric.direction must be minimize or maximize"),
    (("editable: [train.py]", "editable: [model.py]"), "editable file 'model.py' not found"),
    (("protected: [grade.py]", "protected: [train.py]"), "'train.py' is both editable and protected"),
    (("editable: [train.py]", "editable: [train.py, task.yaml]"),
     "editable names task.yaml, which is always protected"),
    (("editable: [train.py]", "editable: ['*.yaml', train.py]"),
     "editable names task.yaml, which is always protected"),
    (("protected: [grade.py]", "protected: [grade.py, train.py]"),
     "'train.py' is both editable and protected"),
    (("time_budget_s: 10", "time_budget_s: ten"), "time_budget_s: expected a number"),
    (("time_budget_s: 10", "time_budget_s: .inf"), "time_budget_s: expected a finite number"),
    (("time_budget_s: 10", "time_budget_s: .nan"), "time_budget_s: expected a finite number"),
    (("grace_s: 5", "grace_s: .inf"), "grace_s: expected a finite number"),
    (("run: python train.py\n", ""), "missing required key 'run'"),
    (("metric: {name: score, direction: minimize}", "metric: {name: score, pattern: '(unclosed'}"),
     "metric.pattern is not a valid regex"),
    (("metric: {name: score, direction: minimize}", "metric: {name: score, pattern: 'score'}"),
     "needs one capture group"),
    (("name: toy", "name: [toy"), "invalid YAML"),
])
def test_bad_task_yaml_gives_one_line(tmp_path, change, message):
    folder = write_task(tmp_path, TOY_TASK.replace(*change))
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_task_folder(tmp_path):
    with pytest.raises(TaskError, match="task folder not found"):
        load_task(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match="no task.yaml"):
        load_task(tmp_path / "empty")


def test_good_task_loads(tmp_path):
    task = load_task(write_task(tmp_path, TOY_TASK))
    assert task.metric.direction == "minimize" and task.editable == ("train.py",)
    assert task.is_editable("train.py") and task.is_protected("grade.py")
    assert task.check_edit_path("../outside.py") and task.check_edit_path("task.yaml")
    assert task.check_edit_path("train.py") is None


@pytest.mark.parametrize("text,message", [
    ("iteratons: 5\n", "unknown key 'iteratons' (did you mean 'iterations'?)"),
    ("proposer: {kind: gpt}\n", "proposer.kind must be one of mutate, tune, llm"),
    ("proposer: {kind: llm}\n", "no proposer.model is set"),
    ("proposer: {modle: x}\n", "unknown key 'modle' (did you mean 'model'?)"),
    ("judge: {rule: lenient}\n", "judge.rule must be one of"),
    ("proposer: {patience_s: -1}\n", "proposer.patience_s must be >= 0"),
    ("proposer: {stall_s: 0}\n", "proposer.stall_s must be a finite number of seconds > 0"),
    ("proposer: {max_tokens: 0}\n", "proposer.max_tokens must be >= 1"),
    ("iterations: many\n", "iterations: expected an integer"),
    ("time_budget_s: .inf\n", "time_budget_s: expected a finite number"),
    ("max_wall_s: .nan\n", "max_wall_s: expected a finite number"),
    ("tag: 'bad tag'\n", "tag 'bad tag' must be letters"),
    ("- a list\n", "expected a mapping"),
])
def test_bad_config_gives_one_line(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_config_overrides_and_defaults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: t\niterations: 3\nproposer: {kind: llm, model: a}\n")
    cfg = load_config(path).with_overrides(iterations=7, proposer_model="b", tag=None,
                                           proposer_timeout_s=900.0, proposer_max_tokens=2048)
    assert (cfg.iterations, cfg.proposer.model, cfg.proposer.kind) == (7, "b", "llm")
    assert (cfg.proposer.timeout_s, cfg.proposer.max_tokens) == (900.0, 2048)  # the flags
    assert cfg.resolve("t") == (tmp_path / "t").resolve()


def test_cli_bad_input_exits_2_with_one_line(tmp_path, toy_repo):
    bad = tmp_path / "bad.yaml"
    bad.write_text("iteratons: 5\n")
    res = run_cli("run", "--config", str(bad), cwd=toy_repo)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "unknown key 'iteratons'" in res.stderr
    res = run_cli("run", "--task", "missing", cwd=toy_repo)
    assert res.returncode == 2 and "task folder not found" in res.stderr
    res = run_cli("run", "--task", "task", "--proposer", "llm", cwd=toy_repo)
    assert res.returncode == 2 and "no proposer.model" in res.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_a_time_budget_that_never_ends_is_refused_in_one_line(toy_repo, value):
    for args in (("run", "--task", "task", f"--time-budget={value}"),
                 ("run", "--task", "task", f"--max-wall={value}"),
                 ("run", "--task", "task", f"--llm-timeout={value}"),
                 ("check-task", "task", f"--time-budget={value}")):
        res = run_cli(*args, cwd=toy_repo)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert res.stderr.count("\n") == 1 and "finite number of seconds > 0" in res.stderr
        assert not (toy_repo / ".autoresearch").exists()      # nothing started
    with pytest.raises(ConfigError, match="time_budget_s must be a finite number"):
        load_config(None).with_overrides(time_budget_s=float("nan"))


def test_uncommitted_task_is_refused(tmp_path):
    from conftest import git
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x")
    folder = write_task(repo, TOY_TASK)
    res = run_cli("run", "--task", str(folder), cwd=repo)
    assert res.returncode == 2 and "is not committed" in res.stderr


def test_help_is_instant_and_imports_nothing_heavy():
    code = ("import sys; from loop.ui.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('mlflow', 'torch', 'openai', 'git') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in out.stdout


def test_every_option_says_what_it_does():
    from loop.ui.cli import build_parser
    parser = build_parser()
    missing = []

    def walk(p, path):
        for action in p._actions:
            if action.option_strings and action.dest != "help" and not action.help:
                missing.append(f"{path} {action.option_strings[0]}")
            if isinstance(action.choices, dict):            # subcommands
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
    walk(parser, "autoresearch")
    assert missing == []
    help_text = subprocess.run([sys.executable, "-m", "loop", "run", "--help"],
                               capture_output=True, text=True).stdout
    help_text = " ".join(help_text.split())           # argparse wraps lines
    assert "offline random search" in help_text and "beat the measured" in help_text
