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

from conftest import git, require
from loop.run import sandbox
from loop.advice.check_task import check_task
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


GRADED_TASK = TASK.replace("run: .venv/bin/python scripts/train.py\n",
                           "run: .venv/bin/python -c 'print(1)'\n"
                           "evaluate: .venv/bin/python scripts/train.py\n"
                           "protected: [scripts/train.py]\n")


def commit(repo: Path, msg: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def editable_venv(venv: Path, project: Path) -> None:
    """A bare venv that sees the engine's packages (pip, a setuptools that builds editable
    wheels: quick, and offline), with `project` installed in it editable."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "engine.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--no-build-isolation", "--no-deps", "--no-index", "-e", "."], cwd=project,
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A repo whose package `mypkg` is installed editable (offline, no build isolation) in
    the repo's own .venv; its script lives in scripts/, so the script's folder on sys.path
    does not find the package."""
    return installed_repo(tmp_path_factory.mktemp("installed") / "repo", TASK)


@pytest.fixture(scope="module")
def installed_graded(tmp_path_factory) -> Path:
    """The same repo, its metric printed by a protected grading step that imports the
    package too (loop/run/graders/startup/: the grader's own start-up)."""
    return installed_repo(tmp_path_factory.mktemp("graded") / "repo", GRADED_TASK)


def installed_repo(repo: Path, task: str) -> Path:
    (repo / "mypkg").mkdir(parents=True)
    (repo / "scripts").mkdir()
    (repo / "mypkg" / "__init__.py").write_text("from mypkg.settings import VALUE\n")
    (repo / "mypkg" / "settings.py").write_text("VALUE = 1.0\n")
    (repo / "scripts" / "train.py").write_text(
        "import mypkg\nprint('from', mypkg.__file__)\nprint(f'val_loss: {mypkg.VALUE}')\n")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "mypkg"\nversion = "0.1"\n[tool.setuptools]\npackages = ["mypkg"]\n')
    (repo / ".gitignore").write_text(".venv/\n*.egg-info/\n__pycache__/\nbuild/\n")
    (repo / "task.yaml").write_text(task)
    editable_venv(repo / ".venv", repo)
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
    if mode == "required":
        require("sandbox", None if sandbox.active("auto") else "bwrap does not work here")
    outside = subprocess.run([str(installed / ".venv" / "bin" / "python"), "-c",
                              "import mypkg; print(mypkg.__file__)"], cwd="/",
                             capture_output=True, text=True, check=True).stdout
    assert outside.startswith(str(installed / "mypkg"))   # the install points at the checkout
    result = candidate_checked(installed, mode, value)
    # outside the sandbox the checkout's 1.0; inside it, `No module named 'mypkg'`
    assert (result.status, result.metric) == ("ok", value), result.detail


@pytest.mark.parametrize("mode,value", [("off", 0.5), ("required", 0.25)])
def test_a_grader_importing_the_package_gets_the_candidates(installed_graded, mode, value):
    """The grader's start-up puts its copy after the standard library, but still before
    site-packages and the editable install's finder: the package it imports is the
    candidate's, from its own copy of the commit."""
    if mode == "required":
        require("sandbox", None if sandbox.active("auto") else "bwrap does not work here")
    result = candidate_checked(installed_graded, mode, value)
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


def test_the_graders_python_starts_with_none_of_its_copy(tmp_path, installed_graded):
    """Every backend's spec (a slot, Ray, Slurm, check-task, finalize's re-measures):
    the grader's PYTHONPATH is the engine's start-up folder alone, its code folders in
    $AUTORESEARCH_GRADER_PATH, the task's protected globs beside them."""
    from loop.setup.graders import STARTUP
    task = load_task(installed_graded)
    job = RunJob.make(1, RunKey.candidate(0), "c", "r", 0, tmp_path / "l", tmp_path / "run")
    spec = make_spec(job, task, installed_graded, tmp_path / "grader")
    assert spec.grade is not None
    assert spec.grade.env["PYTHONPATH"] == str(STARTUP)
    assert spec.grade.env["AUTORESEARCH_GRADER_PATH"] == f"{tmp_path / 'grader'}:extra"
    assert spec.grade.env["AUTORESEARCH_GRADER_PROTECTED"] == "scripts/train.py"
    assert (STARTUP / "sitecustomize.py").is_file() and len(list(STARTUP.iterdir())) == 1
    assert spec.env["PYTHONPATH"] == f"{installed_graded}:extra"     # training: unchanged


# -- the failure's hint (loop/advice/uncommitted.py `import_line`) ----------------------------
def test_a_package_of_the_repo_that_does_not_import_is_named_with_what_to_check(installed):
    """`python -I` ignores PYTHONPATH: the run cannot see the repo's own package (in the
    sandbox, which hides the checkout the editable install points at)."""
    require("sandbox", None if sandbox.active("auto") else "bwrap does not work here")
    task = (installed / "task.yaml").read_text()
    (installed / "task.yaml").write_text(task.replace(".venv/bin/python scripts",
                                                      ".venv/bin/python -I scripts"))
    commit(installed, "an isolated python")
    said: list[str] = []
    try:
        result = check_task(installed, out=said.append, limits=Limits(sandbox="required"))[1]
    finally:
        (installed / "task.yaml").write_text(task)
        commit(installed, "back")
    assert result.status == "crash"
    assert said[-1] == (
        "check-task: the run could not import mypkg, yet mypkg is in the repository and the "
        "run's checkout comes first on its PYTHONPATH (the task folder, the repo's root, "
        "src/): is all of mypkg committed (a run has only committed files), and does `run` "
        "keep PYTHONPATH (no `cd` elsewhere, no python -I or -E)?")


def test_an_editable_install_the_sandbox_hides_is_named(tmp_path):
    """A library of another checkout under /tmp, installed editable: the sandbox hides it."""
    require("sandbox", None if sandbox.active("auto") else "bwrap does not work here")
    lib = tmp_path / "lib"
    (lib / "otherlib").mkdir(parents=True)
    (lib / "otherlib" / "__init__.py").write_text("VALUE = 1\n")
    (lib / "pyproject.toml").write_text('[project]\nname = "otherlib"\nversion = "0.1"\n'
                                        '[tool.setuptools]\npackages = ["otherlib"]\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("import otherlib\nprint(f'val_loss: {otherlib.VALUE}')\n")
    (repo / "task.yaml").write_text(TASK.replace("mypkg/settings.py", "train.py").replace(
        "scripts/train.py", "train.py"))
    (repo / ".gitignore").write_text(".venv/\n")
    editable_venv(repo / ".venv", lib)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "a script using another checkout's library")
    said: list[str] = []
    result = check_task(repo, out=said.append, limits=Limits(sandbox="required"))[1]
    assert result.status == "crash"
    assert said[-1] == (
        f"check-task: otherlib is an editable install (pip install -e) of {lib / 'otherlib'} "
        f"in the task's environment, which the sandbox hides from the run: install it there "
        f"without -e, or list {lib / 'otherlib'} under `read_only` in task.yaml")
