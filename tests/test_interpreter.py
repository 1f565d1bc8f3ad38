"""A task's own interpreter (loop/setup/interpreter.py): resolved once for init's probe,
check-task, runs and graders, offline; shown read-only in the sandbox wherever it lives
(a clone under /tmp, a clone under HOME), and nothing else of HOME; its VIRTUAL_ENV, never
the engine's. Real git clones, real venvs (`python -m venv --without-pip`: no network),
real bwrap."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import git, needs_sandbox
from loop.errors import TaskError, UsageError
from loop.run import sandbox
from loop.advice.check_task import check_task
from loop.run.spec import RunJob, make_spec, run_envs
from loop.setup import interpreter
from loop.setup.interpreter import resolve_command, roots
from loop.setup.task import load_task
from loop.words import RunKey

NO_SANDBOX = sandbox.unavailable()
ENGINE_VENV = "/opt/engine-venv-marker"      # the engine's own VIRTUAL_ENV in these tests

# The run checks, from inside, what it was given; any problem is its crash reason.
TRAIN = """\
import os, sys
from pathlib import Path
import tinydep                                  # installed in the repo's .venv only
problems = []
if not sys.prefix.endswith("/.venv"):
    problems.append(f"interpreter {sys.prefix}, not the repo's .venv")
if os.environ.get("VIRTUAL_ENV") != sys.prefix:
    problems.append(f"VIRTUAL_ENV={os.environ.get('VIRTUAL_ENV')}")
if any("engine-venv-marker" in v for v in os.environ.values()):
    problems.append("the engine's VIRTUAL_ENV reached the run")
for secret in (Path.home() / "secret.txt", Path(sys.prefix).parent / "train.py"):
    try:
        secret.read_text()
        problems.append(f"read {secret}")
    except OSError:
        pass
if problems:
    sys.exit("problems: " + "; ".join(problems))
Path(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "out.txt").write_text(str(tinydep.VALUE))
print(f"val_loss: {tinydep.VALUE}")
"""
EVALUATE = """\
import os, sys
from pathlib import Path
import tinydep
if os.environ.get("VIRTUAL_ENV") != sys.prefix or not sys.prefix.endswith("/.venv"):
    sys.exit(f"error: grader ran {sys.prefix} with VIRTUAL_ENV={os.environ.get('VIRTUAL_ENV')}")
got = Path(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "out.txt").read_text()
print(f"val_loss: {float(got) + 1}")
"""
TASK = """\
name: tinyuv
run: uv run python train.py
evaluate: uv run python evaluate.py
metric: {name: val_loss, direction: minimize}
editable: [train.py]
protected: [evaluate.py]
time_budget_s: 30
"""


def make_uv_repo(root: Path) -> Path:
    """The upstream: a uv project (pyproject.toml + uv.lock), committed, no environment."""
    root.mkdir(parents=True)
    files = {"pyproject.toml": '[project]\nname = "tinyuv"\nversion = "0.1.0"\n'
                               'requires-python = ">=3.10"\ndependencies = []\n',
             "uv.lock": 'version = 1\nrequires-python = ">=3.10"\n',
             ".gitignore": ".venv/\n", "train.py": TRAIN, "evaluate.py": EVALUATE,
             "task.yaml": TASK}
    for rel, text in files.items():
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "uv repo")
    return root


def clone(upstream: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(upstream), str(dest)], check=True)
    return dest


def make_venv(repo: Path, *flags: str) -> Path:
    """What `uv sync` leaves: <repo>/.venv, with the project's dependency installed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *flags, str(repo / ".venv")],
                   check=True)
    lib = next((repo / ".venv" / "lib").glob("python3*")) / "site-packages"
    (lib / "tinydep.py").write_text("VALUE = 0.25\n")
    return repo / ".venv"


