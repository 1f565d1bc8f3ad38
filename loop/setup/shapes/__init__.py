"""The repo shapes `autoresearch init` reads: a registry, not branches. Each shape module
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

import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from loop.setup.code_scan import Script, Value


@dataclass
class Scan:
    """What init read of the repo: the script and the local modules it imports."""
    root: Path
    script: Script
    modules: dict[str, Script] = field(default_factory=dict)    # module name -> its code
    known: dict[str, object] = field(default_factory=dict)      # the modules' literals

    def module_file(self, mod: str) -> str:
        return f"{mod.replace('.', '/')}.py"


@dataclass
class Candidate:
    """A metric a shape can grade."""
    name: str
    shape: str
    source: str                  # who prints it, in words
    pattern: str = ""            # metric.pattern ("": the default `name: value` line)
    sure: bool = True            # a number for certain (a numeric format, arithmetic)
    data: Any = None             # the shape's own (lm: the evaluation call)


@dataclass(frozen=True)
class Shape:
    key: str
    words: str                   # the shape, as init prints it
    candidates: Callable[[Scan], list[Candidate]]
    apply: Callable[..., None]   # (plan, scan, candidate)


def pattern_for(value: Value) -> str:
    """`metric.pattern` for a value: "" for a `name: value` line (the task's default reads
    it), else a regex for its label inside the line: `val loss 2.0` ->
    `\\bval\\s+loss\\s*[:=]?\\s*(NUMBER)`."""
    if value.default_line:
        return ""
    from loop.setup.task import NUMBER
    words = r"\s+".join(re.escape(w) for w in value.label.split())
    return rf"\b{words}\s*[:=]?\s*{NUMBER}"


def from_values(values: list[Value], shape: str, source: str) -> list[Candidate]:
    return [Candidate(v.name, shape, source, pattern_for(v), v.sure) for v in values]


def registry() -> list[Shape]:
    from loop.setup.shapes import evaluator, lm, script
    return [lm.SHAPE, evaluator.SHAPE, script.SHAPE]


def shape(key: str) -> Shape:
    return next(s for s in registry() if s.key == key)
