"""task.yaml `inputs:`: prepared data that git ignores (nanoGPT's data/<name>/train.bin),
linked read-only into every worktree the engine runs, and refused in one line when it cannot
be; a failed run (check-task's, or a night's baseline) names `inputs:` when the file it needs
is ignored. Real git repos, real subprocesses, the real sandbox where it works."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import git, needs_sandbox, run_cli
from shaped_repos import nanogpt_repo
from loop.errors import TaskError
from loop.advice.check_task import check_task
from loop.run.process import Limits
from loop.setup.task import load_task

PATTERN = r"\bval\s+loss\s*[:=]?\s*([-+]?\d+\.?\d*)"
TASK = f"""\
name: nano
editable: [train.py]
run: python train.py config/train_shakespeare_char.py
metric: {{name: val_loss, direction: minimize, pattern: '{PATTERN}'}}
time_budget_s: 20
search_space:
  learning_rate: {{log_range: [0.0001, 0.01]}}
"""


def repo_with_task(tmp_path: Path, inputs: str | None, prepared: bool = True,
                   train: str | None = None) -> Path:
    repo = nanogpt_repo(tmp_path / "nano", prepared)
    if train is not None:
        (repo / "train.py").write_text(train)
    (repo / "task.yaml").write_text(TASK + (f"inputs: {inputs}\n" if inputs else ""))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "task")
    return repo


def loaded_error(repo: Path) -> str:
    with pytest.raises(TaskError) as err:
        load_task(repo)
    line = str(err.value)
    assert "\n" not in line
    return line


# -- what check-task runs ------------------------------------------------------------------------
def test_ignored_data_without_inputs_fails_and_names_inputs(tmp_path):
    repo = repo_with_task(tmp_path, None)
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 1, res.stdout + res.stderr
    line = next(s for s in res.stdout.splitlines() if "the run needs" in s)
    assert "data/shakespeare_char/train.bin, which is not committed" in line
    assert "git ignores it; list data/shakespeare_char/train.bin under `inputs:`" in line
    assert "commit it" not in line


def test_inputs_make_ignored_data_present_and_check_task_passes(tmp_path):
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]")
    task = load_task(repo)
    # the folder holds a committed prepare.py: only its ignored files are linked
    assert sorted(rel for rel, _ in task.input_links) == [
        "data/shakespeare_char/meta.pkl", "data/shakespeare_char/train.bin",
        "data/shakespeare_char/val.bin"]
    assert all(Path(t) == (repo / rel).resolve() for rel, t in task.input_links)
    res = run_cli("check-task", ".", cwd=repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "status ok; val_loss = " in res.stdout
    # globs too; and nothing of the links is left in the user's checkout
    (repo / "task.yaml").write_text(TASK + "inputs: ['data/*/*.bin']\n")
    assert sorted(rel for rel, _ in load_task(repo).input_links) == [
        "data/shakespeare_char/train.bin", "data/shakespeare_char/val.bin"]
    assert not any(p.is_symlink() for p in repo.rglob("*"))


@pytest.mark.parametrize("inputs,expect", [
    ("[configurator.py]", "inputs: configurator.py is committed (it is in every worktree"),
    ("[data/shakespeare_char/prepare.py]", "is committed"),
    ("[train.py]", "inputs: train.py is editable"),
    ("[/srv/data]", "must be a path inside the task folder"),
    ("['../x']", "must be a path inside the task folder"),
    ("[data/missing.bin]", "inputs: data/missing.bin not found in"),
])
def test_bad_inputs_are_one_line(tmp_path, inputs, expect):
    repo = repo_with_task(tmp_path, inputs)
    assert expect in loaded_error(repo)


def test_missing_input_names_the_command_that_makes_it(tmp_path):
    repo = repo_with_task(tmp_path, "[data/shakespeare_char/train.bin]", prepared=False)
    line = loaded_error(repo)
    assert "inputs: data/shakespeare_char/train.bin not found" in line
    assert "make it first: `python data/shakespeare_char/prepare.py`" in line


def test_protected_folder_is_refused(tmp_path):
    repo = repo_with_task(tmp_path, "[config]")
    (repo / "task.yaml").write_text(TASK + "protected: [config/train_shakespeare_char.py]\n"
                                    "inputs: [config]\n")
    assert "inputs: config is protected (config/train_shakespeare_char.py)" in \
        loaded_error(repo)


# -- read-only for the run -----------------------------------------------------------------------
WRITES_THROUGH = """\
import os
learning_rate = 1e-3
path = os.path.join('data', 'shakespeare_char', 'val.bin')
try:
    with open(path, 'ab') as f:
        f.write(b'more validation data')
    print('wrote through the link')
