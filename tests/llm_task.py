"""What the LLM proposer's tests share: a tiny task folder and a reply that edits it."""
from __future__ import annotations

from pathlib import Path

import pytest

from loop.setup.task import Task, load_task

GOOD = ("Description: raise LR to 1e-3 to converge faster\n\ntrain.py\n```python\n"
        "<<<<<<< SEARCH\nLR = 3e-4\n=======\nLR = 1e-3\n>>>>>>> REPLACE\n```\n")


def tiny_task(folder: Path, train: str, protected: bool = True,
              description: str = "a tiny language model") -> Task:
    """A task whose train.py is `train` (and a protected prepare.py unless `protected` is
    False), loaded as the engine loads it."""
    (folder / "task.yaml").write_text(
        f"name: tiny\ndescription: {description}\neditable: [train.py]\n"
        + ("protected: [prepare.py]\n" if protected else "")
        + "run: python train.py\nmetric: {name: val_loss, direction: minimize}\n"
          "time_budget_s: 30\n")
    (folder / "train.py").write_text(train)
    if protected:
        (folder / "prepare.py").write_text("DATA = 1\n")
    return load_task(folder)


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch):
    """The machine's OpenAI variables never reach a test's proposer."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TEST_LLM_KEY"):
        monkeypatch.delenv(name, raising=False)
