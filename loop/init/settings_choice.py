"""The settings `autoresearch init` offers `mutate` (task.yaml's `search_space`) and the seed
a script fixes for itself. Read with `ast` and regexes; nothing is run.

The search space is the script's numeric module-level settings: UPPER_CASE constants and
lowercase names set once (nanoGPT's `learning_rate = 6e-4`, `n_layer = 12`; a counter is
none). Left out: seeds (a data split's too), settings that only feed prints (a
peak-FLOPs constant for an MFU line), logging and evaluation cadence (`eval_interval`,
`log_interval`: they change what is measured, not what is trained), settings the data fixes
(`num_classes`, `vocab_size`), and the budget."""
from __future__ import annotations

import ast
import math
import re
import shlex

from loop.script import command_line, hydra_config, measurement
from loop.script import settings
from loop.script.source import Script
from loop.script.seeds import SEED_NAME
from loop.setup.flags import SEED_VALUE
from loop.init.plan import Plan
from loop.edits.constant_lines import CONSTANT, POWER
from loop.setup.search_space import SETTING, constants, number

# logging, checkpointing and evaluation cadence: not what is trained
BOOKKEEPING = re.compile(r"(^|[_.-])(log|eval|save|print|checkpoint|ckpt|wandb|interval|verbose|"
                         r"workers|port|every|freq|frequency|rank|world|"
                         r"threads|plot|display|val|valid|test)([_.-]|$)|(^|[_.-])(num_?|n)nodes$",
                         re.I)
# gradient accumulation (`GRADIENT_ACCUMULATE_EVERY`) sets the effective batch: trained, not
# a cadence, though its name says "every"
ACCUMULATION = re.compile(r"ACCUM", re.I)
# the training's length: the time box bounds a run already, and a search that lengthens it
# proposes longer and longer runs until one is killed (max_iters, epochs, num_steps,
# NUM_BATCHES)
LENGTH = re.compile(r"^(max|num|n|total|train|training)?[_-]?(iters?|iterations|steps|epochs?|"
                    r"updates|batches)$", re.I)
# the data's own shape: the classes an accuracy is over (MNIST has 10), a tokenizer's
# vocabulary, the features of an input; a search that moves them breaks the model or changes
# what is measured
DATA_SHAPE = re.compile(r"^(num_?classes|n_?classes|out_?classes|num_?labels|n_?labels|"
                        r"vocab_?size|n_?vocab|num_?tokens|input_?size|input_?dim|in_?channels|"
                        r"in_?features|num_?features|n_?features|output_?size|output_?dim|"
                        r"num_?outputs|n_?outputs)$", re.I)


def is_cadence(name: str) -> bool:
    """Logging, checkpointing or evaluation cadence, or the training's length (a key path's
    last part, `training.max_epochs`): not searched."""
    leaf = name.rpartition(".")[2]
    return bool(BOOKKEEPING.search(name) and not ACCUMULATION.search(leaf)
                or LENGTH.search(leaf))


def search_space(plan: Plan, src: Script, known: dict) -> None:
    """plan.space, .skipped, .conditions for the editable script."""
    values = constants({plan.script: src.source})
    # nanoGPT's style, lowercase settings, alone or beside UPPER_CASE ones (build-nanogpt's
    # `B = 64`, `T = 1024` and `max_lr = 6e-4`); not a counter (`iter_num = 0`, then += 1)
    once = _set_once(src)
    for m in SETTING.finditer(src.source):
        if m["name"] in once and m["name"] not in values:
            values[m["name"]] = float(m["value"].replace("_", ""))
    budget = plan.budget_constant.split(":")[-1] if plan.budget_constant.startswith(
        f"{plan.script}:") else None
    shown = src.display_only(set(values), plan.metric)
    seeds = [n for n in values if SEED_NAME.search(n)]
    cadence = [n for n in values if is_cadence(n)]
    plan.skipped = sorted(shown | set(seeds) | set(cadence)) + (
        [budget] if budget in values else [])
    plan.skipped += [f"{n} (fixed by the data)" for n in values if DATA_SHAPE.search(n)]
    texts = _sources(src.source)
    space = {}
    for name, v in values.items():
        if name in plan.skipped or DATA_SHAPE.search(name):
            continue
        spec = _dim_spec(name, v, texts.get(name, ""))
        if spec:
            space[name] = spec
    plan.conditions = src.conditions(set(space), known)
    for cond in plan.conditions:
        first = next(n for n in space if re.search(rf"\b{n}\b", cond))
        space[first].setdefault("requires", []).append(cond)
    space.update(_literal_settings(plan, src))
    plan.space = space


