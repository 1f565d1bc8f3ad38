"""The language-model shape (karpathy/autoresearch): the script imports an `evaluate_*`
function from a local module, hands it the model (`val_bpb = evaluate_bpb(model, ...)`) and
prints the result. The metric is then graded by protected code (`grader: {kind: lm}`,
loop/run/graders/), never taken from the script's print. The held-out file is found by
importing the protected module with the repo's own interpreter (protected code, at init
time, in a subprocess)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from loop.script.source import Script
from loop.init.plan import InitError, Plan
from loop.setup.search_space import constants, number
from loop.init.shapes.base import Candidate, Scan, Shape


def candidates(scan: Scan) -> list[Candidate]:
    """The evaluation's result, when the script prints it as `name: value`."""
    local = local_names(scan)
    call = _eval_call(scan.script, local, scan.modules)
    if call is None:
        return []
    for name, expr in scan.script.printed():
        if getattr(expr, "id", None) == call[2]:
            return [Candidate(name, "lm", f"{call[1]}.{call[0]}'s result, printed as "
                              f"`{name}:` (graded again by protected code)", data=call)]
    return []


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    try:
        _lm_grader(plan, scan.script, local_names(scan), scan.known, chosen.data)
    except InitError as exc:                 # the way out: the printed number, unprotected
        raise InitError(f"{exc}; or read {chosen.name} unprotected from the run's output: "
                        f"pass --metric {chosen.name} --metric-pattern "
                        f"'^{chosen.name}:\\s*([0-9.]+)'") from None


def local_names(scan: Scan) -> dict[str, str]:
    """{name: module} for the names the script imports from its local modules."""
    return {name: mod for name, mod in scan.script.imports_from().items()
            if mod in scan.modules}


def _eval_call(src: Script, local: dict[str, str], modules: dict[str, Script]):
    """(function, module, result name, call) for `x = evaluate_*(model, ...)` where the
    function comes from a local module file that defines it (the grader imports
    `module.py`; a package's is not one); else None."""
    for func, mod in local.items():
        if not func.startswith(("evaluate", "eval_")):
            continue
        mod_src = modules[mod]
        if mod_src.path != f"{mod.replace('.', '/')}.py" or not mod_src.defines(func):
            continue
        for call in src.calls(func):
            target = src.assigned_from(call)
            if target and call.args and _simple_name(call.args[0]):
                return func, mod, target, call
    return None


def _simple_name(node) -> bool:
    """A variable such as `model` (an UPPER_CASE constant is a setting, not a model)."""
    import ast
    return isinstance(node, ast.Name) and not node.id.isupper()


def _lm_grader(plan: Plan, src: Script, local: dict, known: dict, call) -> None:
    import ast
    func, mod, _, node = call
    assigns = {**src.assigns(), **_assigned_before(src.tree, node)}
    args = ["model"]
    for arg in node.args[1:]:
        text = _protected_expr(arg, assigns, local, src)
        if text is None:
            raise InitError(f"init: {plan.script}: cannot pass `{ast.unparse(arg)}` of the "
                            f"call {ast.unparse(node)} to the grader: it must be built from "
                            f"{mod}'s names or a number")
        args.append(text)
    batch = next((int(number(a)) for a in args[1:] if re.fullmatch(r"\d+", a)), None)
    seq_name = next((n for n in ("MAX_SEQ_LEN", "SEQ_LEN", "BLOCK_SIZE", "CONTEXT_LEN")
                     if isinstance(known.get(n), int)), None)
    if batch is None or seq_name is None:
        raise InitError(f"init: cannot tell the (batch, sequence) shape the grader calls the "
                        f"model with: {ast.unparse(node)} and {', '.join(plan.protected)}'s "
                        f"constants give no batch size and sequence length")
    plan.grader = {"kind": "lm", "python": plan.python, "script": plan.script,
                   "eval_function": f"{mod}.{func}", "eval_call": f"{func}({', '.join(args)})",
                   "input_shape": [batch, known[seq_name]]}
    plan.held_out = [_held_out(plan, mod)]


def _assigned_before(tree, call) -> dict:
    """`name = expr` of the function that makes the evaluation call, above the call (the last
    one wins): a CPU fork builds its tokenizer and eval batch inside `main()`."""
    import ast
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))
                 and any(n is call for n in ast.walk(f))]
    if not functions:
        return {}
    body = sorted((n for n in ast.walk(functions[-1]) if isinstance(n, ast.Assign)
                   and n.lineno < call.lineno), key=lambda n: n.lineno)
    return {t.id: n.value for n in body for t in n.targets[:1] if len(n.targets) == 1
            and isinstance(t, ast.Name)}


