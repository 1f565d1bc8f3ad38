"""The plain shape: the script prints its metric itself, as a `name: value` line
(`val_loss: 2.01`) or inside a log line (`step 200: train loss 1.9, val loss 2.0`, read with a
`metric.pattern`). No protected code grades it: the number is what the edited script prints."""
from __future__ import annotations

import ast

from loop.init.plan import Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values
from loop.setup.code_scan import Script


def candidates(scan: Scan) -> list[Candidate]:
    return from_values(scan.script, "script", f"printed by {scan.script.path}") \
        + trainer_eval_loss(scan.script)


def trainer_eval_loss(src: Script) -> list[Candidate]:
    """A Hugging Face `transformers.Trainer` (or `Seq2SeqTrainer`) the script builds with an
    `eval_dataset=`: the Trainer itself prints each evaluation's dict on stdout
    (`{'eval_loss': 1.23, 'epoch': 0.5}`, alpaca-lora), so `eval_loss` is a metric of the run
    though no print of the script shows it."""
    from loop.setup.metric import NUMBER
    trainers = {name for name, mod in src.imports_from().items()
                if mod.split(".")[0] == "transformers" and name.endswith("Trainer")}
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = func.id in trainers if isinstance(func, ast.Name) else isinstance(
            func, ast.Attribute) and func.attr.endswith("Trainer") and ast.unparse(
            func.value) == "transformers"
        evals = [k.value for k in node.keywords if k.arg == "eval_dataset"]
        if named and evals and not (isinstance(evals[0], ast.Constant)
                                    and evals[0].value is None):
            return [Candidate("eval_loss", "script",
                              f"printed by the Hugging Face {ast.unparse(func)} "
                              f"{src.path} builds with an eval_dataset (its evaluation dicts, "
                              f"{{'eval_loss': ...}})",
                              rf"['\"]eval_loss['\"]\s*:\s*{NUMBER}", file=src.path)]
    return []


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    pass                          # the run's command and the metric line are all it needs


SHAPE = Shape("script", "plain script printing its metric (`name: value` or a log line)",
              candidates, apply)