# keywords that are plumbing, not settings: axes, defaults, indices, shapes, devices, workers
PLUMBING = re.compile(r"^(dim|axis|axes|keepdim|default|ignore_index|padding_idx|index|start|"
                      r"end|stop|step|ndigits|decimals|size|shape|dtype|device|n_jobs|"
                      r"num_workers|verbose|verbosity|indent|nargs|figsize|dpi|fontsize|level|"
                      r"flush|mininterval|maxinterval|ncols|position|total|num_classes|"
                      r"n_classes|in_features|out_features|in_channels|out_channels|"
                      r"num_embeddings|vocab_size|num_tokens|timeout|port|precision|mean)$",
                      re.I)
# the longest sequence a model is built for (`MEGABYTE(max_seq_len=(512, 4, 4))`): below the
# data's length the model refuses it, above it nothing measured changes
MODEL_LENGTH = re.compile(r"^(max_seq_len|max_sequence_length|n_positions|n_ctx|"
                          r"max_position_embeddings|context_length)$", re.I)
# calls whose keyword numbers are no settings (tensor shapes, printing, argparse's defaults)
NOT_SETTINGS = {"print", "format", "round", "add_argument", "option", "get", "getenv", "range",
                "tqdm", "trange", "zeros", "ones", "empty", "full", "arange", "linspace",
                "randn", "rand", "randint", "normal", "reshape", "view", "figure", "subplots",
                "plot", "savefig", "scatter", "hist", "set_defaults", "Field", "field", "sleep",
                "isclose", "allclose", "seed", "manual_seed", "exit", "tensor", "topk",
                "softmax", "log_softmax", "argmax", "cat", "stack", "sum", "mean", "max",
                "min", "split", "chunk", "clamp", "to", "cuda", "basicConfig", "info", "debug",
                "warning", "generate", "sample", "item", "unsqueeze", "squeeze", "permute",
                "transpose", "expand", "repeat", "gather", "scatter_", "multinomial",
                "masked_fill", "masked_fill_", "fill_", "fillna", "insert", "pad"}


def _literal_settings(plan: Plan, src: Script) -> dict[str, dict]:
    """Dict-literal keys (`params.learning_rate`) and literal numeric keyword arguments
    (`LogisticRegression.C`, `AdamW.lr`) of the script, where much real code keeps its
    settings (loop/script/settings.py): seeds, cadence, length and plumbing left out."""
    out: dict[str, dict] = {}
    for s in settings.find(plan.script, src.source):
        if s.kind not in ("dict", "kwarg"):
            continue
        parts = s.name.split(".")
        key = parts[-2] if parts[-1].isdigit() else parts[-1]      # AdamW.betas.0: betas
        if s.kind == "kwarg" and (parts[0] in NOT_SETTINGS or PLUMBING.search(key)):
            continue
        if SEED_NAME.search(key) or is_cadence(key) or (s.kind == "dict" and PLUMBING.search(key)):
            plan.skipped.append(s.name)
            continue
        if MODEL_LENGTH.search(key):
            plan.skipped.append(f"{s.name} (the longest sequence the model takes: the data's "
                                f"length sets it)")
            continue
        try:
            value = number(s.text)
        except ValueError:
            continue
        spec = _dim_spec(s.name if parts[-1].isdigit() else key, value, s.text)
        if spec:
            out[s.name] = spec
    return out


