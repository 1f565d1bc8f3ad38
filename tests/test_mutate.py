"""The offline proposer: real, applicable, reproducible, never the same mutation twice."""
from pathlib import Path

from loop.proposers.base import Attempt, Context
from loop.proposers.mutate import MutateProposer, candidates
from loop.task import Metric, Task

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


def test_never_repeats_a_tried_mutation_and_says_when_out_of_ideas():
    options = candidates({"train.py": SOURCE})
    history = []
    for i in range(1, len(options) + 1):
        p = MutateProposer(seed=0).propose(ctx(i, history))
        assert p.error is None
        assert p.description not in {h.description for h in history}
        history.append(Attempt(i, p.description, "discard", 1.0, -0.1))
    last = MutateProposer(seed=0).propose(ctx(99, history))
    assert last.error and not last.files


def test_integer_stays_integer_and_zero_moves():
    values = {new for path, name, old, new in candidates({"train.py": SOURCE}) if name == "DEPTH"}
    assert values and all(v.isdigit() and v != "4" for v in values)
    assert {new for _, name, _, new in candidates({"train.py": SOURCE}) if name == "DROPOUT"}
