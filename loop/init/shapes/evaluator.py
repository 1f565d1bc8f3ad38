"""The evaluator shape: the script the user runs (`train.py`) calls a local module it imports
(`prepare.evaluate(model, X_val, ...)`), and that module prints the summary (`val_auc: 0.8`,
then `test_auc: 0.79`). The module stays protected, the script is the editable file, and the
metric is read from the run's output: printed by protected code, but in the run's own
process, so an edit could print a line of its own (init says so)."""
from __future__ import annotations

from loop.init.plan import Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values


def candidates(scan: Scan) -> list[Candidate]:
    out: list[Candidate] = []
    for mod, src in scan.modules.items():
        out += from_values(src, "evaluator",
                           f"printed by the protected {scan.module_file(mod)}, which "
                           f"{scan.script.path} imports")
    return out


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    plan.notes.append(f"{chosen.name} is printed by protected code in the run's own process: "
                      f"an edit to {plan.script} could print a line of its own (for grading "
                      f"an edit cannot reach, give task.yaml an `evaluate` command: "
                      f"docs/tasks.md)")


SHAPE = Shape("evaluator", "a script whose protected module evaluates and prints the metric",
              candidates, apply)
