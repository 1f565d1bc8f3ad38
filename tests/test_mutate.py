"""The offline proposer: real, applicable, reproducible, never the same mutation twice."""
import random
from pathlib import Path

import pytest

from loop.proposers.base import Attempt, Context
from loop.proposers.mutate import MutateProposer, SpaceExhausted, candidates
from loop.setup.search_space import constants, parse_space, valid
from loop.setup.metric import Metric
from loop.setup.task import Task

SOURCE = """\
import torch
DEPTH = 4              # layers
LEARNING_RATE = 3e-3   # peak lr
DROPOUT = 0.0
WARMUP_RATIO = 0.1
name_lower = 5         # not a hyperparameter
def f():
    INNER = 3          # indented: not module level
"""

TASK = Task(name="t", run="python train.py", metric=Metric("loss"), editable=("train.py",),
            root=Path("."))


def ctx(iteration, history=(), files=None):
    return Context(iteration, TASK, files or {"train.py": SOURCE}, "", list(history), 1.0,
                   seed=iteration)


def test_perturbs_exactly_one_module_level_constant():
    p = MutateProposer(seed=0).propose(ctx(1))
    assert p.error is None and set(p.files) == {"train.py"}
    old, new = SOURCE.splitlines(), p.files["train.py"].splitlines()
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert len(changed) == 1 and len(old) == len(new)
    before, after = changed[0]
    name = before.split("=")[0].strip()
    assert name in {"DEPTH", "LEARNING_RATE", "DROPOUT", "WARMUP_RATIO"}
    assert after.split("=")[0].strip() == name
    assert ("#" in before) == ("#" in after)               # the comment survives
    assert name in p.description and "train.py" in p.description
    compile(p.files["train.py"], "train.py", "exec")       # still valid Python


def test_reproducible_and_seed_dependent():
    a = [MutateProposer(seed=1).propose(ctx(i)).description for i in range(1, 6)]
    b = [MutateProposer(seed=1).propose(ctx(i)).description for i in range(1, 6)]
    c = [MutateProposer(seed=2).propose(ctx(i)).description for i in range(1, 6)]
    assert a == b and a != c


def test_never_repeats_a_tried_change_and_stops_when_the_space_is_exhausted():
    # a finite space: A in 3 choices, B in 2 (current A=1, B=10): 3 * 2 - 1 other points
    task = Task(name="t", run="x", metric=Metric("loss"), editable=("train.py",),
                search_space={"A": {"choices": [1, 2, 3]}, "B": {"choices": [10, 20]}})
    files = {"train.py": "A = 1\nB = 10\n"}
    history, seen_points = [], set()
    for i in range(1, 6):
        p = MutateProposer(seed=0).propose(Context(i, task, files, "", list(history), 1.0, i))
        assert p.error is None and p.description not in {h.description for h in history}
        seen_points.add(p.files["train.py"])
        history.append(Attempt(i, p.description, "discard", 1.0, -0.1))
    assert len(seen_points) == 5                       # every other point, once
    with pytest.raises(SpaceExhausted) as info:
        MutateProposer(seed=0).propose(Context(6, task, files, "", history, 1.0, 6))
    assert info.value.exit_code == 0 and "\n" not in str(info.value)
    assert "search space exhausted" in str(info.value) and "A, B" in str(info.value)


def test_a_state_already_measured_is_not_proposed_again_from_a_new_parent():
    task = Task(name="t", run="x", metric=Metric("loss"), editable=("train.py",),
                search_space={"X": {"choices": [1, 2, 3]}})
    proposer = MutateProposer(seed=0)
    first = proposer.propose(Context(1, task, {"train.py": "X = 3\n"}, "", [], 1.0, 1))
    kept = first.files                                  # X = 1 or 2 kept; X = 3 was the baseline
    history = [Attempt(1, first.description, "keep", 0.5, 0.5)]
    second = proposer.propose(Context(2, task, kept, "", history, 0.5, 2))
    assert "to 3 " not in second.description, second.description
    with pytest.raises(SpaceExhausted):               # the third value is all that was left
        proposer.propose(Context(3, task, kept, "", history + [
            Attempt(2, second.description, "discard", 0.9, -0.4)], 0.5, 3))


