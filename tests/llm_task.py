"""What the LLM proposer's tests share: a tiny task folder, a proposer and a context for it,
replies that edit it; and, for the loop's tests against tests/openai_server.py, replies that
edit the toy task in each format and the run config that points at the server."""
from __future__ import annotations

from pathlib import Path

import pytest

from loop.proposers.base import Context
from loop.proposers.llm import LLMProposer
from loop.setup.config import Config, JudgeConfig, ProposerConfig
from loop.setup.task import Task, load_task

# -- the tiny task, for the proposer on its own ----------------------------------------------

TRAIN = "import torch\n\nLR = 3e-4\nSTEPS = 100\n\n\ndef train():\n    return LR * STEPS\n"
PROGRAM = "Focus on the optimizer. Never touch the data pipeline. (marker: zebra-42)"
EXPECTED = TRAIN.replace("LR = 3e-4", "LR = 1e-3")

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


def context(task, history=(), iteration=1):
    return Context(iteration=iteration, task=task, files={"train.py": TRAIN}, program=PROGRAM,
                   history=list(history), best_metric=2.5, seed=7)


def proposer(server, **overrides) -> LLMProposer:
    settings = dict(kind="llm", model="test-model", base_url=server.base_url, timeout_s=5.0,
                    max_retries=3, repair_turns=2)
    settings.update(overrides)
    return LLMProposer(ProposerConfig(**settings), backoff_scale=0.0)


# -- the toy task (conftest), edited by the LLM inside the loop ---------------------------------

SEARCH_REPLACE = """I think X is too far from its optimum.

Description: move X to 1.0, the minimum of the quadratic term

train.py
```python
<<<<<<< SEARCH
X = 3.0
=======
X = 1.0
>>>>>>> REPLACE
```
"""

UNIFIED_DIFF = """Description: raise Y to 4 so the second term vanishes

```diff
--- a/train.py
+++ b/train.py
@@ -2,2 +2,2 @@
 X = 1.0
-Y = 2
+Y = 4
```
"""

WHOLE_FILE = """Description: rewrite train.py more simply with the same score

train.py
```python
import os
from pathlib import Path
X = 1.0
Y = 4
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2:.6f}")
```
"""


def llm_config(repo, server, **kw):
    proposer = ProposerConfig(kind="llm", model="test-model", base_url=server.base_url,
                              price_input_per_m=2.0, price_output_per_m=10.0,
                              **kw.pop("proposer", {}))
    return Config(task="task", tag="llm", base_dir=repo, proposer=proposer,
                  judge=JudgeConfig(rule="strict"), **kw)
