"""`autoresearch init [REPO]`: read a repo and write the task.yaml and the run config a bare
`autoresearch run` picks up, saying what was found and where each value came from.

Two shapes are recognised:
- a language-model repo in karpathy/autoresearch's shape: an editable script that imports an
  `evaluate_*` function from a local module (protected) and prints its result in a
  `name: value` summary. The metric is then graded by protected code (`grader: {kind: lm}`,
  loop/run/graders/), never taken from the script's print;
- a plain script that prints `name: value` lines. There is no protected grader then, and
  init says so: the number is what the edited script prints.

Everything is read statically with `ast`, except the held-out file of the lm shape, which is
found by importing the protected module with the repo's own interpreter (protected code, at
init time, in a subprocess). Any problem: one line, exit 2, nothing written."""
from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from loop.setup.code_scan import Script
from loop.errors import UsageError
from loop.setup.search_space import constants, number

CONFIG_FILE = "autoresearch.yaml"
TASK_FILE = "task.yaml"
# words of a metric's name -> its direction
MINIMIZE = ("bpb", "loss", "perplexity", "ppl", "error", "err", "rmse", "mse", "mae", "nll",
            "wer", "cer", "bpc")
MAXIMIZE = ("acc", "accuracy", "score", "f1", "auc", "r2", "reward", "success", "bleu", "rouge",
            "precision", "recall", "pass_rate", "top1", "top5", "map", "iou", "dice")
HELD_OUT_PREFIX = ("val", "valid", "validation", "test", "eval", "dev")
BUDGET_NAME = re.compile(r"^(TIME_BUDGET|TIME_LIMIT|TRAIN(?:ING)?_SECONDS|MAX_SECONDS|"
                         r"BUDGET_S(?:ECONDS)?|TIME_BUDGET_S)$")
MEMORY_NAME = re.compile(r"^peak_?(?:memory|mem|vram|gpu_mem\w*)_mb$|^(?:memory|vram)_mb$")
SCRIPT_NAMES = ("train.py", "main.py", "run.py")
DEFAULT_BUDGET_S = 60.0


class InitError(UsageError):
    """Why init wrote nothing (one line)."""


@dataclass
class Plan:
    root: Path                          # the task folder (the repo, or a folder in it)
    top: Path                           # its git top level
    shape: str                          # "lm" | "script"
    script: str
    name: str = ""
    description: str = ""
    editable: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    python: str = "python"
    python_why: str = ""
    metric: str = ""
    direction: str = "minimize"
    metric_why: str = ""
    budget: float = DEFAULT_BUDGET_S
    budget_constant: str = ""
    budget_why: str = ""
    grace: float = 30.0
    throughput: str = ""
    memory: str = ""                    # the printed memory figure's name
    space: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    grader: dict = field(default_factory=dict)
    held_out: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reads_budget: bool = False          # the script reads AUTORESEARCH_TIME_BUDGET


# -- entry point ---------------------------------------------------------------------------------
def init(repo: str | Path = ".", metric: str | None = None, direction: str | None = None,
         script: str | None = None, time_budget_s: float | None = None, force: bool = False,
         out=print) -> Plan:
    plan = analyse(repo, metric, direction, script, time_budget_s, force)
    write(plan)
    for line in describe(plan):
        out(line)
    return plan


