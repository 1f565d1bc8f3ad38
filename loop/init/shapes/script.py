"""The plain shape: the script prints its metric itself, as a `name: value` line
(`val_loss: 2.01`), inside a log line (`step 200: train loss 1.9, val loss 2.0`, read with a
`metric.pattern`) or a table's row, or a library the script drives prints it (a Hugging Face
Trainer's evaluation dicts, Lightning's progress bar). No protected code grades it: the
number is what the edited script's run prints."""
from __future__ import annotations

import ast
import re

from loop.script.measurement import trainer_evaluation
from loop.init.plan import Plan
from loop.init.shapes.base import Candidate, Scan, Shape, from_values
from loop.script.source import Script
from loop.script.prints import HELD_OUT_WORDS, Logged, lightning_logged, name_words


def candidates(scan: Scan) -> list[Candidate]:
    return from_values(scan.script, "script", f"printed by {scan.script.path}") \
        + trainer_eval_loss(scan.script) + lightning_bar(scan)


def lightning_bar(scan: Scan) -> list[Candidate]:
    """The metrics the repo's LightningModules log (printed.py `lightning_logged`) in the
    script, the local modules it imports, and those its Hydra config instantiates
    (`_target_: src.models.mnist_module.MNISTLitModule`): each logged with prog_bar=True,
    read where the progress bar prints it (`val/acc=0.961`, `val/acc: 0.961`); when none
    outside training and test is on the bar, each validation metric logged for the loggers
    only, with what to change to read it. One the repo keeps its best model by
    (`ModelCheckpoint(monitor="val/acc")`, a config's `monitor: val/acc`) says so."""
    from loop.setup.metric import NUMBER
    sources, config = _lightning_sources(scan)
    logged = [(src, item) for src in sources for item in lightning_logged(src.tree)]
    if not logged:
        return []
    monitored = _monitored(sources, config)
    # the config file that instantiates a class (`_target_: src.models.m.LitModule`)
    config_of = {str(t): rel for t, rel in config.get("_target_", [])}
    no_bar, setting = _bar_off(sources, config)
    shown = [(src, item) for src, item in logged if item.on_bar]
    held_out = [item for _, item in shown if not {"train", "training", "test"}
                & set(name_words(item.name))]
    out: list[Candidate] = []
    for src, item in shown if held_out else logged:
        if not item.on_bar and not (set(name_words(item.name)) & set(HELD_OUT_WORDS)
                                    or "validation" in item.hook):
            continue
        call = f"self.{ast.unparse(item.call.func).rpartition('.')[2]}({item.logged!r}, ...)"
        where = f"{src.path} logs it with {call} in {item.hook}()"
        problem = fix = ""
        if not item.on_bar:
            problem = (f"{where} without prog_bar=True: it goes to the Lightning loggers "
                       f"(TensorBoard, CSV files) only, never to the run's output")
            fix = (f"add prog_bar=True to that call (Lightning's progress bar then prints "
                   f"{item.name}=<value>), commit, and run init again")
        elif no_bar:
            problem = f"{where}, but {no_bar}: no progress bar prints it"
            fix = f"drop {setting} there, commit, and run init again"
        out.append(Candidate(
            item.name, "script", f"shown by Lightning's progress bar: {where} "
            f"(prog_bar=True)", rf"(?<![\w./-]){re.escape(item.name)}\s*[:=]\s*{NUMBER}",
            data=(item, config_of.get(f"{src.path.removesuffix('.py').replace('/', '.')}."
                                      f"{item.owner}", "")),
            problem=problem, fix=fix, file=src.path,
            selects=monitored.get(item.name, "")))
    return out


def _lightning_sources(scan: Scan) -> tuple[list[Script], dict[str, list[tuple[str, str]]]]:
    """The files a run's LightningModules may be in (the script, its local modules, those
    its Hydra config names as a `_target_`), and the config's string values by key
    (`monitor` -> [(value, file)]) when it is a Hydra app."""
    from loop.script.hydra_config import app
    sources = [scan.script, *scan.modules.values()]
    found = app(scan.root, scan.script)
    config: dict[str, list[tuple[str, str]]] = {}
    if found is None:
        return sources, config
    import yaml
    for rel in found.files:
        try:
            data = yaml.safe_load((scan.root / rel).read_text(errors="replace"))
        except (OSError, yaml.YAMLError):
            continue
        todo = [data]
        while todo:
            node = todo.pop()
            if isinstance(node, dict):
                for key, value in node.items():
                    if isinstance(value, (str, bool)):
                        config.setdefault(str(key), []).append((value, rel))  # type: ignore
                    todo.append(value)
            elif isinstance(node, list):
                todo += node
    seen = {s.path for s in sources}
    for target, _ in config.get("_target_", []):
        rel = f"{str(target).rpartition('.')[0].replace('.', '/')}.py"
        if rel not in seen and (scan.root / rel).is_file():
            try:
                sources.append(Script(rel, (scan.root / rel).read_text(errors="replace")))
            except (SyntaxError, ValueError):
                continue
            seen.add(rel)
    return sources, config


