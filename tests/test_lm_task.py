"""task.yaml's `grader:` block and `held_out:` paths: validation, the commands the engine
builds from them, and check-task grading the karpathy-shaped fixture through them."""
from __future__ import annotations

import pytest

from karpathy_repo import LM_TASK, make_karpathy_repo, val_file
from loop.errors import TaskError
from loop.setup.graders import HANDOVER, LM
from loop.advice.check_task import check_task
from loop.run.grading import Guard
from loop.run.spec import RunJob, run_envs
from loop.setup.task import load_task
from loop.words import RunKey


def a_job(tmp_path) -> RunJob:
    return RunJob.make(0, RunKey.candidate(0), "", "run-x", 0, tmp_path / "log", tmp_path)


def folder_with(tmp_path, yaml_text: str):
    folder = tmp_path / "task"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml_text)
    (folder / "train.py").write_text("X = 1\n")
    (folder / "prepare.py").write_text("def evaluate_bpb(model, t, b):\n    return 0.0\n")
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    (folder / "tinyshape" / "data").mkdir(parents=True)
    (folder / "tinyshape" / "data" / "shard_val.txt").write_text("held out\n")
    (folder / "tinyshape" / "tokenizer").mkdir()
    (folder / "tinyshape" / "tokenizer" / "token_bytes.pt").write_text("bytes per token\n")
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(folder))
    return folder


def test_grader_block_builds_both_commands(tmp_path, cache):
    task = load_task(folder_with(tmp_path, LM_TASK))
    assert task.run == "python train.py"                  # what status and reports show
    assert task.train_command.startswith(f"python {HANDOVER} --eval-function "
                                         f"prepare.evaluate_bpb --input-shape 16x64 train.py")
    assert task.grade_command.startswith(f"python {LM} --eval-function prepare.evaluate_bpb "
                                         f"--eval-call 'evaluate_bpb(model, "
                                         f"Tokenizer.from_directory(), 16)' --input-shape "
                                         f"16x64 --metric val_bpb --protected prepare.py")
    assert task.held_out == (str(cache / "tinyshape" / "data" / "shard_val.txt"),)
    assert task.protected_metric


def test_held_out_expands_home(tmp_path, monkeypatch, cache):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "data").mkdir(parents=True)
    (tmp_path / "home" / "data" / "val.bin").write_bytes(b"x")
    text = LM_TASK.replace("$AUTORESEARCH_CACHE/tinyshape/data/shard_val.txt", "~/data/val.bin")
    task = load_task(folder_with(tmp_path, text))
    assert task.held_out == (str(tmp_path / "home" / "data" / "val.bin"),)


