"""The protected graders the engine provides, by name and path: what a task's `grader:` may
name (`kind`) and the files its steps run (loop/run/graders/, run by path in the task's own
interpreter, so they are named here, where the task is loaded, and imported by nothing)."""
from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "run" / "graders"
HANDOVER = FOLDER / "handover.py"   # the training step: the script hands its model over
LM = FOLDER / "lm.py"               # the grading step: scores the handed-over model
HAND_PREDICTIONS = FOLDER / "hand_predictions.py"   # evaluator shape: predictions handed over
PREDICTIONS = FOLDER / "predictions.py"   # ... and the evaluation called with them
STARTUP = FOLDER / "startup"        # the grading step's PYTHONPATH: its sitecustomize alone
KINDS = ("lm", "predictions")
