"""Data caches a repo keeps under HOME by its own name (issue 29 item 6): init finds them in
the code (nothing run) and declares them (task.yaml `caches:`), runs see them read-only in
the sandbox, and a run that needed a HOME path it could not write or see is told which and
how to fix it. Every test sets HOME to a temp folder: nothing touches the real one."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import git, needs_sandbox, run_cli
from karpathy_repo import make_home_cache_repo
from loop.advice.home_cache import home_line
from loop.script.cache_paths import find, moved
from loop.script.source import Script
from loop.setup.task import load_task



@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HOME of the test's own, for this process and every process it starts."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("AUTORESEARCH_CACHE", raising=False)
    return folder


def commit(repo: Path, msg: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def prepare(repo: Path) -> None:
    """The repo's own prepare step, as its README says, before the night."""
    subprocess.run([sys.executable, "prepare.py"], cwd=repo, check=True, capture_output=True)


# -- what init finds in the code -----------------------------------------------------------------
CODE = """\
import os
from pathlib import Path
A = os.path.join(os.path.expanduser("~"), ".cache", "alpha", "data")
B = Path.home() / ".cache" / "beta"
C = os.environ.get("GAMMA_CACHE", os.path.expanduser("~/.cache/gamma"))
D = os.getenv("DELTA_HOME") or os.path.join(Path.home(), ".cache/delta")
ROOT = Path.home() / ".cache"
E = ROOT / "eps" / "tokenizer"
OWN = os.path.join(os.path.expanduser("~"), ".cache", "autoresearch")   # the engine's
MODELS = Path.home() / ".cache" / "huggingface"                           # shown already
OTHER = os.path.expanduser("~/data")                                      # not a cache
X = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "xi")
T = os.environ.get("TAU_DATA") or os.path.expanduser("~/.cache/tau/data")
"""


def test_the_caches_the_code_builds_from_home_are_found_with_their_variable():
    found = find([Script("prepare.py", CODE)])
    assert [(f.path, f.var) for f in found] == [
        ("~/.cache/alpha", ""), ("~/.cache/beta", ""), ("~/.cache/gamma", "GAMMA_CACHE"),
        ("~/.cache/delta", "DELTA_HOME"), ("~/.cache/eps", ""), ("~/.cache/xi", "XDG_CACHE_HOME"),
        ("~/.cache/tau", "TAU_DATA")]
    assert {f.file for f in found} == {"prepare.py"}
    # where each is when its variable is set: the variable stands for more or less of it
    by_var = {f.var: f for f in found if f.var}
    assert moved(by_var["GAMMA_CACHE"], "/big/g") == Path("/big/g")
    assert moved(by_var["XDG_CACHE_HOME"], "/big/cache") == Path("/big/cache/xi")
    assert moved(by_var["TAU_DATA"], "/big/tau/data") == Path("/big/tau")


def script_repo(root: Path) -> Path:
    """A plain script-shaped repo whose prepare.py fills ~/.cache/toydata and whose train.py
    reads it (its metric unprotected: no lm grader lists anything for it)."""
    root.mkdir(parents=True)
    (root / "prepare.py").write_text(textwrap.dedent("""\
        import os
        CACHE = os.environ.get("TOYDATA_CACHE", os.path.expanduser("~/.cache/toydata"))

        def numbers():
            with open(os.path.join(CACHE, "numbers.txt")) as f:
                return [float(x) for x in f.read().split()]

        if __name__ == "__main__":
            os.makedirs(CACHE, exist_ok=True)
            with open(os.path.join(CACHE, "numbers.txt"), "w") as f:
                f.write("1 2 3 4")
        """))
    (root / "train.py").write_text(textwrap.dedent("""\
        from prepare import numbers
        LR = 0.5
        xs = numbers()
        print(f"val_loss: {sum(xs) * LR / len(xs):.4f}")
        """))
    git(root, "init", "-q", "-b", "main")
    commit(root, "toy")
    return root


def test_init_before_the_prepare_step_says_to_run_it_and_writes_nothing(tmp_path, home):
    repo = script_repo(tmp_path / "toy")
    done = run_cli("init", cwd=repo)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.strip() == "autoresearch: error: " + (
        "init: prepare.py keeps its data in ~/.cache/toydata, which does not exist yet: "
        "prepare it first (`python prepare.py`), then run init again (runs see it "
        "read-only: no run may fill it)")
    assert not (repo / "task.yaml").exists()


