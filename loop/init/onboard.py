"""`autoresearch init [REPO]`: read a repo and write the task.yaml and the run config a bare
`autoresearch run` picks up, saying what it found, what it guessed, and the flag that
changes each guess.

Here: the budget, the interpreter, the files the plan names; which script the user runs,
which local modules it imports (protected) and what of them a run executes is
loop/init/script_choice.py. The repo's shape (who prints or grades the metric) is a registry,
loop/init/shapes/; the metric's choice is loop/init/metric_choice.py; the search space
and a fixed seed, loop/init/settings_choice.py; the plan said back and written,
loop/init/plan.py. Everything is read statically with `ast`, except the held-out file of
the lm shape (loop/init/shapes/lm.py). Any problem or any ambiguity it cannot settle: one
line, exit 2, nothing written."""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
from pathlib import Path

from loop.script.prints import call_values
from loop.script.source import Script
from loop.script.seeds import fixed_seeds
from loop.init.metric_choice import choose
from loop.setup.flags import SEED_VALUE
from loop.init.plan import (CONFIG_FILE, DEFAULT_BUDGET_S, TASK_FILE, Guess, InitError, Plan,
                             describe, task_yaml, write)
from loop.init.settings_choice import (FLAGS_FILE, explain_empty,
                                      leave_out_measuring, search_space, with_config,
                                      with_config_files, with_flags)
from loop.init.shapes import all_shapes, shape
from loop.init.shapes.base import Scan
from loop.init.shapes.lm import local_names
from loop.init.script_choice import (executed, local_modules, model_packages, parse,
                                      pick_script)
from loop.repo.queries import ignored_untracked
from loop.script.cache_paths import find as find_caches, home_relative, moved, prepare_step
from loop.script.named_data import named_data
from loop.script.periodic import prints_in_loop
from loop.setup.taskfiles import COPY_SKIP

__all__ = ["CONFIG_FILE", "TASK_FILE", "InitError", "Plan", "analyse", "init", "task_yaml"]

BUDGET_NAME = re.compile(r"^(TIME_BUDGET|TIME_LIMIT|TRAIN(?:ING)?_SECONDS|MAX_SECONDS|"
                         r"BUDGET_S(?:ECONDS)?|TIME_BUDGET_S)$")
MEMORY_NAME = re.compile(r"^peak_?(?:memory|mem|vram|gpu_mem\w*)_mb$|^(?:memory|vram)_mb$")


# -- entry point ---------------------------------------------------------------------------------
def init(repo: str | Path = ".", metric: str | None = None, direction: str | None = None,
         script: str | None = None, time_budget_s: float | None = None, force: bool = False,
         metric_pattern: str | None = None, script_args: str | None = None,
         inputs: list[str] | None = None, out=print) -> Plan:
    plan = analyse(repo, metric, direction, script, time_budget_s, force, metric_pattern,
                   script_args, inputs)
    write(plan)
    for line in describe(plan):
        out(line)
    return plan


