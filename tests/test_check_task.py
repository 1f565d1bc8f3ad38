"""check-task runs what `run` runs: a throwaway worktree of HEAD (removed afterwards, also on
an interrupt), so what is only in the working folder is named instead of passing; outside
git a copy without environments or caches. Real git repos, real subprocesses, the sandbox
where it works."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import git, needs_sandbox, run_cli
from helpers import as_from_a_terminal
from loop.advice.check_task import check_task
from loop.advice.uncommitted import mentioned_paths

TASK = """\
name: t
editable: [train.py]
protected: [prepare.py]
run: python train.py
metric: {name: loss, direction: minimize}
time_budget_s: 20
"""
# Lists the folder it runs in, then reads its prepared data
TRAIN = """\
import json, os
import prepare
print("cwd:", json.dumps({"cwd": os.getcwd(), "ls": sorted(os.listdir("."))}), flush=True)
with open(os.path.join("data", "train.bin")) as f:
    print("loss:", len(f.read()) / 10)
"""


# Lists the folder it runs in, then fails: check-task shows a failed run's log
LIST = """\
import json, os
print("cwd:", json.dumps({"cwd": os.getcwd(), "ls": sorted(os.listdir("."))}), flush=True)
raise SystemExit(1)
"""


def commit(repo: Path, msg: str = "files", *paths: str) -> None:
    git(repo, "add", "-f", *(paths or ["-A"]))
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def repo_with_data(root: Path, data_committed: bool) -> Path:
    """A repo whose task reads data/train.bin and whose .venv (ignored) is large-ish."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "task.yaml").write_text(TASK)
    (root / "train.py").write_text(TRAIN)
    (root / "prepare.py").write_text("SEQ_LEN = 8\n")
    (root / ".gitignore").write_text(".venv/\n__pycache__/\n")
    (root / "data").mkdir()
    (root / "data" / "train.bin").write_text("x" * 42)
    venv = root / ".venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "big.bin").write_bytes(b"\0" * 2**20)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    commit(root, "task", "task.yaml", "train.py", "prepare.py", ".gitignore",
           *(["data/train.bin"] if data_committed else []))
    return root