def test_init_declares_the_cache_and_says_so(tmp_path, home):
    repo = script_repo(tmp_path / "toy")
    prepare(repo)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert ("  caches:     ~/.cache/toydata (found: prepare.py names it, moved by "
            "$TOYDATA_CACHE; shown read-only to runs; prepare it first with python "
            "prepare.py)") in done.stdout
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["caches"] == ["~/.cache/toydata"] and "pass_env" not in task
    assert load_task(repo).caches == (str(home / ".cache" / "toydata"),)


def test_a_cache_moved_by_its_variable_is_declared_where_it_is_and_passed(tmp_path, home,
                                                                         monkeypatch):
    moved = home / "big" / "toydata"
    monkeypatch.setenv("TOYDATA_CACHE", str(moved))
    repo = script_repo(tmp_path / "toy")
    prepare(repo)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["caches"] == ["~/big/toydata"] and task["pass_env"] == ["TOYDATA_CACHE"]


@pytest.mark.parametrize("value,said", [
    ("~/.cache/nothere", "caches: ~/.cache/nothere not found: fill it first "
                         "(python prepare.py); runs see it read-only"),
    ("$HOME", "caches: $HOME would show all of HOME to runs"),
    ("data", "caches: 'data' must be an absolute path or `~/...`"),
])
def test_a_bad_cache_is_refused_in_one_line(tmp_path, home, value, said):
    repo = script_repo(tmp_path / "toy")
    (repo / "task.yaml").write_text(f"name: toy\nrun: python train.py\neditable: [train.py]\n"
                                    f"metric: {{name: val_loss}}\ncaches: [{value}]\n")
    commit(repo, "task")
    done = run_cli("check-task", ".", cwd=repo)
    assert done.returncode == 2 and said in done.stderr, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# -- the hint after a failed run -----------------------------------------------------------------
def test_a_missing_home_path_is_named_with_the_prepare_step_and_the_key(home):
    repo = script_repo(home / "src" / "toy")        # a checkout under HOME, as most are
    task = type("T", (), {"caches": ()})()
    missing = home / ".cache" / "toydata" / "numbers.txt"
    log = f"FileNotFoundError: [Errno 2] No such file or directory: '{missing}'\n"
    assert home_line(log, repo, task, sandboxed=True, own=[repo]) == (
        f"check-task: the run needs {missing}, under $HOME, which does not exist on this "
        f"machine: make it first (python prepare.py) and declare its folder in task.yaml "
        f"(`caches: [~/.cache/toydata]`, shown read-only to runs)")
    inside = repo / "data" / "x.bin"          # the repo's own files are no cache
    assert home_line(f"No such file or directory: '{inside}'", repo, task, True,
                     own=[repo]) is None


def test_a_refused_write_naming_no_path_names_the_caches_and_the_prepare_step(home):
    repo = script_repo(home / "src" / "toy")
    task = type("T", (), {"caches": (str(home / ".cache" / "toydata"),)})()
    log = ("RuntimeError: [enforce fail at inline_container.cc:747] . open file failed with "
           "strerror: Read-only file system\n")
    assert home_line(log, repo, task, sandboxed=True, own=[repo]) == (
        "check-task: the run wrote where runs may not (Read-only file system): $HOME and the "
        "task's caches (~/.cache/toydata) are read-only to runs; fill a data cache before the "
        "night (python prepare.py) and declare it in task.yaml (`caches:`); a run writes "
        "only its own folder, $TMPDIR and $AUTORESEARCH_ARTIFACT_DIR")
    assert home_line(log, repo, task, sandboxed=False, own=[repo]) is None
    outside = "OSError: [Errno 30] Read-only file system: '/usr/lib/x'\n"   # not HOME's
    assert home_line(outside, repo, task, sandboxed=True, own=[repo]) is None


