"""Protected graders the engine runs by path, in the task's own interpreter (they import only
the standard library and torch). `lm`: language models handed over as torch.export programs
(handover.py in the training run, lm.py in the grader); see docs/tasks.md."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
HANDOVER = HERE / "handover.py"
LM = HERE / "lm.py"
KINDS = ("lm",)