def _number(expr, assigns: dict, values: dict, depth: int = 0) -> float | None:
    """The number an argument comes to from the script's constants, through the names it was
    assigned from, `min`/`max`, and a conditional's branches (`B if on_gpu else min(B, 8)`:
    the smaller branch, as the device is known only when it runs; the grader's batch splits
    the evaluation's fixed number of tokens, the same for every candidate); else None."""
    import ast
    if depth > 8:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) \
            and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id in values:
            return values[expr.id]
        return _number(assigns[expr.id], assigns, values, depth + 1) \
            if expr.id in assigns else None
    if isinstance(expr, ast.IfExp):
        branches, pick = [expr.body, expr.orelse], min
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) \
            and expr.func.id in ("min", "max") and not expr.keywords:
        branches, pick = expr.args, (min if expr.func.id == "min" else max)
    else:
        return None
    found = [_number(b, assigns, values, depth + 1) for b in branches]
    numbers = [v for v in found if v is not None]
    return pick(numbers) if numbers and len(numbers) == len(found) else None


def _protected_expr(arg, assigns: dict, local: dict, src: Script) -> str | None:
    """An argument of the evaluation call as the grader can write it: a number (an
    editable constant's value now), or an expression over the protected module's names."""
    import ast
    values = constants({src.path: src.source})
    v = _number(arg, assigns, values)
    if v is not None:
        return str(int(v)) if v == int(v) else repr(v)
    if isinstance(arg, ast.Name) and arg.id in assigns:
        arg = assigns[arg.id]
    names = {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
    if names and names <= set(local):
        return ast.unparse(arg)
    return None


PROBE = """\
import json, os, sys
sys.path.insert(0, os.getcwd())
import importlib
m = importlib.import_module(sys.argv[1])
out = {k: v for k, v in vars(m).items()
       if k.isupper() and isinstance(v, (str, int, float)) and not isinstance(v, bool)}
print("@@probe " + json.dumps(out))
"""


def _held_out(plan: Plan, mod: str) -> str:
    """The validation file the protected module reads: imported with the repo's own
    interpreter (its data paths are often computed: a cache folder, an env variable)."""
    values = probe_values(plan, mod)
    strings = {k: v for k, v in values.items() if isinstance(v, str)}
    dirs = [Path(v).expanduser() for k, v in strings.items() if k.endswith(("_DIR", "_PATH"))
            and Path(v).expanduser().is_dir()]
    named = [v for k, v in strings.items()
             if re.search(r"(^|_)(VAL|VALID|VALIDATION|TEST|EVAL)(_|$)", k)]
    found = []
    for v in named:
        path = Path(v).expanduser()
        if path.is_absolute() and path.exists():
            found.append(path)
        found += [d / v for d in dirs if not path.is_absolute() and (d / v).exists()]
    if not found:
        raise InitError(f"init: {mod}.py names no validation file that exists yet "
                        f"({', '.join(named) or 'no VAL_* constant'}): prepare the data first "
                        f"(e.g. `{plan.python} {mod}.py`)")
    path = found[0].resolve()
    if path == plan.top or plan.top in path.parents:
        raise InitError(f"init: the validation file {path} is inside the repo: held-out data "
                        f"must live outside it, where the training run cannot read it")
    # the data folders it reads (a tokenizer the grader trusts, training shards): shown to
    # both steps read-only; a folder holding another listed one is left out (the cache root)
    data = sorted({d.resolve() for d in dirs} - {plan.top}, key=str)
    plan.read_only = [_home_relative(d) for d in data
                      if not any(d in o.parents for o in data) and plan.top not in d.parents]
    return _home_relative(path)


def probe_values(plan: Plan, mod: str) -> dict:
    """The protected module's UPPER_CASE strings and numbers, as the repo's own interpreter
    computes them on import (protected code, at init time, in a subprocess)."""
    from loop.errors import TaskError
    from loop.setup.interpreter import argv
    try:        # the interpreter a run gets: `uv run python` is the .venv, never a sync
        cmd = [*argv(plan.python, plan.root), "-c", PROBE, mod]
    except TaskError as exc:        # it says `init: python: ...` itself
        raise InitError(str(exc)) from None
    try:
        done = subprocess.run(cmd, cwd=plan.root, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise InitError(f"init: `{cmd[0]}` not found: this repo runs with `{plan.python}` "
                        f"({plan.python_why}); install it, or run init where it is") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InitError(f"init: could not import {mod}.py with `{plan.python}`: {exc}") from None
    line = next((s for s in done.stdout.splitlines() if s.startswith("@@probe ")), None)
    if done.returncode != 0 or line is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InitError(f"init: could not import {mod}.py with `{plan.python}` to find its "
                        f"validation data: {last}")
    return json.loads(line[len("@@probe "):])


def _home_relative(path: Path) -> str:
    home = Path.home().resolve()
    return f"~/{path.relative_to(home).as_posix()}" if home in path.parents else str(path)


SHAPE = Shape("lm", "language-model repo (karpathy/autoresearch shape): protected grading",
              candidates, apply)
