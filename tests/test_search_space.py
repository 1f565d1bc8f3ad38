"""Search spaces: mutate proposes only points that can run; bad spaces fail check-task."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loop.errors import TaskError
from loop.proposers.base import Context
from loop.proposers.mutate import MutateProposer, candidates
from loop.setup.search_space import constants, implied, parse_space
from loop.setup.metric import Metric
from loop.setup.task import Task, load_task

ROOT = Path(__file__).resolve().parents[1]

UNDECLARED = """\
N_EMBD = 128
N_HEAD = 4             # 6 would break the assert below
BETA1 = 0.9
BETA2 = 0.95
DROPOUT = 0.6
WARMUP_FRAC = 0.7


class Config:
    n_embd: int = N_EMBD
    n_head: int = N_HEAD


def attention(cfg):
    assert cfg.n_embd % cfg.n_head == 0
"""


def test_200_tinylm_proposals_stay_in_the_declared_space_and_the_models_asserts():
    task = load_task(ROOT / "experiments/tinylm")
    space = parse_space(task.search_space, "task.yaml")
    files = {"train.py": (task.root / "train.py").read_text()}
    for i in range(1, 201):                      # every proposal kept: the space drifts too
        p = MutateProposer(seed=i % 7).propose(Context(i, task, files, "", [], None, seed=i))
        assert p.error is None, p.error
        files = p.files
        values = constants(files)
        name = p.description.split()[1]
        assert name in space                     # only declared constants move
        for dim in space.values():
            assert dim.contains(values[dim.name]), (p.description, values[dim.name])
        assert values["N_EMBD"] % values["N_HEAD"] == 0, p.description
        assert 0 < values["BETA1"] < 1 and 0 < values["BETA2"] < 1
        compile(files["train.py"], "train.py", "exec")


def test_without_a_space_names_and_asserts_bound_the_proposals():
    rules = implied({"train.py": UNDECLARED})
    assert rules["N_HEAD"].divides == "N_EMBD"   # read from `assert cfg.n_embd % cfg.n_head`
    seen = {}
    for _, name, _, new in candidates({"train.py": UNDECLARED}):
        seen.setdefault(name, set()).add(float(new))
    assert seen["N_HEAD"] and all(128 % v == 0 for v in seen["N_HEAD"])
    assert 6.0 not in seen["N_HEAD"]             # 4 * 1.5: the certain crash
    assert seen["BETA1"] and all(0 < v < 1 for v in seen["BETA1"] | seen["BETA2"])
    assert seen["DROPOUT"] and all(0 <= v <= 1 for v in seen["DROPOUT"] | seen["WARMUP_FRAC"])
    assert all(v % 4 == 0 for v in seen["N_EMBD"])   # N_EMBD moves keep N_HEAD=4 dividing it


def test_declared_choices_and_integer_ranges_are_all_mutate_tries():
    space = parse_space({"N_HEAD": {"choices": [2, 4, 8]},
                         "BETA1": {"range": [0.8, 0.95]}}, "t")
    found = candidates({"train.py": UNDECLARED}, space)
    assert {n for _, n, _, _ in found} == {"N_HEAD", "BETA1"}
    assert {v for _, n, _, v in found if n == "N_HEAD"} == {"2", "8"}
    assert all(0.8 <= float(v) <= 0.95 for _, n, _, v in found if n == "BETA1")
    task = Task(name="t", run="x", metric=Metric("loss"), editable=("train.py",),
                search_space={"N_HEAD": {"choices": [2, 4, 8]}})
    p = MutateProposer(seed=3).propose(
        Context(1, task, {"train.py": UNDECLARED}, "", [], None, seed=1))
    assert re.match(r"Set N_HEAD to (2|8) \(was 4\)", p.description)


@pytest.mark.parametrize("space, message", [
    ("  NOT_THERE: {range: [1, 2]}", "no numeric setting NOT_THERE"),
    ("  X: {range: [3, 1]}", "is empty"),
    ("  X: {log_range: [0, 1]}", "log_range needs low > 0"),
    ("  X: {range: [1, 2], choices: [1]}", "exactly one of"),
    ("  X: {range: [1, 2], step: 1}", "unknown key 'step'"),
    ("  Y: {choices: [1, 2], divides: NOPE}", "constraint names NOPE"),
])
def test_check_task_rejects_a_bad_search_space_in_one_line(toy_repo, space, message):
    yaml = toy_repo / "task" / "task.yaml"
    yaml.write_text(yaml.read_text() + "search_space:\n" + space + "\n")
    with pytest.raises(TaskError, match=message):
        load_task(toy_repo / "task")


def test_check_task_cli_exits_2_on_a_bad_range(toy_repo):
    yaml = toy_repo / "task" / "task.yaml"
    yaml.write_text(yaml.read_text() + "search_space:\n  X: {range: [5, 5]}\n")
    out = subprocess.run([sys.executable, "-m", "loop", "check-task", str(toy_repo / "task")],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1 and "search_space.X" in lines[0] and "empty" in lines[0]


def test_the_built_in_tasks_declare_valid_spaces():
    for name in ("tinylm", "classify", "fastsum"):
        task = load_task(ROOT / "experiments" / name)
        assert task.search_space, name