def leave_out_measuring(plan: Plan, src: Script, modules: list[Script],
                        known: dict) -> None:
    """No setting that changes what the metric measures is searched (loop/init/
    measurement.py): the settings the metric's computation reads, and those that only feed
    output the metric never reads, leave the space, named with why; the limits the code
    asserts bound the ranges of the rest. A metric the lm grader computes is measured with
    the grader's own settings: nothing to leave out. Where the script does not compute the
    metric it prints, a note says this could not be read."""
    if plan.grader or not plan.space:
        return
    literal_at = {s.name: _line_col(src.source, s.start)
                  for s in settings.find(plan.script, src.source) if s.kind in ("dict", "kwarg")}
    for name in sorted(measurement.output_only_keywords(
            src, {n: at for n, at in literal_at.items() if n in plan.space})):
        plan.space.pop(name)
        plan.skipped.append(f"{name} (only feeds output {plan.metric} never reads)")
    found = measurement.measured(src, modules, plan.metric)
    if found is None:
        plan.notes.append(f"whether a searched setting changes what {plan.metric} measures "
                          f"could not be read ({plan.script} does not compute the "
                          f"{plan.metric} it reports): check that search_space leaves out "
                          f"the settings that size the validation data and the evaluation")
        return
    for name in list(plan.space):
        dest = name.lstrip("-").replace("-", "_")
        if found.changes_measure(dest, literal_at.get(name)):
            plan.space.pop(name)
            why = measurement.reason(name, bool(found.reads(dest, literal_at.get(name))))
            plan.skipped.append(f"{name} ({why})")
    module_level = {n for n in plan.space if n in src.assigns()}
    for name in sorted(measurement.output_only(src, module_level,
                                               measurement.metric_expr(src, plan.metric))):
        plan.space.pop(name)
        plan.skipped.append(f"{name} (only feeds output {plan.metric} never reads)")
    limits = measurement.asserted_limits(src, modules, set(plan.space), known)
    for name, bounds in limits.items():
        spec = _within(plan.space[name], bounds)
        if spec is None:
            plan.space.pop(name)
            plan.skipped.append(f"{name} (its value is at the limit the code asserts)")
        else:
            plan.space[name] = spec


def _line_col(text: str, start: int) -> tuple[int, int]:
    """An index into `text` as `ast` places a node: (line, UTF-8 column)."""
    line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    return text.count("\n", 0, start) + 1, len(text[line_start:start].encode())


def _within(spec: dict, bounds: list[tuple[str, float]]) -> dict | None:
    """`spec` narrowed to the asserted bounds (an integer bound `< b` is `<= b - 1`); None
    when nothing of it is left."""
    spec = dict(spec)
    integer = "pow2" in spec or spec.get("integer", False)
    hi = min((b - 1 if integer and op == "<" else b for op, b in bounds if op in ("<", "<=")),
             default=math.inf)
    lo = max((b + 1 if integer and op == ">" else b for op, b in bounds if op in (">", ">=")),
             default=-math.inf)
    if "pow2" in spec:
        a, b = spec["pow2"]
        while b >= a and 2 ** b > hi:
            b -= 1
        while a <= b and 2 ** a < lo:
            a += 1
        return {**spec, "pow2": [a, b]} if a < b else None
    kind = "range" if "range" in spec else "log_range" if "log_range" in spec else ""
    if not kind:
        return spec
    a, b = spec[kind]
    a, b = max(a, lo), min(b, hi)
    if integer:
        a, b = int(math.ceil(a)), int(math.floor(b))
    return {**spec, kind: [a, b]} if a < b else None


