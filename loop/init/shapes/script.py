"""The plain shape: the script prints its metric itself, as a `name: value` line
(`val_loss: 2.01`) or inside a log line (`step 200: train loss 1.9, val loss 2.0`, read with a
`metric.pattern`). No protected code grades it: the number is what the edited script prints."""
from __future__ import annotations

from loop.init.plan import Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values


def candidates(scan: Scan) -> list[Candidate]:
    return from_values(scan.script, "script", f"printed by {scan.script.path}")


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    pass                          # the run's command and the metric line are all it needs


SHAPE = Shape("script", "plain script printing its metric (`name: value` or a log line)",
              candidates, apply)