def analyse(repo, metric=None, direction=None, script=None, time_budget_s=None,
            force=False) -> Plan:
    root = Path(repo).expanduser().resolve()
    if not root.is_dir():
        raise InitError(f"init: {root} is not a folder")
    top = _git_top(root)
    for path in (root / TASK_FILE, top / CONFIG_FILE):
        if path.exists() and not force:
            raise InitError(f"init: {path} already exists (pass --force to overwrite it)")
    rel = _pick_script(root, script)
    try:
        src = Script(rel, (root / rel).read_text(errors="replace"))
    except SyntaxError as exc:
        raise InitError(f"init: {rel} does not parse: {exc.msg} (line {exc.lineno})") from None
    plan = Plan(root=root, top=top, shape="script", script=rel, editable=[rel])
    plan.python, plan.python_why = _interpreter(root)
    local = {name: mod for name, mod in src.imports_from().items()
             if (root / f"{mod.replace('.', '/')}.py").is_file()}
    plan.protected = sorted({f"{mod.replace('.', '/')}.py" for mod in local.values()})
    _check_clean(plan, [rel, *plan.protected, "program.md", "README.md"], force)
    known = {}                                   # the protected modules' literals
    for mod_file in plan.protected:
        known.update(Script(mod_file, (root / mod_file).read_text(errors="replace")).literals())
    printed = dict(src.printed())
    call = _eval_call(src, local, root)
    _choose_metric(plan, src, printed, call, metric, direction)
    if call is not None and plan.metric == call[2]:
        plan.shape = "lm"
        _lm_grader(plan, src, local, known, call)
    _budget(plan, src, local, known, time_budget_s)
    _patterns(plan, printed)
    _space(plan, src, known)
    plan.name = root.name
    plan.description = _description(plan)
    return plan