# -- under the sandbox ---------------------------------------------------------------------------
@needs_sandbox
def test_a_repo_making_its_cache_at_import_runs_with_init_task_and_not_without(tmp_path, home):
    """The issue's crash: prepare.py makes ~/.cache/<name> when imported (exist_ok), which
    the sandbox refuses when HOME is shown empty; init's `caches:` shows it."""
    repo = script_repo(tmp_path / "toy")
    text = (repo / "prepare.py").read_text().replace(
        "\ndef numbers", "\nos.makedirs(CACHE, exist_ok=True)          # at import\n\n"
        "def numbers", 1)
    (repo / "prepare.py").write_text(text)
    commit(repo, "make the cache at import")
    prepare(repo)
    assert run_cli("init", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    assert check.returncode == 0 and "status ok; val_loss = 1.250000" in check.stdout, \
        check.stdout + check.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    del task["caches"]
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    commit(repo, "no caches")
    check = run_cli("check-task", ".", cwd=repo)
    cache = home / ".cache" / "toydata"
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"OSError: [Errno 30] Read-only file system: '{cache}'" in check.stdout
    assert (f"check-task: the run writes {cache}, under $HOME, which runs see read-only and "
            f"empty but for what the task declares: if it is a data cache, fill it before "
            f"the night (python prepare.py) and declare it in task.yaml (`caches: "
            f"[~/.cache/toydata]`, shown read-only to runs)") in check.stdout


@needs_sandbox
@pytest.mark.slow
def test_a_karpathy_repo_caching_in_home_by_its_name_passes_check_task_and_runs_a_night(
        tmp_path, home, mlflow_uri):
    """Done when (issue 29): prepare, init, check-task, a night, in the sandbox. Without
    `caches:` the run cannot see its tokenizer (it lies at the cache's root, beside the
    data folder the lm grader lists), and check-task says which path and which key."""
    repo = make_home_cache_repo(tmp_path / "tinyhome", home)
    prepare(repo)
    assert (home / ".cache" / "tinyhome" / "tokenizer.json").is_file()
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert ("caches:     ~/.cache/tinyhome (found: prepare.py names it; shown read-only to "
            "runs; prepare it first with python prepare.py)") in done.stdout
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["caches"] == ["~/.cache/tinyhome"]
    assert task["held_out"] == ["~/.cache/tinyhome/data/shard_val.txt"]
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    assert check.returncode == 0 and "status ok; val_bpb = " in check.stdout, \
        check.stdout + check.stderr
    ran = run_cli("run", "--iterations", "1", cwd=repo)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    results = next((repo / ".autoresearch").glob("*/results.tsv")).read_text().splitlines()
    assert len(results) >= 3 and all("crash" not in r for r in results[1:]), results
    assert "baseline  val_bpb" in ran.stdout, ran.stdout[-2000:]

    del task["caches"]                              # as init wrote it before issue 29
    (repo / "task.yaml").write_text(yaml.safe_dump(task))
    commit(repo, "no caches")
    check = run_cli("check-task", ".", cwd=repo)
    tokenizer = home / ".cache" / "tinyhome" / "tokenizer.json"
    assert check.returncode == 1, check.stdout + check.stderr
    assert (f"check-task: the run needs {tokenizer}, which the sandbox hides (runs see $HOME "
            f"empty but for what the task declares): declare its folder in task.yaml "
            f"(`caches: [~/.cache/tinyhome]`, shown read-only to runs)") in check.stdout


@needs_sandbox
@pytest.mark.slow
def test_a_run_writing_into_its_declared_cache_fails_and_check_task_names_the_path(
        tmp_path, home):
    """The repo builds token_bytes.pt on first use, into its cache: read-only to runs, so
    the evaluation fails, and check-task names the file and the prepare step."""
    repo = make_home_cache_repo(tmp_path / "tinyfill", home, fills_on_first_use=True)
    prepare(repo)
    assert not (home / ".cache" / "tinyfill" / "token_bytes.pt").exists()
    assert run_cli("init", cwd=repo).returncode == 0
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    written = home / ".cache" / "tinyfill" / "token_bytes.pt"
    assert check.returncode == 1 and "Read-only file system" in check.stdout, \
        check.stdout + check.stderr
    assert (f"check-task: the run writes {written}, in the cache task.yaml declares "
            f"(caches: ~/.cache/tinyfill), which runs see read-only: fill it before the night "
            f"(python prepare.py) so that runs only read it") in check.stdout
    assert not written.exists()