def test_proposals_asked_for_ahead_never_repeat_each_other():
    """Several slots ask before any answer is in the history: same parent, no repeats."""
    task = Task(name="t", run="x", metric=Metric("loss"), editable=("kernel.py",),
                search_space={"CHUNK": {"range": [1, 16], "integer": True}})
    files = {"kernel.py": "CHUNK = 4\n"}
    proposer = MutateProposer(seed=0)
    got = [proposer.propose(Context(i, task, files, "", [], 1.0, i)).description
           for i in range(1, 16)]
    assert len(set(got)) == 15                         # all 15 other values, none twice
    with pytest.raises(SpaceExhausted):
        proposer.propose(Context(16, task, files, "", [], 1.0, 16))


def test_integer_stays_integer_and_zero_moves():
    values = {new for path, name, old, new in candidates({"train.py": SOURCE}) if name == "DEPTH"}
    assert values and all(v.isdigit() and v != "4" for v in values)
    assert {new for _, name, _, new in candidates({"train.py": SOURCE}) if name == "DROPOUT"}


ROOT = Path(__file__).resolve().parents[1]
BUILT_IN = sorted(p.parent for p in (ROOT / "experiments").glob("*/task.yaml"))


@pytest.mark.parametrize("folder", BUILT_IN, ids=lambda p: p.name)
def test_50_iterations_on_every_built_in_task_without_running_out(folder):
    """A simulated night: 50 proposals, a random third of them kept (the parent moves),
    each valid in the declared space, none repeated from the same parent."""
    from loop.setup.task import load_task
    task = load_task(folder)
    space = parse_space(task.search_space, "task.yaml")
    files = {p: (folder / p).read_text() for p in task.editable}
    proposer, luck, history = MutateProposer(seed=0), random.Random(0), []
    tried_here: set[str] = set()
    sizes = set()
    for i in range(1, 51):
        p = proposer.propose(Context(i, task, files, "", list(history), 1.0, seed=i))
        assert p.error is None and p.files, p.error
        assert p.description not in tried_here, p.description
        tried_here.add(p.description)
        values = constants({**files, **p.files})
        assert valid(values, space) is None, p.description
        sizes.add(p.description.count("(was "))
        kept = luck.random() < 1 / 3
        history.append(Attempt(i, p.description, "keep" if kept else "discard", 1.0, 0.0))
        if kept:
            files, tried_here = {**files, **p.files}, set()
    if len(space) > 1:
        assert sizes >= {1, 2}                 # constants are combined, not only one at a time


def test_fastsum_samples_its_whole_declared_range():
    from loop.setup.task import load_task
    task = load_task(ROOT / "experiments" / "fastsum")
    files = {"kernel.py": (task.root / "kernel.py").read_text()}
    proposer, history = MutateProposer(seed=0), []
    values = set()
    for i in range(1, 101):
        p = proposer.propose(Context(i, task, files, "", list(history), 1.0, seed=i))
        values.add(int(constants(p.files)["CHUNK"]))
        history.append(Attempt(i, p.description, "discard", 1.0, -0.1))
    assert len(values) == 100 and min(values) < 4 < 64 < 1024 < max(values) <= 4096


def test_lowercase_settings_move_when_declared_and_seeds_stay_fixed():
    """nanoGPT's style: `learning_rate = 6e-4` at module level is searched once task.yaml's
    search_space names it; undeclared, only UPPER_CASE constants move, and never a seed."""
    from loop.proposers.base import Context
    from loop.proposers.mutate import MutateProposer
    from loop.setup.search_space import constants
    from loop.setup.metric import Metric
    from loop.setup.task import Task
    text = ("learning_rate = 6e-4  # max lr\nn_layer = 12\nbeta2 = 0.95\nseed = 1337\n"
            "RANDOM_STATE = 42\nWIDTH = 32\n")
    space = {"learning_rate": {"log_range": [1e-4, 1e-2]}, "n_layer": {"range": [2, 24],
             "integer": True}, "beta2": {"range": [0.9, 0.999]}}
    declared = Task(name="t", run="python train.py", metric=Metric("val_loss"),
                    editable=("train.py",), search_space=space)
    moved = set()
    files = {"train.py": text}
    for i in range(1, 40):
        p = MutateProposer(seed=1).propose(Context(i, declared, files, "", [], None, seed=i))
        assert p.error is None, p.error
        values = constants(p.files, space)
        moved |= {n for n in space if values[n] != constants(files, space)[n]}
        assert "seed = 1337" in p.files["train.py"] and "RANDOM_STATE = 42" in p.files["train.py"]
    assert moved == set(space)
    bare = Task(name="t", run="python train.py", metric=Metric("val_loss"),
                editable=("train.py",))
    for i in range(1, 20):
        p = MutateProposer(seed=2).propose(Context(i, bare, files, "", [], None, seed=i))
        assert p.description.startswith("Set WIDTH to "), p.description
