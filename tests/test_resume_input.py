"""Bad input found before anything is touched, and a resume that stays consistent."""
import os
import subprocess
import sys

import pytest

from conftest import TOY_TASK, TOY_TRAIN, git, make_repo, run_cli
from loop.errors import UsageError

ARGS = ("run", "--task", "task", "--tag", "t", "--judge", "strict")


def test_resuming_a_tag_with_another_task_is_refused(tmp_path, mlflow_uri):
    other = TOY_TASK.replace("direction: minimize", "direction: maximize")
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                         "grade.py": "#\n"})
    for rel, text in {"task.yaml": other, "train.py": TOY_TRAIN, "grade.py": "#\n"}.items():
        (repo / "other" / rel).parent.mkdir(exist_ok=True)
        (repo / "other" / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "other")
    assert run_cli(*ARGS, "--iterations", "1", cwd=repo).returncode == 0
    results = (repo / ".autoresearch" / "t" / "results.tsv").read_text()
    again = run_cli("run", "--task", "other", "--tag", "t", "--iterations", "2", cwd=repo)
    assert again.returncode == 2
    assert "tag 't' was started on task task (score, minimize)" in again.stderr
    assert "other (score, maximize)" in again.stderr and "Traceback" not in again.stderr
    assert (repo / ".autoresearch" / "t" / "results.tsv").read_text() == results


@pytest.mark.parametrize("run, message", [
    ("python missing.py", "'missing.py' not found in the task folder"),
    ("python untracked.py", "'untracked.py' is not committed"),
    ("no-such-program --fast", "program 'no-such-program' not found on PATH"),
])
def test_a_run_command_that_cannot_work_is_refused_before_anything_exists(
        tmp_path, mlflow_uri, run, message):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK.replace("python train.py", run),
                                         "train.py": TOY_TRAIN, "grade.py": "#\n"})
    (repo / "task" / "untracked.py").write_text("print('score: 1')\n")
    result = run_cli(*ARGS, "--iterations", "1", cwd=repo)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (repo / ".autoresearch").exists()
    assert git(repo, "branch", "--list", "autoresearch/*") == ""
    assert not (tmp_path / "mlflow.db").exists()


def test_the_default_store_leaves_the_checkout_clean(toy_repo, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = run_cli(*ARGS, "--iterations", "1", cwd=toy_repo, env=env)
    assert result.returncode == 0, result.stderr
    assert (toy_repo / "mlflow.db").is_file()
    assert not (toy_repo / "mlruns").exists(), "artifacts go next to the store"
    assert (toy_repo / "mlartifacts").is_dir()
    assert git(toy_repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_resume_line_and_results_mode(toy_repo, mlflow_uri):
    first = run_cli(*ARGS, "--iterations", "2", cwd=toy_repo)
    assert first.returncode == 0, first.stderr
    kept = int(first.stdout.split("\nkept ")[1].split()[0])
    again = run_cli(*ARGS, "--iterations", "3", cwd=toy_repo)
    assert f"baseline and 2 iterations done, {kept} kept" in again.stdout, again.stdout
    mode = (toy_repo / ".autoresearch" / "t" / "results.tsv").stat().st_mode & 0o777
    assert mode == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_unknown_key_messages_offer_only_real_keys(tmp_path):
    from loop.setup.config import load_config
    from loop.setup.task import load_task
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "train.py").write_text("")
    (folder / "task.yaml").write_text(TOY_TASK.replace("grace_s: 5", "grace_s: 5\nrot: x")
                                      .replace("protected: [grade.py]\n", ""))
    with pytest.raises(UsageError) as err:
        load_task(folder)
    allowed = str(err.value).split("allowed: ")[1].split(", ")
    assert "unknown key 'rot'" in str(err.value) and "root" not in allowed
    (tmp_path / "c.yaml").write_text("base_di: .\n")
    with pytest.raises(UsageError) as err:
        load_config(tmp_path / "c.yaml")
    assert "unknown key 'base_di'" in str(err.value) and "base_dir" not in str(err.value)


def test_ctrl_c_during_interpreter_exit_is_130():
    code = ("from loop.ui.cli import _exit_quietly_on_sigint\n_exit_quietly_on_sigint()\n"
            "import atexit, os, signal\n"
            "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 130 and "Traceback" not in out.stderr