@pytest.mark.parametrize("change, message", [
    (("grader:", "run: python train.py\ngrader:"), "give either 'run' or 'grader', not both"),
    (("kind: lm", "kind: vision"), "grader.kind must be one of lm, predictions, got 'vision'"),
    (("script: train.py", "script: prepare.py"), "grader.script 'prepare.py' must be an "
                                                   "editable file"),
    (("script: train.py", "script: nope.py"), "grader.script 'nope.py' not found"),
    (("prepare.evaluate_bpb\n", "evaluate_bpb\n"), "grader.eval_function must be "
                                                   "module.function"),
    (("prepare.evaluate_bpb\n", "train.evaluate_bpb\n"), "lives in 'train.py', which is not "
                                                         "protected"),
    (("16)\"", "16\""), "grader.eval_call is not a Python expression"),
    (("evaluate_bpb(model,", "evaluate_bpb(None,"), "grader.eval_call must pass `model`"),
    (("[16, 64]", "[16]"), "grader.input_shape must be [batch, seq]"),
    (("  input_shape: [16, 64]\n", ""), "grader: missing required key 'input_shape'"),
    (("$AUTORESEARCH_CACHE/tinyshape/data/shard_val.txt", "data/val.txt"),
     "held_out: 'data/val.txt' must be an absolute path"),
    (("$AUTORESEARCH_CACHE/tinyshape/data/shard_val.txt", "$NO_SUCH_VAR_X/val.txt"),
     "needs the environment variable NO_SUCH_VAR_X"),
    (("shard_val.txt", "missing.txt"), "missing.txt not found (prepare the data first)"),
])
def test_grader_and_held_out_errors_are_one_line(tmp_path, cache, change, message):
    text = LM_TASK.replace(*change)
    assert text != LM_TASK
    with pytest.raises(TaskError) as err:
        load_task(folder_with(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_held_out_inside_the_task_folder_or_without_a_grader_is_refused(tmp_path, cache):
    folder = folder_with(tmp_path, LM_TASK.replace(
        "$AUTORESEARCH_CACHE/tinyshape/data/shard_val.txt", str(tmp_path / "task" / "prepare.py")))
    with pytest.raises(TaskError, match="overlaps the task folder"):
        load_task(folder)
    plain = LM_TASK.split("grader:")[0] + "run: python train.py\n" + \
        LM_TASK.split("input_shape: [16, 64]\n")[1]
    with pytest.raises(TaskError, match="held_out needs a protected grader"):
        load_task(folder_with(tmp_path, plain))


def test_guard_hashes_held_out_and_names_it_to_the_grader_only(tmp_path, cache):
    task = load_task(folder_with(tmp_path, LM_TASK))
    guard = Guard(task, task.root)
    train, env = run_envs(task, a_job(tmp_path), tmp_path / "artifacts")
    assert env["AUTORESEARCH_HELD_OUT_0"] == task.held_out[0]
    assert "AUTORESEARCH_HELD_OUT_0" not in train
    assert guard.check_private() is None
    (cache / "tinyshape" / "data" / "shard_val.txt").write_text("changed\n")
    assert guard.check_private() == (f"the held-out data {task.held_out[0]} changed since the "
                                     f"loop started")


@pytest.mark.slow
def test_check_task_grades_the_fixture_with_the_lm_grader(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    repo = make_karpathy_repo(tmp_path / "repo", cache, {"task.yaml": LM_TASK})
    lines = []
    task, result = check_task(repo, out=lines.append)
    assert result.status == "ok", (result.detail, lines)
    assert 0.5 < result.metric < 8.0
    assert "then grading with the lm grader" in lines[0]
    assert val_file(cache).stat().st_size > 0             # hidden from training, not emptied


def test_a_relative_interpreter_is_the_checkouts(tmp_path, cache):
    """Worktrees and the grader's copy hold committed files only: `.venv/bin/python`
    resolves against the user's task folder (`origin`), or is one clear error."""
    text = LM_TASK.replace("python: python", "python: .venv/bin/python")
    folder = folder_with(tmp_path, text)
    with pytest.raises(TaskError, match=r"grader.python: .venv/bin/python not found in"):
        load_task(folder)
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "python").write_text("")
    copy = folder_with(tmp_path / "worktree", text)      # the engine's worktree copy
    task = load_task(copy, origin=folder)
    assert task.grader.python == str(folder / ".venv" / "bin" / "python")
    assert task.train_command.startswith(f"{folder}/.venv/bin/python ")
    assert task.run == ".venv/bin/python train.py"


def test_uv_run_python_is_the_projects_environment(tmp_path, cache, monkeypatch):
    monkeypatch.delenv("UV_PROJECT_ENVIRONMENT", raising=False)
    text = LM_TASK.replace("python: python", "python: uv run python")
    folder = folder_with(tmp_path, text)
    with pytest.raises(TaskError, match=r"needs the project's environment: run `uv sync`"):
        load_task(folder)
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "python").write_text("")
    task = load_task(folder)
    assert task.train_command.startswith(f"{folder}/.venv/bin/python {HANDOVER} ")
    assert task.run == "uv run python train.py"


def test_read_only_data_is_named_to_both_steps_and_hashed(tmp_path, cache):
    """What the grader reads besides the held-out split (karpathy's token_bytes.pt lives in
    the cache a run may fill): a run that changes it is caught before grading."""
    task = load_task(folder_with(tmp_path, LM_TASK))
    tokenizer = cache / "tinyshape" / "tokenizer"
    assert task.read_only == (str(tokenizer),)
    train, grader = run_envs(task, a_job(tmp_path), tmp_path / "artifacts")
    assert str(tokenizer) in train.values() and str(tokenizer) in grader.values()  # both steps
    guard = Guard(task, task.root)
    assert guard.check_private() is None
    (tokenizer / "token_bytes.pt").write_text("two bytes per token\n")
    assert guard.check_private() == (f"the read-only data {tokenizer} changed since the loop "
                                     f"started")


def test_a_read_only_folder_inside_a_writable_one_stays_read_only(tmp_path):
    from loop.run import sandbox
    cache, tokenizer = tmp_path / "cache", tmp_path / "cache" / "tokenizer"
    tokenizer.mkdir(parents=True)
    argv = sandbox.wrap(["true"], tmp_path, [cache], (), None, readonly=[str(tokenizer)])
    binds = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1)]
    writable_at = binds.index(("--bind", str(cache)))
    assert ("--ro-bind", str(tokenizer)) in binds[writable_at:]