@pytest.fixture
def outside_tmp():
    """A folder outside /tmp (which the sandbox empties anyway), for a fake HOME."""
    base = Path.home() / ".cache" / f"autoresearch-interp-test-{uuid.uuid4().hex[:8]}"
    base.mkdir(parents=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


# -- resolution ---------------------------------------------------------------------------------
def test_uv_run_forms_are_the_projects_venv(tmp_path, monkeypatch):
    monkeypatch.delenv("UV_PROJECT_ENVIRONMENT", raising=False)
    repo = make_uv_repo(tmp_path / "repo")
    venv = make_venv(repo)
    py = f"{venv}/bin/python"
    for given, want in [("uv run python train.py", f"{py} train.py"),
                        ("uv run python3 -u train.py", f"{py} -u train.py"),
                        ("uv run train.py --fast", f"{py} train.py --fast"),
                        ("uv run -m pkg.main", f"{py} -m pkg.main"),
                        ("uv run --frozen --extra cpu python train.py", f"{py} train.py"),
                        ("OMP_NUM_THREADS=1 uv run python t.py", f"OMP_NUM_THREADS=1 {py} t.py"),
                        ("uv run python a.py && uv run b.py", f"{py} a.py && uv run b.py"),
                        ("python train.py", "python train.py"),
                        ("bash go.sh", "bash go.sh")]:
        assert resolve_command(given, repo) == want, given
    sub = repo / "tasks" / "one"                 # a task folder inside the uv project
    sub.mkdir(parents=True)
    assert resolve_command("uv run python t.py", sub) == f"{py} t.py"
    other = make_venv(tmp_path / "elsewhere")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(other))
    assert resolve_command("uv run python t.py", repo) == f"{other}/bin/python t.py"


def test_a_missing_venv_is_one_line_asking_for_uv_sync(tmp_path):
    repo = clone(make_uv_repo(tmp_path / "upstream"), tmp_path / "clone")
    with pytest.raises(TaskError) as caught:
        load_task(repo)
    message = str(caught.value)
    assert "\n" not in message
    assert f"run: 'uv run python train.py' needs the project's environment: run `uv sync` " \
           f"in {repo} first" in message
    with pytest.raises(TaskError, match=r"`uv run --with rich` builds or picks another"):
        resolve_command("uv run --with rich python t.py", repo)
    make_venv(repo)
    with pytest.raises(TaskError, match=r"`uv run torchrun`: torchrun is not installed in "
                                        r"the project's environment"):
        resolve_command("uv run torchrun t.py", repo)


def test_uv_need_not_be_on_path_where_the_environment_is(tmp_path, monkeypatch):
    """Seen in CI on a machine without uv: `uv run python train.py` was refused as "program
    'uv' not found on PATH", though the run starts the project's .venv python, never uv."""
    from loop.setup.preflight import check_run_command
    repo = make_uv_repo(tmp_path / "repo")
    make_venv(repo)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))             # no uv, no anything
    task = load_task(repo)
    # as an lm grader's `python: uv run python` builds it, unresolved until the run
    check_run_command(replace(task, run="uv run python train.py"), ".", lambda rel: True)
    other = replace(task, run="nosuchprogram train.py")
    with pytest.raises(UsageError, match="run: program 'nosuchprogram' not found on PATH"):
        check_run_command(other, ".", lambda rel: True)


def test_relative_absolute_and_conda_interpreters(tmp_path):
    repo = make_uv_repo(tmp_path / "repo")
    venv = make_venv(repo)
    # `.venv/bin/python` is the checkout's, also where the folder has one (check-task's copy)
    assert resolve_command(".venv/bin/python train.py", repo) == f"{venv}/bin/python train.py"
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    assert resolve_command(".venv/bin/python t.py", repo, worktree) == f"{venv}/bin/python t.py"
    assert resolve_command("./go.sh", repo, repo) == "./go.sh"     # a committed script
    with pytest.raises(TaskError, match=r"run: env/bin/python not found in"):
        resolve_command("env/bin/python t.py", repo)
    conda = tmp_path / "miniconda3" / "envs" / "ml"
    (conda / "conda-meta").mkdir(parents=True)
    (conda / "bin").mkdir()
    (conda / "bin" / "python").symlink_to(sys.executable)
    command = resolve_command(f"{conda}/bin/python train.py", repo)
    assert command == f"{conda}/bin/python train.py"
    exe = interpreter.of_command(command)
    assert exe == conda / "bin" / "python" and str(conda) in roots(exe)
    assert interpreter.activation(exe) == {"CONDA_PREFIX": str(conda),
                                           "PATH_PREFIX": str(conda / "bin")}
    assert interpreter.of_command("python train.py") is None
    assert roots(None) == [] and interpreter.activation(None) == {}


