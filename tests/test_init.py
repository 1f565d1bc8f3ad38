"""`autoresearch init`: a real git repo in, task.yaml + autoresearch.yaml out (or one line
and nothing written); the search space it derives from the code; the budget it reads."""
from __future__ import annotations

import os
import re
from dataclasses import fields

import pytest
import yaml

from conftest import run_cli
from helpers import PLAIN, commit, listing, plain_repo
from karpathy_repo import FIXTURE, make_karpathy_repo, val_file
from loop.proposers.base import Context
from loop.proposers.mutate import MutateProposer
from loop.setup.search_space import constants, parse_space
from loop.setup.metric import Metric
from loop.setup.task import Task


def test_plain_script_init_then_a_bare_run(tmp_path, mlflow_uri):
    repo = plain_repo(tmp_path / "toy")
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "unprotected metric: the number is what the run prints" in out
    assert re.search(r"metric: +val_loss \(found: the validation metric, printed by train.py; "
                     r"others: train_loss, mfu; change with --metric NAME", out)
    assert re.search(r"direction: +minimize \(guessed: from the name val_loss; change with "
                     r"--direction", out)
    assert "judge:      sequential (autoresearch.yaml)" in out
    assert "autoresearch check-task ." in out and "autoresearch run" in out
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["name"] == "toy" and task["description"].startswith("Fit the two knobs")
    assert task["run"] == "python train.py" and task["editable"] == ["train.py"]
    assert task["metric"] == {"name": "val_loss", "direction": "minimize"}
    assert set(task["search_space"]) == {"LR", "WIDTH"}        # PEAK_FLOPS: display-only
    config = yaml.safe_load((repo / "autoresearch.yaml").read_text())
    assert config["task"] == "." and config["judge"] == {"rule": "sequential"}
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo)
    assert check.returncode == 0 and "status ok" in check.stdout, check.stdout + check.stderr
    ran = run_cli("run", "--iterations", "1", cwd=repo)        # no --config: autoresearch.yaml
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "task ., proposer mutate" in ran.stdout
    results = next((repo / ".autoresearch").glob("*/results.tsv")).read_text().splitlines()
    assert results[0].split("\t")[1] == "val_loss" and len(results) >= 3   # baseline + 1


def test_metric_and_direction_flags_override(tmp_path):
    repo = plain_repo(tmp_path / "toy")
    done = run_cli("init", "--metric", "mfu", "--direction", "maximize", cwd=repo)
    assert done.returncode == 0, done.stderr
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["metric"] == {"name": "mfu", "direction": "maximize"}
    assert "PEAK_FLOPS" in task["search_space"]       # it feeds the metric now