def _monitored(sources: list[Script], config: dict) -> dict[str, str]:
    """{metric: in words, what keeps the best model by it}: a `monitor="..."` the code
    passes (ModelCheckpoint, EarlyStopping), a `monitor:` of the Hydra config."""
    out: dict[str, str] = {}
    for src in sources:
        for node in ast.walk(src.tree):
            if isinstance(node, ast.Call):
                for k in node.keywords:
                    if k.arg == "monitor" and isinstance(k.value, ast.Constant) \
                            and isinstance(k.value.value, str):
                        out.setdefault(k.value.value, f"{ast.unparse(node.func)}(monitor="
                                                      f"{k.value.value!r}) in {src.path}")
    for value, rel in config.get("monitor", []):
        out.setdefault(str(value), f"`monitor: {value}` in {rel}")
    return out


def _bar_off(sources: list[Script], config: dict) -> tuple[str, str]:
    """(where, the setting) that turns Lightning's progress bar off (`enable_progress_bar=
    False`; PL 1.x's `progress_bar_refresh_rate=0`, a bar's `refresh_rate=0`), or ("", "")."""
    off = {"enable_progress_bar": False, "progress_bar_refresh_rate": 0, "refresh_rate": 0}
    for src in sources:
        for node in ast.walk(src.tree):
            if not isinstance(node, ast.Call):
                continue
            for k in node.keywords:
                value = k.value.value if isinstance(k.value, ast.Constant) else None
                if k.arg in off and type(value) is type(off[k.arg]) and value == off[k.arg]:
                    return (f"{src.path} builds {ast.unparse(node.func)}({k.arg}={value!r})",
                            f"{k.arg}={value!r}")
    for value, rel in config.get("enable_progress_bar", []):
        if value is False:
            return f"{rel} sets enable_progress_bar: false", "enable_progress_bar: false"
    return "", ""


def trainer_eval_loss(src: Script) -> list[Candidate]:
    """A Hugging Face `transformers.Trainer` (or `Seq2SeqTrainer`) the script builds with an
    `eval_dataset=`: the Trainer itself prints each evaluation's dict on stdout
    (`{'eval_loss': 1.23, 'epoch': 0.5}`, alpaca-lora), so `eval_loss` is a metric of the run
    though no print of the script shows it."""
    from loop.setup.metric import NUMBER
    node = trainer_evaluation(src)
    if node is None:
        return []
    return [Candidate("eval_loss", "script",
                      f"printed by the Hugging Face {ast.unparse(node.func)} "
                      f"{src.path} builds with an eval_dataset (its evaluation dicts, "
                      f"{{'eval_loss': ...}})",
                      rf"['\"]eval_loss['\"]\s*:\s*{NUMBER}", file=src.path)]


def apply(plan: Plan, scan: Scan, chosen: Candidate) -> None:
    """The run's command and the metric line are all it needs; a metric read from Lightning's
    progress bar is said to be rounded there."""
    if isinstance(chosen.data, tuple) and isinstance(chosen.data[0], Logged):
        model_config = chosen.data[1]
        if model_config and model_config not in plan.editable:
            plan.editable.append(model_config)     # the model's config: its net, optimizer
            plan.notes.append(f"{model_config} instantiates the LightningModule that logs "
                              f"{chosen.name} ({chosen.file}): the model's config, editable "
                              f"(a searched key in it is still passed as an override, which "
                              f"wins over an edit of the file)")
        plan.notes.append(
            f"{chosen.name} is read from Lightning's progress bar, which rounds it to 3 digits "
            f"(TQDM: `{chosen.name}=0.961`; Rich: `{chosen.name}: 0.961`, printed once when "
            f"fit ends): a change smaller than that is not seen; for the whole number, print "
            f"it too (print(f\"{chosen.name}: {{value}}\") in on_validation_epoch_end) and "
            f"run init again")


SHAPE = Shape("script", "plain script printing its metric (`name: value` or a log line)",
              candidates, apply)