except OSError as exc:
    print('refused:', exc)
print('val loss 1.0')
"""
READ_ONLY_PROBE = """\
import errno, os
learning_rate = 1e-3
path = os.path.join('data', 'shakespeare_char', 'val.bin')
assert open(path, 'rb').read()
try:
    with open(path, 'ab') as f:
        f.write(b'more validation data')
except OSError as exc:
    if exc.errno != errno.EROFS:
        raise
    print('val loss 1.0')
"""
REPLACES = """\
import os
learning_rate = 1e-3
path = os.path.join('data', 'shakespeare_char', 'val.bin')
os.remove(path)
with open(path, 'wb') as f:
    f.write(b'easy')
print('val loss 0.5')
"""


def test_writing_through_an_input_without_the_sandbox_is_tampering(tmp_path):
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]", train=WRITES_THROUGH)
    before = (repo / "data/shakespeare_char/val.bin").read_bytes()
    _, result = check_task(repo, out=lambda s: None, limits=Limits(sandbox="off"))
    assert result.status == "crash" and result.detail.startswith("tampered: the run changed "
                                                                  "the input data/"), result
    assert (repo / "data/shakespeare_char/val.bin").read_bytes() != before  # no sandbox


def test_replacing_an_input_link_is_tampering(tmp_path):
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]", train=REPLACES)
    _, result = check_task(repo, out=lambda s: None, limits=Limits(sandbox="off"))
    assert result.status == "crash"
    assert result.detail == ("tampered: the run replaced the input data/shakespeare_char/"
                             "val.bin (a link to your checkout's data)")
    assert (repo / "data/shakespeare_char/val.bin").read_bytes() != b"easy"


@needs_sandbox
def test_the_sandbox_shows_inputs_read_only(tmp_path):
    # the repo is under /tmp, which the sandbox empties: the data is there only because
    # `inputs` shows it, and read-only
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]", train=READ_ONLY_PROBE)
    before = (repo / "data/shakespeare_char/val.bin").read_bytes()
    lines: list[str] = []
    _, result = check_task(repo, out=lines.append, limits=Limits(sandbox="required"))
    assert result.status == "ok" and result.metric == 1.0, lines   # read it; EROFS writing
    assert (repo / "data/shakespeare_char/val.bin").read_bytes() == before


# -- a night -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_night_runs_with_inputs_and_a_failed_baseline_says_why(tmp_path, mlflow_uri):
    repo = repo_with_task(tmp_path / "without", None)
    ran = run_cli("run", "--task", ".", "--iterations", "1", "--proposer", "mutate",
                  "--tag", "a", cwd=repo)
    assert ran.returncode == 1, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "stopped: the baseline failed" in ran.stdout
    assert "run: the run needs data/shakespeare_char/train.bin, which is not committed" in \
        ran.stdout and "under `inputs:`" in ran.stdout
    repo = repo_with_task(tmp_path / "with", "[data/shakespeare_char]")
    ran = run_cli("run", "--task", ".", "--iterations", "2", "--proposer", "mutate",
                  "--tag", "b", cwd=repo)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    rows = next((repo / ".autoresearch").glob("b/results.tsv")).read_text().splitlines()
    assert len(rows) >= 3 and all("crash" not in r for r in rows[1:]), rows
    # the links are never committed on the night's branch
    assert "data/shakespeare_char/train.bin" not in git(repo, "ls-tree", "-r", "--name-only",
                                                         "autoresearch/b")
    assert os.path.isfile(repo / "data/shakespeare_char/train.bin")


# -- init on nanoGPT's layout ---------------------------------------------------------------------
def init(repo: Path, *args: str):
    return run_cli("init", *args, cwd=repo)


def test_init_with_args_reads_the_config_and_guesses_inputs(tmp_path):
    import yaml
    repo = nanogpt_repo(tmp_path / "nano")
    done = init(repo, "--args", "config/train_shakespeare_char.py")
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["run"] == "python train.py config/train_shakespeare_char.py"
    assert task["editable"] == ["train.py", "config/train_shakespeare_char.py"]
    assert task["inputs"] == ["data/shakespeare_char"]
    assert "inputs:     data/shakespeare_char (guessed: ignored data train.py names (data); " \
           "change with --inputs PATH)" in done.stdout
    # the config's learning_rate (1e-3) is what the run uses: the range is around it
    assert task["search_space"]["learning_rate"] == {"log_range": [0.00025, 0.004]}
    assert "config/train_shakespeare_char.py sets 3 settings for the run, over train.py's " \
           "values: the search space moves learning_rate, n_layer in " \
           "config/train_shakespeare_char.py, editable" in done.stdout
    # what init wrote runs, and mutate moves the config's value, not the script's
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "task")
    check = run_cli("check-task", ".", cwd=repo)
    assert check.returncode == 0 and "status ok; val_loss" in check.stdout, check.stdout
    from loop.proposers.base import Context
    from loop.proposers.mutate import MutateProposer
    loaded = load_task(repo)
    files = {p: (repo / p).read_text() for p in loaded.editable}
    moved = set()
    for seed in range(6):
        p = MutateProposer(seed=seed).propose(Context(1, loaded, files, "", [], None, seed=1))
        if p.error is None:       # a proposal may move several settings: learning_rate's file
            moved |= set(re.findall(r"learning_rate to \S+ \(was [^)]*\) in (\S+?)[;,]?(?:\s|$)",
                                    p.description))
    assert moved == {"config/train_shakespeare_char.py"}


def test_init_inputs_flag_and_script_with_arguments(tmp_path):
    import yaml
    repo = nanogpt_repo(tmp_path / "nano")
    line = init(repo, "--script", "train.py config/train_shakespeare_char.py")
    assert line.returncode == 2 and "pass the script's arguments with --args" in line.stderr
    assert not (repo / "task.yaml").exists()
    done = init(repo, "--args", "config/train_shakespeare_char.py", "--inputs",
                "data/shakespeare_char/train.bin,data/shakespeare_char/val.bin",
                "--inputs", "data/shakespeare_char/meta.pkl")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((repo / "task.yaml").read_text())["inputs"] == [
        "data/shakespeare_char/train.bin", "data/shakespeare_char/val.bin",
        "data/shakespeare_char/meta.pkl"]
    assert "(found: --inputs; change with --inputs PATH)" in done.stdout
    # an input that is committed: the task would not load, so nothing is written
    bad = init(repo, "--force", "--inputs", "configurator.py")
    assert bad.returncode == 2 and "inputs: configurator.py is committed" in bad.stderr


def test_init_unprepared_repo_guesses_no_inputs(tmp_path):
    repo = nanogpt_repo(tmp_path / "nano", prepared=False)
    done = init(repo, "--args", "config/train_shakespeare_char.py")
    assert done.returncode == 0, done.stderr
    assert "inputs:     none (uncommitted data the run reads: --inputs PATH)" in done.stdout


@pytest.mark.slow
def test_a_baseline_missing_a_package_says_so(tmp_path, mlflow_uri):
    train = "import learning_rate_helpers_not_installed\nlearning_rate = 1e-3\n"
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]", train=train)
    ran = run_cli("run", "--task", ".", "--iterations", "1", "--proposer", "mutate",
                  "--tag", "p", cwd=repo)
    assert ran.returncode == 1, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "run: learning_rate_helpers_not_installed is not installed in the engine's " \
           "interpreter" in ran.stdout, ran.stdout[-2000:]


def test_a_failed_run_does_not_name_the_inputs_it_had(tmp_path):
    repo = repo_with_task(tmp_path, "[data/shakespeare_char]",
                          train="learning_rate = 1e-3\nraise SystemExit(3)\n")
    (repo / "notes.txt").write_text("untracked, not an input")
    lines: list[str] = []
    _, result = check_task(repo, out=lines.append, limits=Limits(sandbox="off"))
    assert result.status == "crash"
    said = next(s for s in lines if "not in the run's checkout" in s)
    assert "notes.txt" in said and "shakespeare_char" not in said, said