@pytest.mark.parametrize("case,expect", [
    ("no_git", "is not a git repository"),
    ("no_metric", "no metric found"),
    ("unknown_metric", "no metric found: train.py and the modules it imports print no number "
                       "named `accuracy`"),
    ("uncommitted", "uncommitted changes in train.py"),
    ("task_exists", "task.yaml already exists (pass --force"),
])
def test_errors_are_one_line_exit_2_and_write_nothing(tmp_path, case, expect):
    root = tmp_path / "toy"
    args = ["init"]
    if case == "no_git":
        root.mkdir()
        (root / "train.py").write_text(PLAIN)
    elif case == "no_metric":
        plain_repo(root, {"train.py": "X = 1\nprint('done', X)\n"})
    else:
        plain_repo(root)
    if case == "unknown_metric":
        args += ["--metric", "accuracy"]
    if case == "uncommitted":
        (root / "train.py").write_text(PLAIN + "print('more')\n")
    if case == "task_exists":
        (root / "task.yaml").write_text("name: mine\n")
        commit(root)
    before = {p: (root / p).read_bytes() for p in listing(root) if (root / p).is_file()}
    done = run_cli(*args, cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expect in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
    after = {p: (root / p).read_bytes() for p in listing(root) if (root / p).is_file()}
    assert after == before


def test_time_budget_is_refused_where_the_code_holds_it(tmp_path, mlflow_uri):
    prepare = "TIME_BUDGET = 2          # training seconds, fixed\n"
    train = ("import time\nfrom prepare import TIME_BUDGET\nLR = 0.1\n"
             "time.sleep(min(TIME_BUDGET, 0.1))\nprint(f'val_loss: {LR * 2:.4f}')\n")
    repo = plain_repo(tmp_path / "toy", {"prepare.py": prepare, "train.py": train})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "budget:     2s (found: prepare.py:TIME_BUDGET" in done.stdout
    task = yaml.safe_load((repo / "task.yaml").read_text())
    assert task["time_budget_s"] == 2 and task["budget_constant"] == "prepare.py:TIME_BUDGET"
    assert task["protected"] == ["prepare.py"]
    commit(repo, "task")
    for cmd in (["check-task", ".", "--time-budget", "30"], ["run", "--time-budget", "30"]):
        done = run_cli(*cmd, cwd=repo)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "prepare.py:TIME_BUDGET = 2s" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (repo / ".autoresearch").exists()          # refused before anything started
    assert run_cli("init", "--force", "--time-budget", "9", cwd=repo).returncode == 2


# -- the karpathy shape (tests/fixtures/karpathy_shape) ------------------------------------------
@pytest.fixture
def shaped(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    return make_karpathy_repo(tmp_path / "tinyshape", cache), cache


def test_karpathy_shape_plan(shaped):
    from loop.init.onboard import analyse, task_yaml
    repo, cache = shaped
    plan = analyse(repo)
    assert plan.shape == "lm" and plan.editable == ["train.py"]
    assert plan.protected == ["prepare.py"]
    assert not plan.flags_file and not plan.flags     # prepare.py's --num-shards: not train.py's
    assert plan.grader == {"kind": "lm", "python": "python", "script": "train.py",
                           "eval_function": "prepare.evaluate_bpb",
                           "eval_call": "evaluate_bpb(model, Tokenizer.from_directory(), 16)",
                           "input_shape": [16, 64]}
    assert plan.held_out == [str(val_file(cache).resolve())]
    # what else the grader reads (the tokenizer, its token_bytes) no run may change; the
    # cache root holding both is not listed itself
    tokenizer = str((cache / "tinyshape" / "tokenizer").resolve())
    assert tokenizer in plan.read_only and str(cache.resolve()) not in plan.read_only
    assert "read_only: " in task_yaml(plan) and tokenizer in task_yaml(plan)
    assert (plan.metric, plan.direction) == ("val_bpb", "minimize")
    assert (plan.budget, plan.budget_constant) == (3.0, "prepare.py:TIME_BUDGET")
    assert plan.throughput == "num_steps" and plan.memory == "peak_vram_mb"
    assert "H100_BF16_PEAK_FLOPS" in plan.skipped and "H100_BF16_PEAK_FLOPS" not in plan.space
    assert plan.space["TOTAL_BATCH_SIZE"]["pow2"] == [8, 13]
    assert plan.conditions == ["TOTAL_BATCH_SIZE % (DEVICE_BATCH_SIZE * 64) == 0"]
    text = task_yaml(plan)
    data = yaml.safe_load(text)
    assert data["description"].startswith("A tiny language-model research task")   # theirs
    assert "karpathy" not in data["description"].lower() and "3s" in data["description"]
    assert data["grader"]["eval_function"] == "prepare.evaluate_bpb" and "run" not in data


def test_mutate_on_the_init_space_keeps_the_assert_and_reaches_powers(shaped):
    from loop.init.onboard import analyse
    repo, _ = shaped
    plan = analyse(repo)
    space = parse_space(plan.space, "task.yaml")
    task = Task(name="t", run="python train.py", metric=Metric("val_bpb"),
                editable=("train.py",), search_space=plan.space)
    files = {"train.py": (repo / "train.py").read_text()}
    moved, powers = set(), set()
    for i in range(1, 201):                   # a walk: every proposal kept
        p = MutateProposer(seed=i % 5).propose(Context(i, task, files, "", [], None, seed=i))
        assert p.error is None, p.error
        files = p.files
        values = constants(files)
        name = p.description.split()[1]
        moved.add(name)
        assert name != "H100_BF16_PEAK_FLOPS"
        assert values["TOTAL_BATCH_SIZE"] % (values["DEVICE_BATCH_SIZE"] * 64) == 0, p.description
        assert all(d.contains(values[d.name]) for d in space.values()), p.description
        m = re.search(r"^TOTAL_BATCH_SIZE = (\S+)", files["train.py"], re.M)
        powers.add(m[1])
        compile(files["train.py"], "train.py", "exec")
    assert {"TOTAL_BATCH_SIZE", "DEVICE_BATCH_SIZE"} <= moved
    assert len(powers) >= 3 and all(re.fullmatch(r"2\*\*\d+", v) for v in powers), powers


def test_karpathy_shape_init_writes_a_task_check_task_passes(shaped):
    # once a skip until the key existed: without it, this test must fail, not skip
    assert "grader" in {f.name for f in fields(Task)}, "task.yaml's `grader:` key is gone"
    repo, cache = shaped
    env = {**os.environ, "AUTORESEARCH_CACHE": str(cache)}
    done = run_cli("init", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert "protected grading" in done.stdout and "prepare.py:TIME_BUDGET" in done.stdout
    commit(repo, "autoresearch task")
    check = run_cli("check-task", ".", cwd=repo, env=env)
    assert check.returncode == 0 and "status ok" in check.stdout, check.stdout + check.stderr
    assert FIXTURE.is_dir()


def test_a_uv_repo_not_synced_is_refused_in_one_line_saying_uv_sync(tmp_path, monkeypatch):
    """A karpathy-shaped uv project cloned without its `.venv`: init's probe of prepare.py
    needs the environment; one line says `uv sync` (once prefixed `init: init:`)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(cache))
    repo = make_karpathy_repo(tmp_path / "tinyuv", cache, {
        "uv.lock": 'version = 1\nrequires-python = ">=3.10"\n', ".gitignore": ".venv/\n"})
    done = run_cli("init", cwd=repo)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "run `uv sync` in" in line, line
    assert line.startswith("autoresearch: error: init: python: 'uv run python' needs"), line
    assert not (repo / "task.yaml").exists()


def test_a_repo_venv_is_its_interpreter_in_the_loops_worktree_too(tmp_path, mlflow_uri):
    """`.venv/` is ignored, so the worktree (a checkout of HEAD) has none: the loop runs
    the one in the user's folder, shown in the sandbox though the repo is under /tmp."""
    import sys
    repo = plain_repo(tmp_path / "toy", {"train.py": PLAIN, ".gitignore": ".venv/\n"})
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").symlink_to(sys.executable)
    done = run_cli("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((repo / "task.yaml").read_text())["run"] == ".venv/bin/python train.py"
    commit(repo, "task")
    # the sandbox (where bwrap works) empties /tmp, where the repo lives: it shows the .venv
    ran = run_cli("run", "--iterations", "1", cwd=repo)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "baseline  val_loss" in ran.stdout