# -- the pieces ----------------------------------------------------------------------------------
def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def _git_top(root: Path) -> Path:
    done = _git(root, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise InitError(f"init: {root} is not a git repository (run `git init` and commit "
                        f"your code first: the loop runs on branches of it)")
    return Path(done.stdout.strip()).resolve()


def _check_clean(plan: Plan, names: list[str], force: bool) -> None:
    """The files init reads and writes must be committed: the loop runs on a branch from
    HEAD, so what init read must be what the loop runs. (--force may overwrite its own
    two files whatever their state.)"""
    paths = [(plan.root / n) for n in names]
    if not force:
        paths += [plan.root / TASK_FILE, plan.top / CONFIG_FILE]
    rels = [p.relative_to(plan.top).as_posix() for p in paths if p.exists()]
    done = _git(plan.top, "status", "--porcelain", "--", *rels)
    dirty = [line[3:] for line in done.stdout.splitlines() if line.strip()]
    if dirty:
        raise InitError(f"init: uncommitted changes in {', '.join(dirty)}: commit them first "
                        f"(the loop runs on a branch from HEAD)")


def _pick_script(root: Path, script: str | None) -> str:
    if script:
        if not (root / script).is_file():
            raise InitError(f"init: --script {script}: no such file in {root}")
        return script
    printing = [p.name for p in sorted(root.glob("*.py")) if _prints_values(p)]
    for name in SCRIPT_NAMES:
        if name in printing:
            return name
    if len(printing) == 1:
        return printing[0]
    if not printing:
        raise InitError(f"init: no metric found: no Python script in {root} prints a "
                        f"`name: value` line (e.g. print(f\"val_loss: {{loss:.4f}}\"))")
    raise InitError(f"init: several scripts print values ({', '.join(printing)}): pass "
                    f"--script FILE")


def _prints_values(path: Path) -> bool:
    try:
        return bool(Script(path.name, path.read_text(errors="replace")).printed())
    except SyntaxError:
        return False


def _interpreter(root: Path) -> tuple[str, str]:
    if (root / "pyproject.toml").is_file() and (root / "uv.lock").is_file():
        return "uv run python", "pyproject.toml + uv.lock: the repo's uv environment"
    if (root / ".venv" / "bin" / "python").exists():
        return ".venv/bin/python", "the repo's .venv"
    return "python", "no uv.lock or .venv: the engine's interpreter"


def _eval_call(src: Script, local: dict[str, str], root: Path):
    """(function, module, result name, call) for `x = evaluate_*(model, ...)` where the
    function comes from a local module that defines it; else None."""
    for func, mod in local.items():
        if not func.startswith(("evaluate", "eval_")):
            continue
        mod_src = Script(f"{mod}.py", (root / f"{mod.replace('.', '/')}.py").read_text())
        if not mod_src.defines(func):
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


def _direction(name: str) -> str | None:
    words = re.split(r"[_.\W]+", name.lower())
    if any(w in MINIMIZE for w in words):
        return "minimize"
    if any(w in MAXIMIZE for w in words) or name.lower() in MAXIMIZE:
        return "maximize"
    return None


def _choose_metric(plan: Plan, src: Script, printed: dict, call, metric, direction) -> None:
    names = list(printed)
    if metric:
        if metric not in printed:
            raise InitError(f"init: no metric found: {plan.script} prints no `{metric}: "
                            f"value` line (it prints: {', '.join(names) or 'none'})")
        plan.metric, plan.metric_why = metric, "--metric"
    elif call is not None and call[2] in {getattr(e, "id", None) for e in printed.values()}:
        name = next(n for n, e in printed.items() if getattr(e, "id", None) == call[2])
        plan.metric = name
        plan.metric_why = f"{call[1]}.{call[0]}'s result, printed as `{name}:`"
    else:
        likely = [n for n in names if _direction(n)]
        if not names:
            raise InitError(f"init: no metric found: {plan.script} prints no `name: value` "
                            f"line")
        if len(names) == 1:
            plan.metric, plan.metric_why = names[0], "the only value it prints"
        elif not likely:
            raise InitError(f"init: no metric found among the values {plan.script} prints "
                            f"({', '.join(names)}): pass --metric NAME")
        else:
            held = [n for n in likely if n.lower().split("_")[0] in HELD_OUT_PREFIX]
            plan.metric = (held or likely)[-1]
            others = [n for n in names if n != plan.metric]
            plan.metric_why = (f"picked among {len(names)} printed values (loss/bpb/accuracy-"
                               f"like names first; others: {', '.join(others)})")
    guessed = _direction(plan.metric)
    plan.direction = direction or guessed or "minimize"
    how = "--direction" if direction else "from its name" if guessed else \
        "a guess (pass --direction)"
    plan.metric_why += f"; {plan.direction} ({how})"


def _lm_grader(plan: Plan, src: Script, local: dict, known: dict, call) -> None:
    import ast
    func, mod, _, node = call
    assigns = src.assigns()
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


def _protected_expr(arg, assigns: dict, local: dict, src: Script) -> str | None:
    """An argument of the evaluation call as the grader can write it: a number (an
    editable constant's value now), or an expression over the protected module's names."""
    import ast
    values = constants({src.path: src.source})
    if isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float)):
        return repr(arg.value)
    if isinstance(arg, ast.Name) and arg.id in values:
        v = values[arg.id]
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
    from loop.errors import TaskError
    from loop.setup.interpreter import argv
    try:        # the interpreter a run gets: `uv run python` is the .venv, never a sync
        cmd = [*argv(plan.python, plan.root), "-c", PROBE, mod]
    except TaskError as exc:
        raise InitError(f"init: {exc}") from None
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
    values = json.loads(line[len("@@probe "):])
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


def _home_relative(path: Path) -> str:
    home = Path.home().resolve()
    return f"~/{path.relative_to(home).as_posix()}" if home in path.parents else str(path)