def worktrees(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def assert_cleaned_up(repo: Path) -> None:
    assert worktrees(repo) == [str(repo)]
    assert git(repo, "worktree", "prune", "--dry-run", "-v") == ""
    assert not (repo / ".autoresearch").exists()


def ran_in(stdout: str) -> dict:
    line = next(line for line in stdout.splitlines() if "cwd: " in line)
    return json.loads(line.split("cwd: ", 1)[1])


def test_data_only_in_an_untracked_file_fails_and_is_named(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=False)
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FileNotFoundError" in res.stdout
    assert "check-task: the run needs data/train.bin, which is not committed (it exists only " \
           "in your working folder)" in res.stdout
    assert "status crash" in res.stdout
    assert_cleaned_up(repo)
    # committed, the same check passes
    commit(repo, "data", "data/train.bin")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 0 and "status ok; loss = 4.200000" in res.stdout, res.stdout
    assert "not committed" not in res.stdout and "differs from HEAD" not in res.stdout
    assert_cleaned_up(repo)


def test_the_run_uses_a_worktree_of_head_without_the_ignored_venv(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text(LIST)
    commit(repo, "list the folder", "train.py")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1 and "status crash" in res.stdout, res.stdout + res.stderr
    seen = ran_in(res.stdout)
    assert seen["ls"] == [".git", ".gitignore", "data", "prepare.py", "task.yaml", "train.py"]
    assert ".venv" not in seen["ls"]             # ignored: not in a checkout of HEAD
    assert Path(seen["cwd"]).parent == repo / ".autoresearch" / ".worktrees"   # where run's is
    assert "in a checkout of HEAD" in res.stdout
    assert_cleaned_up(repo)
    assert (repo / ".venv" / "lib" / "big.bin").is_file()      # the user's folder untouched


def test_uncommitted_edits_are_reported_and_head_is_what_runs(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text("raise SystemExit('the edit ran')\n")
    (repo / "prepare.py").write_text("SEQ_LEN = 9\n")
    lines: list[str] = []
    _, result = check_task(repo, out=lines.append)
    assert result.status == "ok" and result.metric == pytest.approx(4.2)   # HEAD's train.py
    dirty = [line for line in lines if "differs from HEAD" in line]
    assert dirty == ["check-task: your working folder differs from HEAD in prepare.py (modified, "
                     "protected), train.py (modified, editable): check-task tests HEAD, as run "
                     "does; commit to test your changes"]
    assert_cleaned_up(repo)


def test_an_uncommitted_helper_module_is_named(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text("import helpers.tokenize\nprint('loss: 1')\n")
    commit(repo, "train.py imports a helper", "train.py")
    (repo / "helpers").mkdir()
    (repo / "helpers" / "tokenize.py").write_text("")
    (repo / "helpers" / "__init__.py").write_text("")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1 and "No module named 'helpers'" in res.stdout, res.stdout
    assert "the run needs helpers, which is not committed" in res.stdout


def test_a_failure_naming_no_file_lists_what_the_checkout_lacks(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text("raise SystemExit(3)\n")
    commit(repo, "a failing train.py", "train.py")
    (repo / "notes.txt").write_text("scratch\n")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1
    line = next(line for line in res.stdout.splitlines() if "not in the run's checkout" in line)
    assert "notes.txt" in line and ".venv" not in line and "__pycache__" not in line


def test_a_task_folder_in_a_subfolder_names_repo_paths(tmp_path):
    repo = tmp_path / "repo"
    (repo / "task").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "task" / "task.yaml").write_text(TASK.replace("protected: [prepare.py]\n", ""))
    (repo / "task" / "train.py").write_text("print(open('../shared/vocab.txt').read())\n")
    commit(repo, "task")
    (repo / "shared").mkdir()
    (repo / "shared" / "vocab.txt").write_text("a b c\n")
    lines: list[str] = []
    _, result = check_task(repo / "task", out=lines.append)
    assert result.status == "crash"
    assert any(line.startswith("check-task: the run needs shared/vocab.txt, which is not "
                               "committed") for line in lines), lines
    assert_cleaned_up(repo)


def test_an_uncommitted_task_is_refused_as_run_refuses_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("x\n")
    commit(repo, "readme")
    (repo / "task.yaml").write_text(TASK)
    (repo / "train.py").write_text("print('loss: 1')\n")
    (repo / "prepare.py").write_text("")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 2
    assert "task.yaml is not committed" in res.stderr and len(res.stderr.splitlines()) == 1
    assert_cleaned_up(repo)


def test_the_worktree_is_removed_on_an_interrupt_and_after_a_kill(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text("import time\nopen('started', 'w').close()\n"
                                   "time.sleep(120)\n")
    commit(repo, "a slow train.py", "train.py")
    proc = subprocess.Popen([sys.executable, "-m", "loop", "check-task", ".", "--time-budget",
                             "200"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_from_a_terminal)
    marker = None
    for _ in range(600):                     # until the run has started (or the check ended)
        marker = next((repo / ".autoresearch" / ".worktrees").glob("*/started"), None) \
            if (repo / ".autoresearch" / ".worktrees").is_dir() else None
        if marker or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert marker is not None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert_cleaned_up(repo)
    # a check killed outright leaves its worktree: the next check removes it
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = repo / ".autoresearch" / ".worktrees" / f".check-{dead.pid}-0000"
    git(repo, "worktree", "add", "-q", "--detach", str(left), "HEAD")
    (repo / "train.py").write_text("print('loss: 1')\n")
    commit(repo, "a fast train.py", "train.py")
    _, result = check_task(repo, out=lambda line: None)
    assert result.status == "ok"
    assert_cleaned_up(repo)


def test_outside_git_a_copy_without_environments_or_caches_runs(tmp_path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.yaml").write_text(TASK)
    (folder / "train.py").write_text(LIST)
    (folder / "prepare.py").write_text("")
    (folder / "data").mkdir()
    for skipped in (".venv/lib", "venv/lib", "node_modules/x", "__pycache__", ".pytest_cache",
                    "env311/lib"):
        (folder / skipped).mkdir(parents=True)
        (folder / skipped / "f").write_text("x")
    (folder / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")   # a venv by any name
    lines: list[str] = []
    _, result = check_task(folder, out=lines.append)
    assert result.status == "crash"
    assert any("is not in a git repository: running a copy of the folder" in line
               for line in lines)
    seen = ran_in(next(line for line in lines if "cwd: " in line))
    assert seen["ls"] == ["data", "prepare.py", "task.yaml", "train.py"]
    assert not os.path.exists(seen["cwd"])       # the copy is removed


@pytest.mark.parametrize("line,path", [
    ("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'",
     "data/train.bin"),
    ("OSError: shards/val_000.npy not found.", "shards/val_000.npy"),
    ("cat: tokenizer/vocab.json: No such file or directory", "tokenizer/vocab.json"),
    ("python: can't open file '/w/.autoresearch/.worktrees/.check-1-a/prep.py': [Errno 2]",
     "/w/.autoresearch/.worktrees/.check-1-a/prep.py"),
    ("ModuleNotFoundError: No module named 'utils.io'", "utils/io.py"),
])
def test_not_found_lines_name_their_paths(line, path):
    assert path in mentioned_paths("Traceback (most recent call last):\n" + line + "\n")
    assert mentioned_paths("step 1: loss 2.0\nval_loss: 1.0\n") == []


def test_the_run_config_sets_the_sandbox_as_for_run(tmp_path):
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "autoresearch.yaml").write_text("task: .\nsandbox: off\n")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 0 and "warning: sandbox: off" in res.stdout, res.stdout
    res = run_cli("check-task", ".", "--sandbox", "auto", cwd=repo)
    assert res.returncode == 0 and "sandbox: off" not in res.stdout, res.stdout


@needs_sandbox
def test_data_the_sandbox_hides_is_named_with_the_env_that_shows_it(tmp_path):
    """Data kept by absolute path outside the repo, under a folder the sandbox empties
    (HOME, or /tmp where tmp_path is): the baseline would crash as check-task does, and
    check-task says why and what shows it, instead of only the traceback."""
    data = tmp_path / "mydata"
    data.mkdir()
    (data / "train.bin").write_text("x" * 42)
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text(f"with open({str(data / 'train.bin')!r}) as f:\n"
                                   f"    print('loss:', len(f.read()) / 10)\n")
    commit(repo, "data by absolute path", "train.py")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1 and "FileNotFoundError" in res.stdout, res.stdout + res.stderr
    assert (f"check-task: the run needs {data / 'train.bin'}, which the sandbox hides"
            in res.stdout), res.stdout
    assert f"`env: {{DATA_DIR: {data}}}`" in res.stdout
    (repo / "task.yaml").write_text(TASK + f"env: {{DATA_DIR: {data}}}\n")
    commit(repo, "show the data", "task.yaml")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 0 and "status ok; loss = 4.200000" in res.stdout, res.stdout
    assert_cleaned_up(repo)


def test_a_package_the_environment_lacks_is_named_with_how_to_install_it(tmp_path):
    """`No module named 'x'` for no file of the repo: the task's environment lacks a
    package. A uv project's .venv (what `uv run python` runs, never synced) says `uv sync`."""
    repo = repo_with_data(tmp_path / "repo", data_committed=True)
    (repo / "train.py").write_text("import not_a_package_here\nprint('loss: 1.0')\n")
    commit(repo, "a dependency", "train.py")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1 and "status crash" in res.stdout, res.stdout + res.stderr
    assert ("check-task: not_a_package_here is not installed in the engine's interpreter (the "
            "task runs plain `python`): install it there" in res.stdout), res.stdout
    # a uv project: its .venv, made without the package
    shutil.rmtree(repo / ".venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")],
                   check=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "t"\nversion = "0"\n')
    (repo / "uv.lock").write_text('version = 1\n')
    (repo / "task.yaml").write_text(TASK.replace("run: python", "run: uv run python"))
    commit(repo, "uv project", "pyproject.toml", "uv.lock", "task.yaml")
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1 and "status crash" in res.stdout, res.stdout + res.stderr
    assert (f"check-task: not_a_package_here is not installed in the task's environment "
            f"({repo / '.venv'}): `uv sync` in {repo} (runs use it as it is, offline)"
            in res.stdout), res.stdout
    assert_cleaned_up(repo)
