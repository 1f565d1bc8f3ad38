"""The candidate's code is what runs (loop/run/spec.py `code_first`): a repo installed as its
README says (`pip install -e .`: a package plus scripts) imports the package from the run's
checkout, not from the user's working folder the editable install points at, with the
sandbox (which hides that folder) and without. A real venv, a real editable install, real
git, real subprocesses."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import git
from loop.run import sandbox
from loop.run.check import check_task
from loop.run.process import Limits
from loop.run.spec import RunJob, code_first, make_spec
from loop.setup.task import load_task
from loop.words import RunKey

TASK = """\
name: pkg
editable: [mypkg/settings.py]
run: .venv/bin/python scripts/train.py
metric: {name: val_loss, direction: minimize}
time_budget_s: 30
env: {PYTHONPATH: extra}
"""


def commit(repo: Path, msg: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", msg)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A repo whose package `mypkg` is installed editable (offline, no build isolation) in
    the repo's own .venv; its script lives in scripts/, so the script's folder on sys.path
    does not find the package."""
    repo = tmp_path_factory.mktemp("installed") / "repo"
    (repo / "mypkg").mkdir(parents=True)
    (repo / "scripts").mkdir()
    (repo / "mypkg" / "__init__.py").write_text("from mypkg.settings import VALUE\n")
    (repo / "mypkg" / "settings.py").write_text("VALUE = 1.0\n")
    (repo / "scripts" / "train.py").write_text(
        "import mypkg\nprint('from', mypkg.__file__)\nprint(f'val_loss: {mypkg.VALUE}')\n")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "mypkg"\nversion = "0.1"\n[tool.setuptools]\npackages = ["mypkg"]\n')
    (repo / ".gitignore").write_text(".venv/\n*.egg-info/\n__pycache__/\nbuild/\n")
    (repo / "task.yaml").write_text(TASK)
    # a bare venv that sees the engine's packages (pip, a setuptools that builds editable
    # wheels): quick, and offline
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "engine.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(repo / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--no-build-isolation", "--no-deps", "--no-index", "-e", "."], cwd=repo,
                   check=True, capture_output=True)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "a package and its script")
    return repo


def candidate_checked(repo: Path, mode: str, value: float):
    """HEAD holds the candidate's edit (VALUE = value); the user's working folder, which the
    editable install points at, still says 1.0 (uncommitted). check-task runs HEAD."""
    (repo / "mypkg" / "settings.py").write_text(f"VALUE = {value}\n")
    commit(repo, "the candidate's edit")
    (repo / "mypkg" / "settings.py").write_text("VALUE = 1.0\n")
    try:
        return check_task(repo, out=lambda line: None, limits=Limits(sandbox=mode))[1]
    finally:
        git(repo, "checkout", "-q", "--", ".")


@pytest.mark.parametrize("mode,value", [("off", 0.5), ("required", 0.25)])
def test_an_editable_install_runs_the_candidates_package(installed, mode, value):
    if mode == "required" and not sandbox.active("auto"):
        pytest.skip("bwrap does not work here")
    outside = subprocess.run([str(installed / ".venv" / "bin" / "python"), "-c",
                              "import mypkg; print(mypkg.__file__)"], cwd="/",
                             capture_output=True, text=True, check=True).stdout
    assert outside.startswith(str(installed / "mypkg"))   # the install points at the checkout
    result = candidate_checked(installed, mode, value)
    # outside the sandbox the checkout's 1.0; inside it, `No module named 'mypkg'`
    assert (result.status, result.metric) == ("ok", value), result.detail


def test_the_worktree_comes_first_and_the_tasks_path_after(tmp_path):
    """Training's path: the task folder, the checkout's root, its src/; the grader's: the
    same places in its own copy; the task's `env` PYTHONPATH last."""
    root = tmp_path / "wt"
    (root / "sub" / "src").mkdir(parents=True)
    (root / ".git").write_text("gitdir: elsewhere\n")     # a worktree's marker
    env = code_first({"PYTHONPATH": "extra"}, root / "sub", root / "sub")
    assert env["PYTHONPATH"].split(":") == [str(root / "sub"), str(root),
                                            str(root / "sub" / "src"), "extra"]
    grader = code_first({}, root / "sub", tmp_path / "grader" / "sub")
    assert grader["PYTHONPATH"].split(":") == [str(tmp_path / "grader" / "sub"),
                                               str(tmp_path / "grader"),
                                               str(tmp_path / "grader" / "sub" / "src")]


def test_the_spec_of_a_run_puts_its_folder_first(tmp_path, installed):
    task = load_task(installed)
    job = RunJob.make(1, RunKey.candidate(0), "c", "r", 0, tmp_path / "l", tmp_path / "run")
    spec = make_spec(job, task, installed, tmp_path / "grader")
    assert spec.env["PYTHONPATH"] == f"{installed}:extra"