def _budget(plan: Plan, src: Script, local: dict, known: dict, override) -> None:
    """Where the training budget lives: a constant of a protected module the script imports
    (karpathy's prepare.TIME_BUDGET), one of the script itself, or the engine's variable."""
    own = src.literals()
    found = [(n, f"{local[n].replace('.', '/')}.py", known.get(n)) for n in local
             if BUDGET_NAME.match(n)]
    found += [(n, plan.script, own.get(n)) for n in own if BUDGET_NAME.match(n)]
    found = [f for f in found if isinstance(f[2], (int, float)) and f[2] > 0]
    if src.mentions("AUTORESEARCH_TIME_BUDGET"):
        plan.reads_budget = True
        plan.budget = override or DEFAULT_BUDGET_S
        plan.budget_why = (f"{plan.budget:g}s " + ("(--time-budget)" if override else
                           "(default)") + f"; {plan.script} reads AUTORESEARCH_TIME_BUDGET")
    elif found:
        name, file, value = found[0]
        # `found` holds numbers only (filtered above), which mypy cannot see
        plan.budget = float(value)  # type: ignore[arg-type]
        plan.budget_constant = f"{file}:{name}"
        if override and override != plan.budget:
            raise InitError(f"init: --time-budget: the training budget is {file}:{name} = "
                            f"{value:g}s in the repo's code; change it there")
        plan.budget_why = f"{value:g}s from {file}:{name}"
        if file == plan.script:
            plan.notes.append(f"the budget {name} lives in the editable {file}: an edit can "
                              f"change it (it is left out of the search space)")
    else:
        plan.budget = override or DEFAULT_BUDGET_S
        plan.budget_why = (f"{plan.budget:g}s " + ("(--time-budget)" if override else
                           "(default; the script has no time budget of its own, so the loop "
                           "kills a run at this + grace)"))
    # start-up (imports, compilation, data) and, for the lm shape, the model's export
    plan.grace = max(60.0, plan.budget) if plan.shape == "lm" else max(30.0, plan.budget / 2)


def _patterns(plan: Plan, printed: dict) -> None:
    if "num_steps" in printed:
        plan.throughput = "num_steps"
    plan.memory = next((n for n in printed if MEMORY_NAME.match(n)), "")


def _space(plan: Plan, src: Script, known: dict) -> None:
    """`search_space` for mutate: the script's numeric UPPER_CASE constants, less the
    display-only ones and the budget, with the code's asserts as conditions."""
    values = constants({plan.script: src.source})
    budget = plan.budget_constant.split(":")[-1] if plan.budget_constant.startswith(
        f"{plan.script}:") else None
    shown = src.display_only(set(values), plan.metric)
    plan.skipped = sorted(shown) + ([budget] if budget in values else [])
    texts = _sources(src.source)
    space = {}
    for name, v in values.items():
        if name in plan.skipped:
            continue
        spec = _dim_spec(name, v, texts.get(name, ""))
        if spec:
            space[name] = spec
    plan.conditions = src.conditions(set(space), known)
    for cond in plan.conditions:
        first = next(n for n in space if re.search(rf"\b{n}\b", cond))
        space[first].setdefault("requires", []).append(cond)
    plan.space = space


def _sources(source: str) -> dict[str, str]:
    from loop.setup.search_space import CONSTANT, POWER
    out: dict[str, str] = {}
    for rx in (CONSTANT, POWER):
        for m in rx.finditer(source):
            out.setdefault(m["name"], m["value"])
    return out