def analyse(repo, metric=None, direction=None, script=None, time_budget_s=None,
            force=False, metric_pattern=None, script_args=None, inputs=None) -> Plan:
    root = Path(repo).expanduser().resolve()
    if not root.is_dir():
        raise InitError(f"init: {root} is not a folder")
    top = _git_top(root)
    choice = pick_script(root, script, metric_pattern)
    root, rel = choice.folder, choice.script      # a folder the README points at, maybe
    for path in (root / TASK_FILE, top / CONFIG_FILE, root / FLAGS_FILE):
        if path.exists() and not force:
            raise InitError(f"init: {path} already exists (pass --force to overwrite it)")
    src = parse(root, rel)
    modules = local_modules(root, src)
    plan = Plan(root=root, top=top, shape="script", script=rel, editable=[rel])
    plan.guesses["script"] = choice.guess
    if choice.looked:
        plan.notes.append(f"no script at the folder init was given reports numbers; it looked "
                          f"in {choice.looked} and found {plan.root.relative_to(top).as_posix()}"
                          f"/{rel}: the task folder is its folder, where it runs")
    plan.args, config = _script_args(root, script_args, modules)
    if config:              # the settings file the run is given: what the run trains with
        plan.editable.append(config.path)
    plan.python, plan.python_why = _interpreter(root)
    plan.protected = sorted(code.path for code in modules.values())
    _check_clean(plan, [rel, *plan.editable, *plan.protected, "program.md", "README.md"],
                 force)
    known: dict[str, object] = {}                # the protected modules' literals
    for mod_src in modules.values():
        known.update(mod_src.literals())
    ran = executed(modules, src)                 # what of each module a run executes
    scan = Scan(root, src, ran, known)
    found = [c for s in all_shapes() for c in s.candidates(scan)]
    chosen = choose(plan, found, metric, metric_pattern, direction)
    kind = shape(chosen.shape)
    plan.shape, plan.shape_line = kind.key, kind.words
    kind.apply(plan, scan, chosen)
    if plan.grader and plan.args:
        raise InitError(f"init: --args: the {plan.grader['kind']} grader runs the script "
                        f"through its handover, without arguments; give its settings in the "
                        f"script instead")
    files = {mod: code.path for mod, code in modules.items()}
    _budget(plan, src, {n: files[m] for n, m in local_names(scan).items()}, known, time_budget_s)
    model_packages(plan, src, modules, chosen)   # a package of the repo: the model, editable
    _patterns(plan, [src, *modules.values()])
    search_space(plan, src, known)
    # first: a flag overrides the config file. Only what the run executes declares them:
    # the script, and of each module it imports what importing and calling it runs (never
    # a module's `if __name__ == "__main__":`, karpathy's prepare.py --num-shards)
    with_flags(plan, [src, *ran.values()])
    if config:
        with_config(plan, config)
    with_config_files(plan, [src, *modules.values()])
    leave_out_measuring(plan, src, list(modules.values()), known)
    explain_empty(plan)
    _inputs(plan, [src, *modules.values(), *([config] if config else [])], inputs)
    _caches(plan, [src, *modules.values()])
    seeds = fixed_seeds(src)
    seed_flags = [n for n, v in plan.flags.items() if v == SEED_VALUE]
    if seed_flags:
        plan.notes.append(f"{rel} takes its seed as --{seed_flags[0]}: {plan.flags_file} passes "
                          f"each run its own ($AUTORESEARCH_SEED), so repeated runs measure the "
                          f"noise the judge needs")
    elif seeds:
        plan.notes.append(f"{rel} fixes its own seed ({'; '.join(seeds[:2])}) and never reads "
                          f"AUTORESEARCH_SEED: repeated runs give the same number, so the judge "
                          f"sees a baseline spread near 0 (no noise) and keeps gains that are "
                          f"luck; seed from int(os.environ.get('AUTORESEARCH_SEED', '0')) "
                          f"instead")
    plan.name = root.name
    plan.description = _description(plan)
    return plan


# -- the script and its modules ------------------------------------------------------------------
def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    from loop.repo.gitsafe import run_git
    return run_git(args, cwd, check=False)


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


def _script_args(root: Path, args: str | None,
                 modules: dict[str, Script]) -> tuple[str, Script | None]:
    """The arguments `run` passes the script, and the settings file among them: a .py file
    of the repo (nanoGPT's `config/train_shakespeare_char.py`, plain `name = value` lines
    its configurator executes), which is made editable with the script."""
    if not args:
        return "", None
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise InitError(f"init: --args {args!r}: {exc}") from None
    files = [w for w in words if w.endswith(".py") and (root / w).is_file()]
    for word in words:
        if word.endswith(".py") and word not in files:
            raise InitError(f"init: --args: {word}: no such file in {root}")
    if len(files) > 1:
        raise InitError(f"init: --args names several settings files ({', '.join(files)}): "
                        f"merge them into one, or pass the others' settings as --name=value")
    config = None
    if files:
        rel = Path(os.path.normpath(files[0])).as_posix()
        if rel.removesuffix(".py").replace("/", ".") in modules:
            raise InitError(f"init: --args: {rel} is a module the script imports (it stays "
                            f"protected), not a settings file")
        config = parse(root, rel)
    return " ".join(shlex.quote(w) for w in words), config


def _interpreter(root: Path) -> tuple[str, str]:
    if (root / "pyproject.toml").is_file() and (root / "uv.lock").is_file():
        return "uv run python", "pyproject.toml + uv.lock: the repo's uv environment"
    if (root / ".venv" / "bin" / "python").exists():
        return ".venv/bin/python", "the repo's .venv"
    return "python", "no uv.lock or .venv: the engine's interpreter"


# -- the data a run reads: inputs, caches --------------------------------------------------------
def _inputs(plan: Plan, sources: list[Script], given: list[str] | None) -> None:
    """plan.inputs: `--inputs` as given, else the ignored data the sources name
    (loop/script/named_data.py)."""
    flag = "--inputs PATH"
    if given is not None:
        plan.inputs = list(dict.fromkeys(given))
        plan.guesses["inputs"] = Guess("--inputs", True, flag)
        return
    plan.inputs, tops = named_data(ignored_untracked(plan.root), sources, COPY_SKIP)
    if plan.inputs:
        plan.guesses["inputs"] = Guess(f"ignored data {plan.script} names ({', '.join(tops)})",
                                       False, flag)