def test_roots_follow_the_python_into_a_base_under_home_never_home_itself(tmp_path,
                                                                         monkeypatch):
    """A uv venv's python links to a uv-managed install under HOME: the venv and that
    install are shown, HOME itself never."""
    home = tmp_path / "home"
    base = home / ".local" / "share" / "uv" / "python" / "cpython-3.x" / "bin"
    base.mkdir(parents=True)
    (base / "python3.x").symlink_to(sys.executable)
    (base / "python3").symlink_to("python3.x")
    venv = home / "repo" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base}\ninclude-system-site-packages = true\n"
                                     f"version_info = 3.12.1\n")
    (venv / "bin" / "python").symlink_to(base / "python3")
    (home / "bin").mkdir()
    (home / "bin" / "python").symlink_to(sys.executable)
    (home / ".local" / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    found = roots(venv / "bin" / "python")
    assert found[:2] == [str(venv), str(base.parent)]
    assert str(home / ".local/lib/python3.12/site-packages") in found
    assert str(home) not in found and str(home / "repo") not in found
    assert str(home) not in roots(home / "bin" / "python")     # ~/bin/python: ~/bin only
    assert str(home / "bin") in roots(home / "bin" / "python")


def test_the_run_gets_its_interpreters_virtual_env_not_the_engines(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", ENGINE_VENV)
    monkeypatch.setenv("CONDA_PREFIX", "/opt/engine-conda")
    repo = make_uv_repo(tmp_path / "repo")
    venv = make_venv(repo)
    task = load_task(repo)
    assert task.run == f"{venv}/bin/python train.py"
    assert task.evaluate == f"{venv}/bin/python evaluate.py"
    job = RunJob.make(0, RunKey.candidate(0), "", "run-x", 0, tmp_path / "log", tmp_path)
    train, grader = run_envs(task, job, tmp_path / "artifacts")
    for env in (train, grader):
        assert env["VIRTUAL_ENV"] == str(venv) and "CONDA_PREFIX" not in env
        assert env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
    spec = make_spec(job, task, repo, tmp_path / "grader")
    assert str(venv) in spec.software
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("print('val_loss: 1')\n")
    (plain / "task.yaml").write_text("name: p\nrun: python train.py\nmetric: val_loss\n"
                                     "editable: [train.py]\n")
    train, _ = run_envs(load_task(plain), job, tmp_path / "artifacts")
    assert "VIRTUAL_ENV" not in train and "CONDA_PREFIX" not in train


def test_init_probes_with_the_venv_never_uv_run(tmp_path, monkeypatch):
    """init's probe of the protected module uses the interpreter a run gets: offline, no
    sync; with no .venv it says `uv sync` in one line."""
    repo = make_uv_repo(tmp_path / "repo")
    monkeypatch.setenv("PATH", "/nonexistent")          # no `uv` to call, were it called
    with pytest.raises(TaskError, match=r"^init: python: 'uv run python' needs the project's "
                                        r"environment: run `uv sync` in "):
        interpreter.argv("uv run python", repo)
    venv = make_venv(repo)
    words = interpreter.argv("uv run python", repo)
    assert words == [f"{venv}/bin/python"]
    done = subprocess.run([*words, "-c", "import tinydep, sys; print(sys.prefix)"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == str(venv), done.stderr
    assert interpreter.argv("python", repo) == [sys.executable]


# -- in the sandbox -----------------------------------------------------------------------------
@needs_sandbox
@pytest.mark.parametrize("where", ["tmp", "home"])
def test_a_uv_clone_runs_and_grades_in_the_sandbox(where, tmp_path, outside_tmp, monkeypatch):
    """`run: uv run python train.py` and `evaluate: uv run python evaluate.py` in a clone
    under /tmp, and in one under HOME (~/secret.txt beside it): both steps start with the
    repo's .venv and its packages, see its VIRTUAL_ENV and not the engine's, and read
    nothing else of HOME (train.py checks, and crashes on any of it)."""
    monkeypatch.setenv("VIRTUAL_ENV", ENGINE_VENV)
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(tmp_path / "cache"))
    upstream = make_uv_repo(tmp_path / "upstream")
    if where == "home":
        home = outside_tmp / "home"
        monkeypatch.setenv("HOME", str(home))
        repo = clone(upstream, home / "code" / "tinyuv")
        (home / "secret.txt").write_text("do not read\n")
    else:
        repo = clone(upstream, tmp_path / "clone")
    venv = make_venv(repo, "--system-site-packages")
    if where == "home":             # its python links into a uv-managed install under HOME
        base = home / ".local/share/uv/python/cpython-3-linux/bin"
        base.mkdir(parents=True)
        (base / "python3").symlink_to(os.path.realpath(sys.executable))
        for name in ("python", "python3"):
            (venv / "bin" / name).unlink()
        (venv / "bin" / "python3").symlink_to(base / "python3")
        (venv / "bin" / "python").symlink_to("python3")
    assert sandbox.active("required")
    lines: list[str] = []
    task, result = check_task(repo, out=lines.append)
    assert result.status == "ok", (result.detail, lines)
    assert result.metric == pytest.approx(1.25)          # tinydep's 0.25, plus the grader's 1
    assert task.run.startswith(f"{repo}/.venv/bin/python ")


@needs_sandbox
def test_without_the_interpreters_roots_the_sandbox_hides_the_venv(tmp_path):
    """What was broken: a clone under /tmp (or HOME) has its .venv hidden; the run is
    `not found` (exit 127) unless the sandbox is given the interpreter's roots."""
    repo = clone(make_uv_repo(tmp_path / "upstream"), tmp_path / "clone")
    venv = make_venv(repo)
    argv = ["/bin/sh", "-c", f"{venv}/bin/python -c 'import tinydep; print(tinydep.VALUE)'"]
    bare = subprocess.run(sandbox.wrap(argv, Path("/"), [], (), None), capture_output=True,
                          text=True)
    assert bare.returncode == 127, bare.stdout + bare.stderr
    shown = subprocess.run(sandbox.wrap(argv, Path("/"), [], (), None,
                                        readonly=roots(venv / "bin" / "python")),
                           capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.strip() == "0.25", shown.stderr


@pytest.mark.slow
@needs_sandbox
def test_the_lm_grader_with_uv_run_python_in_a_clone_under_home(tmp_path, outside_tmp,
                                                               monkeypatch):
    """The karpathy shape as init writes it for a uv repo (`grader.python: uv run python`),
    cloned under HOME: training hands its model over and the protected grader scores it,
    both with the clone's .venv (here given torch by a .pth to the engine's packages)."""
    import site
    from karpathy_repo import LM_TASK, make_karpathy_repo
    monkeypatch.setenv("VIRTUAL_ENV", ENGINE_VENV)
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    text = LM_TASK.replace("python: python", "python: uv run python")
    upstream = make_karpathy_repo(tmp_path / "upstream", cache, {
        "task.yaml": text, ".gitignore": "__pycache__/\n*.pyc\nrun.log\n.venv/\n"})
    home = outside_tmp / "home"
    monkeypatch.setenv("HOME", str(home))
    repo = clone(upstream, home / "tinyshape")
    venv = make_venv(repo)
    lib = next((venv / "lib").glob("python3*")) / "site-packages"
    (lib / "engine.pth").write_text(site.getsitepackages()[0] + "\n")
    lines: list[str] = []
    task, result = check_task(repo, out=lines.append)
    assert result.status == "ok", (result.detail, lines)
    assert 0.5 < result.metric < 8.0
    assert task.train_command.startswith(f"{venv}/bin/python ")
    assert task.grade_command.startswith(f"{venv}/bin/python ")
