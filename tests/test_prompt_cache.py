"""The prompt caches: two consecutive iterations' prompts share everything up to the end
of the code listing, so a server's prefix cache reads only what changed (the iteration,
the best, the journal). Measured on the default task, experiments/tinylm."""
from __future__ import annotations

from pathlib import Path

from loop.proposers import prompts
from loop.proposers.base import Attempt, Context
from loop.setup.task import load_task

ROOT = Path(__file__).resolve().parents[1]


def _prompt(task, files, history, n: int, best: float) -> str:
    c = Context(iteration=n, task=task, files=files, program=(ROOT / "program.md").read_text(),
                history=history[:n - 1], best_metric=best, seed=n, noise_sd=0.01)
    return prompts.system_prompt(c) + "\n" + prompts.user_prompt(c, 6000)


def _shared(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_consecutive_prompts_share_all_but_what_changes_per_iteration():
    folder = ROOT / "experiments" / "tinylm"
    task = load_task(folder)
    files = {p: (folder / p).read_text() for p in task.editable if (folder / p).exists()}
    history = [Attempt(i, f"idea {i}: learning rate {i}e-3", "discard", 3.1 + i / 100, -0.01,
                       "no gain") for i in range(1, 12)]
    before = _prompt(task, files, history, 5, 3.05)
    after = _prompt(task, files, history, 6, 3.04)      # one more attempt, a new best
    shared = _shared(before, after)
    listing = prompts.render_files(files)
    assert after.index(listing) + len(listing) <= shared    # the code is in the prefix
    assert shared / len(after) >= 0.85, f"{shared} of {len(after)} characters"