def _caches(plan: Plan, sources: list[Script]) -> None:
    """plan.caches, the HOME caches the sources name (loop/script/cache_paths.py), and
    plan.cache_vars (the variables that moved one, passed to runs); refused in one line when
    a cache does not exist yet (the night could not run)."""
    for found in find_caches(sources):
        path = found.path
        if found.var and os.environ.get(found.var):          # where it is on this machine
            path = home_relative(moved(found, os.environ[found.var]))
            if found.var not in plan.cache_vars:
                plan.cache_vars.append(found.var)
        step = prepare_step(plan.root, sources, found.path, plan.python)
        if not Path(os.path.expanduser(path)).is_dir():
            raise InitError(f"init: {found.file} keeps its data in {path}, which does not "
                            f"exist yet: prepare it first (`{step}`), then run init again "
                            f"(runs see it read-only: no run may fill it)")
        plan.caches.append(path)
        plan.cache_lines.append(f"{path} (found: {found.file} names it"
                                + (f", moved by ${found.var}" if found.var else "")
                                + f"; shown read-only to runs; prepare it first with {step})")


# -- budget, patterns, description ---------------------------------------------------------------
def _budget(plan: Plan, src: Script, local: dict, known: dict, override) -> None:
    """Where the training budget lives: a constant of a protected module the script imports
    (karpathy's prepare.TIME_BUDGET; `local`: {name: the file it comes from}), one of the
    script itself, or the engine's variable."""
    own = src.literals()
    found = [(n, local[n], known.get(n)) for n in local if BUDGET_NAME.match(n)]
    found += [(n, plan.script, own.get(n)) for n in own if BUDGET_NAME.match(n)]
    found = [f for f in found if isinstance(f[2], (int, float)) and f[2] > 0]
    flag = "--time-budget S"
    if src.mentions("AUTORESEARCH_TIME_BUDGET"):
        plan.reads_budget = True
        plan.budget = override or DEFAULT_BUDGET_S
        plan.guesses["budget"] = Guess(("--time-budget" if override else "the default") +
                                       f"; {plan.script} reads AUTORESEARCH_TIME_BUDGET",
                                       bool(override), flag)
    elif found:
        name, file, value = found[0]
        # `found` holds numbers only (filtered above), which mypy cannot see
        plan.budget = float(value)  # type: ignore[arg-type]
        plan.budget_constant = f"{file}:{name}"
        if override and override != plan.budget:
            raise InitError(f"init: --time-budget: the training budget is {file}:{name} = "
                            f"{value:g}s in the repo's code; change it there")
        plan.guesses["budget"] = Guess(f"{file}:{name}; --time-budget is refused", True,
                                       f"an edit of {file}:{name}")
        if file == plan.script:
            plan.notes.append(f"the budget {name} lives in the editable {file}: an edit can "
                              f"change it (it is left out of the search space)")
    else:
        plan.budget = override or DEFAULT_BUDGET_S
        plan.guesses["budget"] = Guess(
            "--time-budget" if override else "the default; the script has no time budget of "
            "its own", bool(override), flag)
    if plan.budget_constant or plan.reads_budget:
        # the script times its own training but not its start-up, its first steps (karpathy's
        # excludes the warm-up), its evaluation, nor the model's export: all grow with it
        plan.grace = 120 + plan.budget / 2
        plan.grace_why = ("120s + half the budget: start-up, the first steps the script does "
                          "not count, its evaluation" + (" and the model's export"
                                                        if plan.grader else ""))
    else:
        plan.grace = max(30.0, plan.budget / 2)
        plan.grace_why = "start-up and shut-down; the loop stops a run at the budget + this"
        # a table's column: printed by the script's function that prints the rows
        rows = next((v.column.printer for v in src.reported()
                     if v.name == plan.metric and v.column is not None), "")
        if not plan.grader and prints_in_loop(src, lambda node: any(
                v.name == plan.metric for v in call_values(node)) or bool(
                rows and isinstance(node.func, ast.Name) and node.func.id == rows)):
            plan.on_timeout = "last"
            plan.on_timeout_why = (f"{plan.script} prints {plan.metric} inside its training "
                                   f"loop and keeps no time budget; the run is stopped at the "
                                   f"box and scored from its last {plan.metric}")
            return
        plan.notes.append(f"{plan.script} keeps no time budget of its own: each run is "
                          f"stopped after {plan.budget + plan.grace:g}s, so it must print "
                          f"{plan.metric} before then (or read AUTORESEARCH_TIME_BUDGET)")


def _patterns(plan: Plan, sources: list[Script]) -> None:
    printed = [name for src in sources for name, _ in src.printed()]
    if "num_steps" in printed:
        plan.throughput = "num_steps"
    plan.memory = next((n for n in printed if MEMORY_NAME.match(n)), "")


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
           if plan.grader else f"{plan.metric_source} (read from the run's output: "
                                   f"unprotected)")
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