def _dim_spec(name: str, v: float, text: str) -> dict | None:
    """A range around the current value that a name and a value suggest."""
    is_int = re.fullmatch(r"[-+]?\d[\d_]*", text) is not None or "**" in text
    power = is_int and v >= 2 and int(v) & (int(v) - 1) == 0
    if "**" in text or (power and (v >= 16 or "BATCH" in name)):
        k = int(math.log2(v))
        return {"pow2": [max(0, k - 3), k + 2]}
    if is_int:
        if v <= 0:
            return None
        return {"range": [max(1, int(v) // 2), int(v) * 2], "integer": True}
    if re.search(r"BETA", name) and 0 < v < 1:
        return {"range": [0.5, 0.999]}
    if re.search(r"RATIO|FRAC|DROPOUT|PROB", name) and 0 <= v <= 1:
        return {"range": [0.0, 1.0]}
    if v == 0:
        return {"range": [0.0, 0.2]}
    if v > 0:
        return {"log_range": [_round(v / 4), _round(v * 4)]}
    return None


def _round(v: float) -> float:
    return float(f"{v:.3g}")


def _description(plan: Plan) -> str:
    """The repo's own words (program.md, else README: the first prose paragraph), then
    what the engine will do, in ours."""
    para = ""
    for name in ("program.md", "README.md"):
        path = plan.root / name
        if path.is_file():
            para = _first_paragraph(path.read_text(errors="replace"))
            if para:
                break
    better = "lower" if plan.direction == "minimize" else "higher"
    how = (f"graded by the protected {plan.grader['eval_function']}"
           if plan.grader else f"as {plan.script} prints it (unprotected)")
    tail = (f"{plan.metric}: {better} is better, {how}. Only {', '.join(plan.editable)} may "
            f"change" + (f"; {', '.join(plan.protected)} is read-only" if plan.protected
                         else "") + (f". Each run trains for {plan.budget:g}s."
                                     if plan.budget_constant or plan.reads_budget else
                                     f". A run is stopped after {plan.budget + plan.grace:g}s."))
    return f"{para} {tail}".strip()


def _first_paragraph(text: str) -> str:
    block: list[str] = []
    for line in text.splitlines() + [""]:
        s = line.strip()
        if not s:
            if block:
                break
            continue
        if s.startswith(("#", "!", "<", "[!", "---", "```", "|")):   # headings, images, html
            if block:
                break
            continue
        block.append(s)
    para = " ".join(block)
    if len(para) > 300:
        cut = para[:300].rfind(". ")
        para = para[:cut + 1] if cut > 80 else para[:297] + "..."
    return para


# -- writing -------------------------------------------------------------------------------------
def _q(value) -> str:
    """A YAML scalar: JSON's quoting is valid YAML."""
    return json.dumps(value) if isinstance(value, str) else json.dumps(value)


def _flow(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and re.fullmatch(r"[\w./~-]+", value) and not \
            re.fullmatch(r"(true|false|null|yes|no|on|off|[-+.\d].*)", value, re.I):
        return value
    return _q(value)


def task_yaml(plan: Plan) -> str:
    import textwrap
    lines = ["# Written by `autoresearch init` from this repo's code. Edit freely; commit it.",
             f"name: {_flow(plan.name)}", "description: >-"]
    lines += ["  " + s for s in textwrap.wrap(plan.description, 88)] or ["  ''"]
    lines += [f"editable: {_flow(plan.editable)}"]
    if plan.protected:
        lines += [f"protected: {_flow(plan.protected)}"]
    if plan.grader:
        lines += ["grader:                 # protected grading, loop/run/graders/ (docs/tasks.md)"]
        lines += [f"  {k}: {_flow(v)}" for k, v in plan.grader.items()]
        lines += [f"held_out: {_flow(plan.held_out)}   # hidden from training, read by the "
                  f"grader"]
        if plan.read_only:
            lines += [f"read_only: {_flow(plan.read_only)}   # read by both steps, changed by "
                      f"neither (checked before each grading)"]
    else:
        lines += [f"run: {_flow(f'{plan.python} {plan.script}')}   # unprotected metric: the "
                  f"number is what the edited script prints"]
    lines += [f"metric: {_flow({'name': plan.metric, 'direction': plan.direction})}",
              f"time_budget_s: {plan.budget:g}"]
    if plan.budget_constant:
        lines += [f"budget_constant: {plan.budget_constant}   # --time-budget is refused: "
                  f"change the constant"]
    lines += [f"grace_s: {plan.grace:g}                  # start-up"
              + (", compilation and the model's export" if plan.grader else " and shut-down")]
    if plan.throughput:
        lines += [f"throughput_pattern: {plan.throughput}"]
    if plan.memory:
        pattern = r"^\s*" + re.escape(plan.memory) + r"\s*[:=]\s*([0-9.]+)"
        lines += [f"memory_pattern: {_q(pattern)}"]
    if plan.space:
        lines += ["search_space:                 # for `--proposer mutate`"
                  + (f"; left out: {', '.join(plan.skipped)}" if plan.skipped else "")]
        lines += [f"  {k}: {_flow(v)}" for k, v in plan.space.items()]
    return "\n".join(lines) + "\n"


def config_yaml(plan: Plan) -> str:
    task = plan.root.relative_to(plan.top).as_posix() or "."
    program = "program.md" if (plan.top / "program.md").is_file() else None
    lines = ["# Written by `autoresearch init`: a bare `autoresearch run` here reads this file.",
             "# Flags override any key (e.g. --proposer llm --model M, --iterations N).",
             f"task: {task}", "iterations: 20"]
    if program:
        lines += [f"program: {program}               # steers the proposals, re-read each "
                  f"iteration"]
    lines += ["proposer:", "  kind: mutate                 # offline random search over "
              "search_space; or llm (--model M)",
              "judge:", "  rule: sequential             # keep a gain only when it beats the "
              "measured run-to-run noise; the promising confirmed next to runs of the best"]
    return "\n".join(lines) + "\n"


def write(plan: Plan) -> None:
    """Write both files, then load them as the engine will; on failure put back what was
    there (nothing written)."""
    from loop.setup.config import load_config
    from loop.setup.task import load_task
    targets = {plan.root / TASK_FILE: task_yaml(plan), plan.top / CONFIG_FILE: config_yaml(plan)}
    before = {p: p.read_text() if p.exists() else None for p in targets}
    try:
        for path, text in targets.items():
            path.write_text(text)
        load_task(plan.root)
        load_config(plan.top / CONFIG_FILE)
    except BaseException as exc:
        for path, old in before.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(old)
        if isinstance(exc, UsageError):
            raise InitError(f"init: the task it would write does not load: {exc}") from None
        raise


def describe(plan: Plan) -> list[str]:
    shape = ("language-model repo (karpathy/autoresearch shape): protected grading"
             if plan.shape == "lm" else "plain script printing `name: value` lines")
    where = plan.root.relative_to(plan.top).as_posix() or "."
    lines = [f"init: {plan.root}",
             f"  shape:      {shape}",
             f"  editable:   {', '.join(plan.editable)}",
             f"  protected:  {', '.join(plan.protected) or 'none'}"]
    if plan.grader:
        lines += [f"  run:        {plan.python} {plan.script}, handing its model to "
                  f"{plan.grader['eval_function']} ({plan.python_why})",
                  f"  grader:     lm: {plan.grader['eval_call']} at input shape "
                  f"{plan.grader['input_shape']}, on held-out {', '.join(plan.held_out)}",
                  f"  read-only:  {', '.join(plan.read_only) or 'none'} (no run may change "
                  f"what the grader reads besides the held-out data)"]
    else:
        lines += [f"  run:        {plan.python} {plan.script} ({plan.python_why})",
                  "  grader:     none: unprotected metric: the number is what the edited "
                  "script prints"]
    lines += [f"  metric:     {plan.metric}, {plan.metric_why}",
              f"  budget:     {plan.budget_why}; grace {plan.grace:g}s"
              + ("; --time-budget is refused (the code holds the budget)"
                 if plan.budget_constant else ""),
              f"  throughput: {plan.throughput or 'none (no num_steps line)'}",
              f"  memory:     {plan.memory or 'none printed'}",
              f"  search:     {len(plan.space)} constants for mutate"
              + (f" ({', '.join(plan.conditions)})" if plan.conditions else "")
              + (f"; left out: {', '.join(plan.skipped)} (display-only or the budget)"
                 if plan.skipped else ""),
              "  judge:      noise, paired (autoresearch.yaml)"]
    lines += [f"  note:       {n}" for n in plan.notes]
    files = [(plan.root / TASK_FILE).relative_to(plan.top).as_posix(), CONFIG_FILE]
    lines += [f"wrote {', '.join(files)}; next:"]
    if Path.cwd().resolve() != plan.top:
        lines += [f"  cd {plan.top}"]
    lines += [f"  git add {' '.join(files)} && git commit -m 'autoresearch task'",
              f"  autoresearch check-task {where}",
              "  autoresearch run"]
    return lines