def explain_empty(plan: Plan) -> None:
    """A note when nothing was found to search (the LLM proposer can still change code)."""
    if not plan.space:
        plan.notes.append(f"mutate and tune have nothing to search: {plan.script} sets no "
                          f"numeric module-level setting and reads no numeric flag they could "
                          f"change; add `search_space:` to task.yaml naming settings of "
                          f"{plan.script} (e.g. `search_space: {{LR: {{log_range: [1e-4, "
                          f"1e-2]}}}}`), or run --proposer llm")


def _set_once(src: Script) -> set[str]:
    """The names the file assigns exactly once (anywhere) and never updates in place."""
    counts: dict[str, int] = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            counts[node.target.id] = counts.get(node.target.id, 0) + 2
    return {n for n, k in counts.items() if k == 1}


def _sources(source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rx in (SETTING, POWER):
        for m in rx.finditer(source):
            out.setdefault(m["name"], m["value"])
    return out


def _dim_spec(name: str, v: float, text: str) -> dict | None:
    """A range around the current value that a name and a value suggest."""
    is_int = re.fullmatch(r"[-+]?\d[\d_]*", text) is not None or "**" in text
    power = is_int and v >= 2 and int(v) & (int(v) - 1) == 0
    if "**" in text or (power and (v >= 16 or re.search(r"BATCH|HEAD", name, re.I))):
        k = int(math.log2(v))
        return {"pow2": [max(0, k - 3), k + 2]}
    if is_int:
        if v <= 0:
            return None
        return {"range": [max(1, int(v) // 2), int(v) * 2], "integer": True}
    if re.search(r"BETA", name, re.I) and 0 < v < 1:
        return {"range": [0.5, 0.999]}
    if re.search(r"DROPOUT", name, re.I) and 0 <= v <= 0.5:
        return {"range": [0.0, 0.5]}        # past 0.5 a net mostly forgets what it learnt
    if re.search(r"RATIO|FRAC|PROB", name, re.I) and 0 <= v <= 1:
        return {"range": [0.0, 1.0]}
    if v == 0:
        return {"range": [0.0, 0.2]}
    if v > 0:
        return {"log_range": [_round(v / 4), _round(v * 4)]}
    return None


def _round(v: float) -> float:
    return float(f"{v:.3g}")


def with_config(plan: Plan, config: Script) -> None:
    """The run is given a settings file (`init --args config/x.py`, nanoGPT's configurator
    executes it after the script's own settings): what it assigns is what the run trains
    with. The file is editable; its numeric settings join the space with ranges around its
    values, replacing the script's. mutate changes a name in the first file, in path order,
    that defines it: when the script would come first, the names the file sets are left out
    instead (an edit of the script's value would change nothing). A name the flags file
    passes (with_flags, run first) stays the flag's: it comes last on the command line."""
    once = _set_once(config)
    values = {m["name"]: float(m["value"].replace("_", ""))
              for m in SETTING.finditer(config.source) if m["name"] in once}
    values.update({m["name"]: float(m["value"].replace("_", ""))
                   for m in CONSTANT.finditer(config.source)})
    if not values:
        return
    set_here = sorted(values)
    texts = _sources(config.source)
    first = sorted([config.path, plan.script])[0] == config.path
    for name in set_here:
        if name in plan.flags:                # last on the command line, the flag decides
            continue
        plan.space.pop(name, None)
        if name in plan.skipped:
            continue
        spec = _dim_spec(name, values[name], texts.get(name, "")) if first and not (
            SEED_NAME.search(name) or is_cadence(name)) else None
        if spec:
            plan.space[name] = spec
        elif not first:
            plan.skipped.append(f"{name} (set by {config.path})")
    moved = [n for n in set_here if n in plan.space and n not in plan.flags]
    plan.notes.append(f"{config.path} sets {len(set_here)} settings for the run, over "
                      f"{plan.script}'s values: " + (
                          f"the search space moves {', '.join(moved) or 'none of them'} in "
                          f"{config.path}, editable" if first else
                          f"{', '.join(set_here)} are left out of the search space"))


FLAGS_FILE = "autoresearch.flags.yaml"


def with_flags(plan: Plan, scripts: list[Script]) -> None:
    """A script that reads its settings from its command line (argparse, click, fire, or
    `--key=value` overrides such as nanoGPT's configurator): its numeric flags go into the
    flags file (task.yaml `flags`, loop/setup/flags.py) with their defaults, or the values
    `--args` gives, and the flags a search may move into the space. A numeric `--name=value`
    among `--args` goes there too, whatever reads it: it comes last on the command line, so
    it overrides the same name in the script or its config file, which then leaves the space.
    A seed flag gets each run's own seed; a module-level constant that is only a flag's
    default leaves the space (the flag decides the value)."""
    if with_hydra(plan, scripts[0]):
        return
    command = command_line.typer_command(scripts[0])
    words = shlex.split(plan.args) if plan.args else []
    if command and command[0] and len(command_line.typer_commands(scripts[0])) > 1 \
            and words[:1] != [command[0]]:
        # a typer app of several commands runs one only when named first on its command line
        plan.args = " ".join(shlex.quote(w) for w in [command[0], *words])
        plan.notes.append(f"{plan.script} is a typer app of several commands: the run calls "
                          f"`{command[0]}` (change with --args)")
    found = [f for src in scripts for f in command_line.flags(src)]
    given = _given(plan)
    known = {f.name for f in found}
    numeric = [f for f in found if f.numeric or (f.type in ("int", "float") and f.name in given)]
    numeric += [command_line.Flag(name, name.replace("-", "_"), number(text), "", (),
                              "--key=value") for name, text in given.items() if name not in known]
    seeds = [f for f in found if SEED_NAME.search(f.dest) and f.type != "bool"
             and (f.numeric or f.type in ("int", ""))]
    if not numeric and not seeds:
        return
    values: dict[str, str] = {}
    for f in numeric:
        text = given.get(f.name, _text(float(f.default) if f.type == "float" and isinstance(
            f.default, (int, float)) else f.default))
        values[f.name] = settings.written("yaml", text)
    for f in seeds:
        values[f.name] = SEED_VALUE
    plan.flags_file, plan.flags = FLAGS_FILE, values
    plan.flags_how = (found or numeric)[0].how
    plan.editable.append(FLAGS_FILE)
    plan.args = _without(plan.args, set(values))
    for f in found:                                 # `default=LR`: the flag decides LR
        if f.constant and f.constant in plan.space:
            plan.space.pop(f.constant)
            plan.skipped.append(f"{f.constant} (the default of --{f.name})")
    for f in numeric:
        if f.name in values and values[f.name] == SEED_VALUE:
            continue
        plan.space.pop(f.dest, None)                # the flag, last, decides the value
        if is_cadence(f.name):
            plan.skipped.append(f"--{f.name}")
            continue
        spec = ({"choices": list(f.choices)} if f.choices else
                _dim_spec(f.name, number(values[f.name]), values[f.name]))
        if spec:
            plan.space[f.name] = spec
    overriding = [n for n in given if n not in known]
    if overriding:
        plan.notes.append(f"--args sets {', '.join(overriding)} as --key=value: last on the "
                          f"command line, they override the script's and its config file's "
                          f"values, so {FLAGS_FILE} passes them and the search moves them there")


def with_hydra(plan: Plan, src: Script) -> bool:
    """A Hydra app (`@hydra.main`, loop/init/hydra_config.py): the numeric keys of its composed
    config are its settings, named by their key path (`training.batch_size`). Those a search
    may move, and a seed, go into the flags file in the `hydra` style: each run is given
    them as overrides (`training.batch_size=16`), which win over every config file, so a
    searched value takes effect where the run reads it. True when `src` is a Hydra app."""
    found = hydra_config.app(plan.root, src)
    if found is None:
        return False
    given = {w.partition("=")[0]: w.partition("=")[2]
             for w in (shlex.split(plan.args) if plan.args else [])
             if re.fullmatch(r"[A-Za-z_][\w.]*=\S+", w)}        # overrides among --args
    values = {**found.values, **{k: v for k, v in given.items() if _is_number(v)}}
    flags: dict[str, str] = {}
    left_out = []
    for key, text in values.items():
        leaf = key.rpartition(".")[2]
        if SEED_NAME.search(leaf):
            flags[key] = SEED_VALUE
        elif is_cadence(key):
            left_out.append(key)
        elif DATA_SHAPE.search(leaf):       # `model.net.input_size: 784`, MNIST's pixels
            left_out.append(f"{key} (fixed by the data)")
        else:
            spec = _dim_spec(leaf, number(text), text)
            if spec:
                plan.space[key] = spec
                flags[key] = settings.written("yaml", text)
    plan.skipped += left_out
    plan.flags_file, plan.flags, plan.flags_how = FLAGS_FILE, flags, "hydra"
    plan.editable.append(FLAGS_FILE)
    plan.args = " ".join(shlex.quote(w) for w in shlex.split(plan.args or "")
                         if w.partition("=")[0] not in flags)
    plan.notes.append(f"{plan.script} is a Hydra app: its config {found.primary} composes "
                      f"{', '.join(found.files)}; {FLAGS_FILE} passes the searched keys and "
                      f"the seed as overrides (key=value), which win over those files")
    return True


def _text(value: object) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def _given(plan: Plan) -> dict[str, str]:
    """`--name value` and `--name=value` among init's --args."""
    words = shlex.split(plan.args) if plan.args else []
    out = {}
    for i, w in enumerate(words):
        if w.startswith("--") and "=" in w:
            name, _, value = w[2:].partition("=")
            out[name] = value
        elif w.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[w[2:]] = words[i + 1]
    return {k: v for k, v in out.items() if _is_number(v)}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _without(args: str, names: set[str]) -> str:
    """--args less the flags the flags file now passes."""
    if not args:
        return args
    words, out, skip = shlex.split(args), [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        name = w[2:].partition("=")[0] if w.startswith("--") else None
        if name in names:
            skip = "=" not in w and i + 1 < len(words) and not words[i + 1].startswith("--")
            continue
        out.append(w)
    return " ".join(shlex.quote(w) for w in out)


CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
OURS = {"task.yaml", "autoresearch.yaml", FLAGS_FILE}


def with_config_files(plan: Plan, scripts: list[Script]) -> None:
    """YAML and JSON config files the run reads, committed in the task folder: named among
    `--args` (`--config configs/base.yaml`) or as a path in the script's code (`open(
    "config.yaml")`, an argparse default): editable, and their numeric keys join the space
    (nested keys by their path, `optim.lr`), seeds, cadence and training length left out."""
    words = shlex.split(plan.args) if plan.args else []
    named = [w.partition("=")[2] or w for w in words]
    for src in scripts:
        named += [n.value for n in ast.walk(src.tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for rel in dict.fromkeys(named):
        path = plan.root / rel
        if not rel.endswith(CONFIG_SUFFIXES) or rel in OURS or rel in plan.editable \
                or rel in plan.protected or not path.is_file() or ".." in rel.split("/"):
            continue
        text = path.read_text(errors="replace")
        found = settings.find(rel, text)
        if not found:
            continue
        plan.editable.append(rel)
        moved = []
        for s in found:
            leaf = s.name.rpartition(".")[2]
            if SEED_NAME.search(leaf) or is_cadence(s.name):
                plan.skipped.append(s.name)
                continue
            spec = _dim_spec(leaf, number(s.text), s.text)
            if spec and s.name not in plan.space:
                plan.space[s.name] = spec
                moved.append(s.name)
        plan.notes.append(f"{rel} is a config file the run reads: editable, and the search "
                          f"space moves {', '.join(moved) or 'none'} of its {len(found)} "
                          f"numeric keys there")
