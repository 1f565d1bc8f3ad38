"""The repo shapes `autoresearch init` reads: a registry, not branches (their interface is
base.py). Each shape module
offers the metrics it could grade (`candidates`) and, once one is chosen, fills in the plan
for it (`apply`):

- `lm`: karpathy/autoresearch's shape: the script hands its model to a protected
  `evaluate_*` and prints the result; graded again by protected code (`grader: {kind: lm}`);
- `evaluator`: the script calls a protected local module that prints the summary itself
  (`prepare.evaluate(model, ...)` printing `val_auc: 0.8`); the run's output is read;
- `script`: the script prints `name: value` lines, or log lines (`step 200: train loss 1.9,
  val loss 2.0`, read with a `metric.pattern`).

The order is the preference: a metric protected code grades comes first."""
from __future__ import annotations

from loop.init.shapes.base import Shape
from loop.registry import Registry

# the order is the preference
SHAPES = Registry("repo shape", {
    "lm": "loop.init.shapes.lm:SHAPE",
    "evaluator": "loop.init.shapes.evaluator:SHAPE",
    "script": "loop.init.shapes.script:SHAPE",
})


def all_shapes() -> list[Shape]:
    """Every shape, in order of preference."""
    return [SHAPES.get(key) for key in SHAPES]


def shape(key: str) -> Shape:
    return SHAPES.get(key)
