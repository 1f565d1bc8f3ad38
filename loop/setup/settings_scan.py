"""The settings `autoresearch init` offers `mutate` (task.yaml's `search_space`) and the seed
a script fixes for itself. Read with `ast` and regexes; nothing is run.

The search space is the script's numeric UPPER_CASE constants; a script that has none but
sets lowercase module-level settings (nanoGPT's `learning_rate = 6e-4`, `n_layer = 12`)
offers those. Left out: seeds (a data split's too), settings that only feed prints (a
peak-FLOPs constant for an MFU line), logging and evaluation cadence (`eval_interval`,
`log_interval`: they change what is measured, not what is trained), and the budget."""
from __future__ import annotations

import ast
import math
import re

from loop.setup.code_scan import Script
from loop.setup.plan import Plan
from loop.setup.search_space import CONSTANT, POWER, SEED, SETTING, constants

# logging, checkpointing and evaluation cadence: not what is trained
BOOKKEEPING = re.compile(r"(^|_)(log|eval|save|print|checkpoint|ckpt|wandb|interval|verbose|"
                         r"workers|port)(_|$)", re.I)
# calls that fix a seed: torch.manual_seed(1337), np.random.seed(42), set_seed(0)
SEED_CALLS = {"manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything",
              "default_rng", "RandomState", "PRNGKey"}


def search_space(plan: Plan, src: Script, known: dict) -> None:
    """plan.space, .skipped, .conditions for the editable script."""
    values = constants({plan.script: src.source})
    lowercase = not values
    if lowercase:                                 # nanoGPT's style: lowercase settings
        once = _set_once(src)                     # not a counter (`iter_num = 0`, then += 1)
        values = {m["name"]: float(m["value"].replace("_", ""))
                  for m in SETTING.finditer(src.source) if m["name"] in once}
    budget = plan.budget_constant.split(":")[-1] if plan.budget_constant.startswith(
        f"{plan.script}:") else None
    shown = src.display_only(set(values), plan.metric)
    seeds = [n for n in values if SEED.search(n)]
    cadence = [n for n in values if BOOKKEEPING.search(n)]
    plan.skipped = sorted(shown | set(seeds) | set(cadence)) + (
        [budget] if budget in values else [])
    texts = _sources(src.source, lowercase)
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
    if not space:
        plan.notes.append(f"mutate has nothing to search: {plan.script} sets no numeric "
                          f"module-level constant it could change; add `search_space:` to "
                          f"task.yaml naming settings of {plan.script} (e.g. `search_space: "
                          f"{{LR: {{log_range: [1e-4, 1e-2]}}}}`), or run --proposer llm")


def _set_once(src: Script) -> set[str]:
    """The names the file assigns exactly once (anywhere) and never updates in place."""
    counts: dict[str, int] = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            counts[node.target.id] = counts.get(node.target.id, 0) + 2
    return {n for n, k in counts.items() if k == 1}


def _sources(source: str, lowercase: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for rx in ((SETTING, POWER) if lowercase else (CONSTANT, POWER)):
        for m in rx.finditer(source):
            out.setdefault(m["name"], m["value"])
    return out


def _dim_spec(name: str, v: float, text: str) -> dict | None:
    """A range around the current value that a name and a value suggest."""
    is_int = re.fullmatch(r"[-+]?\d[\d_]*", text) is not None or "**" in text
    power = is_int and v >= 2 and int(v) & (int(v) - 1) == 0
    if "**" in text or (power and (v >= 16 or "BATCH" in name.upper())):
        k = int(math.log2(v))
        return {"pow2": [max(0, k - 3), k + 2]}
    if is_int:
        if v <= 0:
            return None
        return {"range": [max(1, int(v) // 2), int(v) * 2], "integer": True}
    if re.search(r"BETA", name, re.I) and 0 < v < 1:
        return {"range": [0.5, 0.999]}
    if re.search(r"RATIO|FRAC|DROPOUT|PROB", name, re.I) and 0 <= v <= 1:
        return {"range": [0.0, 1.0]}
    if v == 0:
        return {"range": [0.0, 0.2]}
    if v > 0:
        return {"log_range": [_round(v / 4), _round(v * 4)]}
    return None


def _round(v: float) -> float:
    return float(f"{v:.3g}")


def fixed_seeds(src: Script) -> list[str]:
    """The calls by which a script that never reads AUTORESEARCH_SEED fixes its own seed
    (`torch.manual_seed(1337)`, `train_test_split(..., random_state=42)`), as written."""
    if src.mentions("AUTORESEARCH_SEED"):
        return []
    out = []
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        fixes = (func in SEED_CALLS and node.args) or any(
            k.arg and SEED.search(k.arg) and isinstance(k.value, (ast.Constant, ast.Name,
                                                                  ast.BinOp))
            for k in node.keywords)
        if fixes:
            text = ast.unparse(node)
            out.append(text if len(text) <= 60 else text[:57] + "...")
    return list(dict.fromkeys(out))


def with_config(plan: Plan, config: Script) -> None:
    """The run is given a settings file (`init --args config/x.py`, nanoGPT's configurator
    executes it after the script's own settings): what it assigns is what the run trains
    with. The file is editable; its numeric settings join the space with ranges around its
    values, replacing the script's. mutate changes a name in the first file, in path order,
    that defines it: when the script would come first, the names the file sets are left out
    instead (an edit of the script's value would change nothing)."""
    once = _set_once(config)
    values = {m["name"]: float(m["value"].replace("_", ""))
              for m in SETTING.finditer(config.source) if m["name"] in once}
    values.update({m["name"]: float(m["value"].replace("_", ""))
                   for m in CONSTANT.finditer(config.source)})
    if not values:
        return
    set_here = sorted(values)
    texts = _sources(config.source, True)
    first = sorted([config.path, plan.script])[0] == config.path
    for name in set_here:
        plan.space.pop(name, None)
        if name in plan.skipped:
            continue
        spec = _dim_spec(name, values[name], texts.get(name, "")) if first and not (
            SEED.search(name) or BOOKKEEPING.search(name)) else None
        if spec:
            plan.space[name] = spec
        elif not first:
            plan.skipped.append(f"{name} (set by {config.path})")
    moved = [n for n in set_here if n in plan.space]
    plan.notes.append(f"{config.path} sets {len(set_here)} settings for the run, over "
                      f"{plan.script}'s values: " + (
                          f"the search space moves {', '.join(moved) or 'none of them'} in "
                          f"{config.path}, editable" if first else
                          f"{', '.join(set_here)} are left out of the search space"))
