"""The plain shape: the script prints its metric itself, as a `name: value` line
(`val_loss: 2.01`) or inside a log line (`step 200: train loss 1.9, val loss 2.0`, read with a
`metric.pattern`). No protected code grades it: the number is what the edited script prints."""
from __future__ import annotations

import ast

from loop.script.measurement import trainer_evaluation
from loop.init.plan import Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values
from loop.script.source import Script


def candidates(scan: Scan) -> list[Candidate]:
    return from_values(scan.script, "script", f"printed by {scan.script.path}") \
        + trainer_eval_loss(scan.script)


def trainer_eval_loss(src: Script) -> list[Candidate]:
    """A Hugging Face `transformers.Trainer` (or `Seq2SeqTrainer`) the script builds with an
    `eval_dataset=`: the Trainer itself prints each evaluation's dict on stdout
    (`{'eval_loss': 1.23, 'epoch': 0.5}`, alpaca-lora), so `eval_loss` is a metric of the run
    though no print of the script shows it."""
    from loop.setup.metric import NUMBER
    node = trainer_evaluation(src)
    if node is None:
        return []
    return [Candidate("eval_loss", "script",
                      f"printed by the Hugging Face {ast.unparse(node.func)} "
                      f"{src.path} builds with an eval_dataset (its evaluation dicts, "
                      f"{{'eval_loss': ...}})",
                      rf"['\"]eval_loss['\"]\s*:\s*{NUMBER}", file=src.path)]


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    pass                          # the run's command and the metric line are all it needs


SHAPE = Shape("script", "plain script printing its metric (`name: value` or a log line)",
              candidates, apply)
