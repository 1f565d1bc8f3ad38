"""The evaluator shape: the script the user runs (`train.py`) calls a local module it imports
(`prepare.evaluate(model, ...)`), and that module prints the summary (`val_auc: 0.8`, then
`test_auc: 0.79`). The module stays protected and the script is the editable file.

Graded by protected code (`grader: {kind: predictions}`, loop/run/graders/) where the repo
allows it: the protected module has a function of no arguments giving the validation rows'
features (`validation_features()`) and keeps their labels in a file of their own (a
`*LABEL*` constant naming a file outside the repo). The run then hands over its model's
predictions for those rows and the grader calls the real evaluation with them, the labels
hidden from training. Otherwise the metric is read from the run's output: printed by
protected code, but in the run's own process, so an edit could print a line of its own
(init says so, and what the repo would need)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from loop.init.plan import InitError, Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values
from loop.init.shapes.lm import probe_values
from loop.script.source import Script

FEATURES_NAME = re.compile(r"^(?:get_|load_)?(?:val|valid|validation)_?(?:features|inputs|x)$",
                           re.I)
LABELS_NAME = re.compile(r"LABEL", re.I)


def candidates(scan: Scan) -> list[Candidate]:
    out: list[Candidate] = []
    for mod, src in scan.modules.items():
        out += from_values(src, "evaluator",
                           f"printed by the protected {scan.module_file(mod)}, which "
                           f"{scan.script.path} imports")
    return out


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    why = _predictions_grader(plan, scan)
    if not why:
        return
    plan.notes.append(f"{chosen.name} is printed by protected code in the run's own process: "
                      f"an edit to {plan.script} could print a line of its own (for grading "
                      f"an edit cannot reach: {why}; or give task.yaml an `evaluate` "
                      f"command: docs/tasks.md)")


def _predictions_grader(plan: Plan, scan: Scan) -> str:
    """Fill in `grader: {kind: predictions}` when the repo allows it; else why it does not
    (what the protected module would need), in words."""
    call = _evaluation_call(scan)
    if call is None:
        return (f"{plan.script} would call a protected evaluation with its model as the "
                f"first argument")
    func, mod, node = call
    mod_src = scan.modules[mod]
    features = next((n.name for n in mod_src.tree.body if isinstance(n, ast.FunctionDef)
                     and FEATURES_NAME.match(n.name) and not _required_args(n)), None)
    if features is None:
        return (f"{scan.module_file(mod)} would define validation_features(), the validation "
                f"rows without their labels")
    if len(node.args) > 1 or node.keywords:
        return (f"{plan.script} would call {mod}.{func} with its model alone (it passes "
                f"{ast.unparse(node)})")
    try:
        labels = _labels(plan, mod)
    except InitError as exc:
        return str(exc).removeprefix("init: ")
    if not labels:
        return (f"{scan.module_file(mod)} would keep the validation labels in a file of "
                f"their own outside the repo, named by a constant (VAL_LABELS)")
    plan.grader = {"kind": "predictions", "python": plan.python, "script": plan.script,
                   "eval_function": f"{mod}.{func}", "eval_call": f"{func}(model)",
                   "features": f"{mod}.{features}"}
    plan.held_out = [_home_relative(labels)]
    plan.read_only = _data_folders(plan, mod, labels)
    return ""


def _evaluation_call(scan: Scan) -> tuple[str, str, ast.Call] | None:
    """(function, module, call) for the script's `evaluate(model, ...)` or
    `prepare.evaluate(model, ...)` of a local module that defines the function."""
    src: Script = scan.script
    modules = {a.asname or a.name: a.name for n in ast.walk(src.tree)
               if isinstance(n, ast.Import) for a in n.names if a.name in scan.modules}
    imported = {k: v for k, v in src.imports_from().items() if v in scan.modules}
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in imported:
            func, mod = f.id, imported[f.id]
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id in modules:
            func, mod = f.attr, modules[f.value.id]
        else:
            continue
        first = node.args[0]
        if func.startswith(("evaluate", "eval_")) and scan.modules[mod].defines(func) \
                and isinstance(first, ast.Name) and not first.id.isupper():
            return func, mod, node
    return None


def _required_args(node: ast.FunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs) + len(a.args) - len(a.defaults) + \
        sum(d is None for d in a.kw_defaults)


def _labels(plan: Plan, mod: str) -> Path | None:
    """The validation labels' file the protected module names (outside the repo)."""
    values = probe_values(plan, mod)
    for key, value in values.items():
        if not (isinstance(value, str) and LABELS_NAME.search(key)):
            continue
        path = Path(value).expanduser()
        if path.is_absolute() and path.is_file():
            path = path.resolve()
            if path == plan.top or plan.top in path.parents:
                raise InitError(f"init: the validation labels {path} are inside the repo: "
                                f"held-out data must live outside it")
            return path
    return None


def _data_folders(plan: Plan, mod: str, labels: Path) -> list[str]:
    """The module's data folders (`*_DIR`) that hold no labels: read-only to both steps."""
    values = probe_values(plan, mod)
    dirs = {Path(v).expanduser().resolve() for k, v in values.items()
            if isinstance(v, str) and k.endswith("_DIR") and Path(v).expanduser().is_dir()}
    keep = [d for d in dirs if d not in labels.parents and d != plan.top
            and plan.top not in d.parents]
    return sorted(_home_relative(d) for d in keep)


def _home_relative(path: Path) -> str:
    home = Path.home().resolve()
    return f"~/{path.relative_to(home).as_posix()}" if home in path.parents else str(path)


SHAPE = Shape("evaluator", "a script whose protected module evaluates and prints the metric",
              candidates, apply)
