"""Nights for the finalize tests (tests/test_finalize_*.py): a real repo, a task whose score
is a known function of its settings, and a night that keeps every scripted change, on any
backend; then finalize's journals read back.

The learning-rate task: a simulated training run whose loss after `steps` steps (its time
box, $AUTORESEARCH_TIME_BUDGET, times WIDTH: a wider model learns more per step) is
1 / (LR * steps) + LR, plus seeded noise (sd 0.01). The best LR is 1 / sqrt(steps): at a
time box of 1 s, LR 1.0 beats the start's 0.5 by 0.5; at 10 s it loses by 0.4. BIAS adds to
the loss at any box."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import git, make_repo
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

LR_TASK = """\
name: toy
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: loss, direction: minimize}
time_budget_s: 1
grace_s: 20
"""

LR_TRAIN = """\
import os, random, time
LR = 0.5
WIDTH = 1
BIAS = 0.3
steps = float(os.environ["AUTORESEARCH_TIME_BUDGET"]) * WIDTH
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
noise = random.Random(seed).gauss(0, 1) * 0.01
time.sleep(0.05 * float(os.environ["AUTORESEARCH_TIME_BUDGET"]))   # a longer box, a longer run
print("cwd:", os.getcwd())                  # where it ran: a worktree here, a node's folder
print(f"loss: {1 / (LR * steps) + LR + BIAS + noise:.6f}")
"""

RAISE_LR = ("raise LR to 1.0", "LR = 0.5", "LR = 1.0")
DROP_BIAS = ("drop BIAS", "BIAS = 0.3", "BIAS = 0.0")


class Scripted:
    """Proposes (description, old line, new line) changes in order, on train.py."""

    def __init__(self, changes):
        self.n, self.changes = 0, list(changes)

    def propose(self, context):
        desc, old, new = self.changes[self.n]
        self.n += 1
        text = context.files["train.py"]
        assert old in text, (old, text)
        return Proposal(desc, files={"train.py": text.replace(old, new, 1)})


def lr_repo(root: Path, task: str = LR_TASK, train: str = LR_TRAIN) -> Path:
    return make_repo(root, {"task.yaml": task, "train.py": train,
                            "grade.py": "# protected\n"})


def night(repo: Path, changes, tag: str = "n", **config) -> Config:
    """A night on `repo`'s task that keeps every change (its judge keeps anything not worse
    by 5); the Config finalize is then given."""
    cfg = Config(task="task", base_dir=repo, tag=tag, iterations=len(changes),
                 judge=JudgeConfig(rule="strict", min_delta=-5.0), **config)
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted(changes)).run()
    assert stop.exit_code == 0, stop.message
    base = git(repo, "rev-parse", "main")
    assert len(git(repo, "rev-list", f"{base}..autoresearch/{tag}").split()) == len(changes)
    return cfg


def measures(repo: Path, tag: str = "n", name: str = "finalize.jsonl") -> list[dict]:
    """The `measure` events of one of finalize's journals."""
    path = repo / ".autoresearch" / tag / name
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:         # a torn last line (a kill mid-write)
            pass
    return [e for e in events if e["event"] == "measure"]


def report(repo: Path, tag: str = "n") -> str:
    return (repo / ".autoresearch" / tag / "finalize.md").read_text()


def verdicts(repo: Path, tag: str = "n") -> dict[str, str]:
    """finalize.md's table: description -> verdict cell."""
    rows = [r.split(" | ") for r in report(repo, tag).splitlines()
            if r.startswith("| ") and "commit" not in r and r.count(" | ") >= 5]
    return {r[1]: r[4] for r in rows}
