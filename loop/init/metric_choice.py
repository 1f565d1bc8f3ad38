"""Which printed number `autoresearch init` optimizes, and which way. Rules, in order:
`--metric NAME` (with `--metric-pattern REGEX`: the user's own regex for it); else the
result protected code grades (the lm shape); else the one validation metric (`val_`,
`valid_`, `eval_`, `dev_`, `holdout_`, or after qualifiers: `ema_val_acc`; of several, the
one the repo keeps its best model by (`monitor=`) or its `main()` returns, a split's loss
over its perplexity, or the one program.md / README.md name far more often than the others);
else the one metric-like name (a loss, an accuracy) that does not say "test" or "train" (nor
a bare `acc` inside a log line: it names no split). A test metric is never chosen unless
named: the test split is not for optimizing, but a repo whose only held-out split is called
"test" is told its name (`pass --metric test_loss`). Nor is a training loss
(a name that says `train`/`training`, or a bare `loss`/`ppl` read from inside a per-step log
line, nanoGPT's `iter 5: loss 2.31, time ...`): as the objective it rewards memorising the
training data; `--metric NAME` takes it anyway. A metric whose pattern would not read
exactly its own number from the lines the script prints is refused. Anything it cannot
settle (two validation metrics, only test or training metrics, a direction its name does
not give): one line, exit 2."""
from __future__ import annotations

import ast
import re
import shlex
from typing import NoReturn

from loop.init.plan import Guess, InitError, Plan
from loop.init.shapes.base import Candidate
from loop.script.prints import direction_of, name_words

HELD_OUT_PREFIX = ("val", "valid", "validation", "eval", "dev", "holdout")
METRIC_FLAGS = "--metric NAME, --metric-pattern REGEX"


def is_test(name: str) -> bool:
    return "test" in name_words(name)


def is_held_out(name: str) -> bool:
    """A validation metric's name: a held-out split first (`val_loss`), or after words that
    say how it was measured (`ema_val_acc`: the weight average's, `tta_val_acc`: with
    test-time augmentation); not after a summary of the run (`best_val_loss`: the best so
    far of val_loss, not another measurement)."""
    said = name_words(name)
    at = next((k for k, w in enumerate(said) if w in HELD_OUT_PREFIX), None)
    return at is not None and not {"best", "min", "max", "running", "lowest",
                                   "highest"} & set(said[:at])


def is_training(candidate: Candidate) -> bool:
    """A training metric: its name says so, or a bare `loss` printed inside a log line (the
    per-step loss a training loop logs); a `loss: X` line of its own is an unlabeled loss."""
    said = name_words(candidate.name)
    return bool({"train", "training"} & set(said)) or (
        said in (["loss"], ["ppl"], ["perplexity"]) and bool(candidate.pattern))


def choose(plan: Plan, found: list[Candidate], metric: str | None, pattern: str | None,
           direction: str | None) -> Candidate:
    """The chosen candidate; the plan's metric, direction and their guesses set."""
    names = _where(found, plan.script)
    if pattern is not None:
        chosen = _given_pattern(plan, metric, pattern)
        plan.guesses["metric"] = Guess(f"--metric {metric} --metric-pattern", True, METRIC_FLAGS)
    elif metric:
        chosen = next((c for c in found if c.name == metric), None) or next(  # type: ignore
            (c for c in found if c.name.lower() == metric.lower()), None)
        if chosen is None:
            raise InitError(f"init: no metric found: {plan.script} and the modules it imports "
                            f"print no number named `{metric}` (they print: "
                            f"{', '.join(names) or 'none'}); for a line of another form pass "
                            f"--metric-pattern REGEX too")
        plan.guesses["metric"] = Guess(f"--metric; {chosen.source}", True, METRIC_FLAGS)
    else:
        chosen = _pick(plan, found, names)
    if chosen.problem:
        raise InitError(f"init: no pattern reads only {chosen.name} from what "
                        f"{plan.script} prints: {chosen.problem}; " + (
                            chosen.fix or f"pass --metric {chosen.name} --metric-pattern REGEX"))
    plan.metric, plan.metric_pattern, plan.metric_source = (chosen.name, chosen.pattern,
                                                            chosen.source)
    guessed = direction_of(plan.metric)
    if direction:
        plan.direction = direction
        plan.guesses["direction"] = Guess("--direction", True, "--direction")
    elif guessed:
        plan.direction = guessed
        plan.guesses["direction"] = Guess(f"from the name {plan.metric}", False,
                                          "--direction minimize|maximize")
    else:
        raise InitError(f"init: cannot tell whether a lower or a higher {plan.metric} is "
                        f"better: pass --direction minimize or --direction maximize")
    return chosen


def _where(found: list[Candidate], script: str) -> list[str]:
    """Each name printed, once, with the file that prints it when that is not the script
    (`time (by utils.py)`)."""
    return list(dict.fromkeys(c.name + (f" (by {c.file})" if c.file and c.file != script
                                        else "") for c in found))


def _loss_of_its_perplexity(names: list[str]) -> str | None:
    """Of `valid_loss` and `valid_ppl` (one split's loss and its exp), the loss; else None."""
    if len(names) != 2:
        return None
    (a, *split_a), (b, *split_b) = ([*reversed(name_words(n))] for n in names)
    if split_a != split_b or {a, b} not in ({"loss", "ppl"}, {"loss", "perplexity"}):
        return None
    return names[0] if a == "loss" else names[1]


def _best_model_metric(args: str, names: list[str]) -> str | None:
    """Of `names`, the one a Hugging Face TrainingArguments `--metric_for_best_model X` in the
    run's arguments selects checkpoints by (X, or `eval_X` as the Trainer reads it)."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    for k, word in enumerate(words):
        flag, _, value = word.partition("=")
        if flag in ("--metric_for_best_model", "--metric-for-best-model"):
            value = value or (words[k + 1] if k + 1 < len(words) else "")
            return next((n for n in names if n in (value, f"eval_{value}")), None)
    return None


def _returned(plan: Plan, names: list[str]) -> tuple[str, str] | None:
    """The one of `names` a function of the script returns as its result (`return
    tta_val_acc` in the `main()` whose result the script keeps: `accs = [main(run) for run
    in ...]`), and that in words; else None. A result the script hands back is the number it
    is run for, beside the others it prints on the way."""
    import ast
    try:
        tree = ast.parse((plan.root / plan.script).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    functions = {f.name: f for f in tree.body if isinstance(f, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef))}
    kept: set[str] = set()           # called at module level, the result used
    todo: list[ast.AST] = [n for n in tree.body if n not in functions.values()
                           and not isinstance(n, ast.ClassDef)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            todo += [*node.value.args, *(k.value for k in node.value.keywords)]
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in functions:
            kept.add(node.func.id)
        todo += list(ast.iter_child_nodes(node))
    returned = {(r.value.id, f) for f in sorted(kept) for r in ast.walk(functions[f])
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Name)
                and r.value.id in names}
    if len({name for name, _ in returned}) != 1:
        return None
    name, func = next(iter(returned))
    return name, f"{func}() returns as its result"


def _named_by_docs(plan: Plan, names: list[str]) -> tuple[str, str] | None:
    """The one of `names` the repo's own words (program.md, README.md) name as the target:
    at least twice, and at least twice as often as any other; else None."""
    text = " ".join((plan.root / f).read_text(errors="replace")
                    for f in ("program.md", "README.md") if (plan.root / f).is_file())
    counts = sorted(((len(re.findall(rf"\b{re.escape(n)}\b", text)), n) for n in names),
                    reverse=True)
    (top, name), (second, _) = counts[0], counts[1]
    if top >= 2 and top >= 2 * second:
        others = ", ".join(f"{n} {k}" for k, n in counts[1:])
        return name, f"named {top} times in program.md/README.md ({others})"
    return None


def _given_pattern(plan: Plan, metric: str | None, pattern: str) -> Candidate:
    if not metric:
        raise InitError("init: --metric-pattern needs --metric NAME too (the name results.tsv "
                        "and the journal show)")
    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        raise InitError(f"init: --metric-pattern is not a valid regex: {exc}") from None
    if groups != 1:
        raise InitError(f"init: --metric-pattern needs exactly one capture group (the number),"
                        f" got {groups}")
    return Candidate(metric, "script", f"printed by {plan.script}, matched by --metric-pattern",
                     pattern)


def _pick(plan: Plan, found: list[Candidate], names: list[str]) -> Candidate:
    graded = [c for c in found if c.shape == "lm"]
    if graded:
        plan.guesses["metric"] = Guess(graded[0].source, True, METRIC_FLAGS)
        return graded[0]
    likely = [c for c in found if direction_of(c.name)]
    opaque = [c for c in likely if c.opaque]
    likely = [c for c in likely if not c.opaque]
    if opaque and not likely:
        c = opaque[0]
        raise InitError(f"init: {plan.script}: no held-out number is printed by name: "
                        f"{c.name} is `{c.opaque}` printed as is, an attribute of an object "
                        f"the script never sets, which may hold a dict of splits rather than "
                        f"one number; print the validation number itself, e.g. "
                        f"print(f\"val_loss: {{x:.4f}}\"), then run init again")
    tested = [c for c in likely if is_test(c.name)]
    tests = [c.name for c in tested]
    training = list(dict.fromkeys(c.name for c in likely if is_training(c)))
    likely = [c for c in likely if not is_test(c.name) and not is_training(c)]
    held = [c for c in likely if is_held_out(c.name)]
    # `epoch 3: loss 0.5 acc 0.9`: a bare metric word inside a log line names no split; a
    # sentence said once after the loops (`The RMSE of prediction is: x`) is the result
    unsplit = list(dict.fromkeys(c.name for c in likely
                                 if c.pattern and len(name_words(c.name)) == 1 and not c.report))
    likely = [c for c in likely if c.name not in unsplit]
    pool = held or likely
    distinct = list(dict.fromkeys(c.name for c in pool))
    tests = list(dict.fromkeys(tests))
    if not held and tests and all(len(name_words(n)) == 1 for n in distinct):
        # no validation split is printed, only one named test (makemore's `test loss`, the
        # pytorch examples' `Test set:`): it is the held-out number the repo reports, never a
        # training loss (time_sequence_prediction's bare `loss:` in the closure, a per-step
        # `loss` of a log line that names no split)
        return _test_split(plan, tested, distinct + unsplit, names)
    if len(distinct) == 1:
        chosen = pool[0]
        others = [n for n in names if n.partition(" (by ")[0] != chosen.name]
        kind = "the validation metric" if held else "the only loss/accuracy-like name"
        plan.guesses["metric"] = Guess(
            f"{kind}, {chosen.source}" + (f"; others: {', '.join(others)}" if others else ""),
            bool(held), METRIC_FLAGS)
        return chosen
    best = _best_model_metric(plan.args, distinct)
    if best:
        chosen = next(c for c in pool if c.name == best)
        plan.guesses["metric"] = Guess(f"the one --args names as --metric_for_best_model, "
                                       f"{chosen.source}", True, METRIC_FLAGS)
        return chosen
    selected = list(dict.fromkeys((c.name, c.selects) for c in pool if c.selects))
    if len(selected) == 1:            # what the repo keeps its best model by
        chosen = next(c for c in pool if c.name == selected[0][0])
        plan.guesses["metric"] = Guess(f"the one {selected[0][1]} keeps the best model by, "
                                       f"{chosen.source}", False, METRIC_FLAGS)
        return chosen
    returned = _returned(plan, distinct)
    if returned:
        chosen = next(c for c in pool if c.name == returned[0])
        plan.guesses["metric"] = Guess(f"the {'validation metric' if held else 'metric'} "
                                       f"{returned[1]}, {chosen.source}", False, METRIC_FLAGS)
        return chosen
    named = _named_by_docs(plan, distinct) if len(distinct) > 1 else None
    if named:
        chosen = next(c for c in pool if c.name == named[0])
        plan.guesses["metric"] = Guess(f"{named[1]}, {chosen.source}", False, METRIC_FLAGS)
        return chosen
    loss = _loss_of_its_perplexity(distinct)
    if loss:
        chosen = next(c for c in pool if c.name == loss)
        plan.guesses["metric"] = Guess(
            f"the {'validation ' if held else ''}loss, {chosen.source} (the perplexity "
            f"printed beside it is its exp)", False, METRIC_FLAGS)
        return chosen
    _refuse(plan, distinct, bool(held), unsplit, training, names)


def _test_split(plan: Plan, tested: list[Candidate], passed_over: list[str],
                names: list[str]) -> Candidate:
    """The metric of the one held-out split a script prints, named test: chosen, and said to
    be the test split the night will select on. Of several (a test loss and accuracy), the
    one the repo keeps its best by, names in its docs, or else its loss."""
    distinct = list(dict.fromkeys(c.name for c in tested))
    name = _one_test_metric(plan, distinct)
    if not name:
        raise InitError(f"init: {plan.script}: no validation metric is printed, and several "
                        f"test metrics are ({', '.join(distinct)}): pass --metric "
                        f"{distinct[0]}, or --metric with another of them")
    chosen = next(c for c in tested if c.name == name)
    others = [n for n in names if n.partition(" (by ")[0] != name]
    passed = (f"; {', '.join(passed_over)} name{'s' if len(passed_over) == 1 else ''} no "
              f"split (likely training)" if passed_over else "")
    plan.guesses["metric"] = Guess(
        f"the test split's, {chosen.source}: {plan.script} prints no validation metric, so "
        f"the night selects on its test split (hold out a validation split to keep a test "
        f"number no keep has seen){passed}" + (f"; others: {', '.join(others)}" if others
                                                else ""), False, METRIC_FLAGS)
    return chosen


def _one_test_metric(plan: Plan, distinct: list[str]) -> str | None:
    if len(distinct) == 1:
        return distinct[0]
    best = _best_model_metric(plan.args, distinct)
    if best:
        return best
    named = _named_by_docs(plan, distinct)
    if named:
        return named[0]
    losses = [n for n in distinct if "loss" in name_words(n)]
    return losses[0] if len(losses) == 1 else None


def _refuse(plan: Plan, distinct: list[str], held: bool, unsplit: list[str],
            training: list[str], names: list[str]) -> NoReturn:
    """No metric can be chosen: why, in one line, with the flag that settles it."""
    if len(distinct) > 1:
        kind = "validation metrics" if held else "metrics"
        raise InitError(f"init: {plan.script}: several {kind} printed ({', '.join(distinct)}): "
                        f"pass --metric {distinct[0]}, or --metric with another of them")
    if unsplit:
        verb = "is" if len(unsplit) == 1 else "are"
        raise InitError(f"init: {plan.script}: no validation metric is printed: "
                        f"{', '.join(unsplit)} {verb} "
                        f"printed inside a log line that names no split (it may be the "
                        f"training one); if it is measured on held-out data, pass --metric "
                        f"{unsplit[0]}")
    if training:
        raise InitError(f"init: {plan.script}: only a training metric is printed "
                        f"({', '.join(training)}): as "
                        f"the objective it rewards memorising the training data; print a "
                        f"validation metric, or pass --metric {training[0]} to accept it anyway")
    formatted = formatted_metric(plan)
    if formatted:
        label, where = formatted
        name = re.sub(r"\W+", "_", label).strip("_").lower()
        hint = (f"{plan.script} formats `{label}: <number>` {where}, in no print init reads: "
                f"if that line is printed, pass --metric {name} --metric-pattern "
                + shlex.quote(rf"(?<![\w.]){re.escape(label)}\s*[:=]\s*([0-9.]+)"))
    else:
        hint = ""
    if names:
        raise InitError(f"init: no metric found among the numbers {plan.script} and the "
                        f"modules it imports print ({', '.join(names)}): none is named like a "
                        f"loss or an accuracy; " + (hint or "pass --metric NAME"))
    raise InitError(f"init: no metric found: {plan.script} and the modules it imports print "
                    f"no number after a name (e.g. print(f\"val_loss: {{loss:.4f}}\")); "
                    + (hint or "pass --metric NAME --metric-pattern REGEX for a line of "
                               "another form"))


# `Acc: %.3f`, `val loss = %.4f`, `Loss: {x:.3f}` ({f} marks a formatted value of a f-string)
FORMATTED = re.compile(r"([A-Za-z][A-Za-z0-9_]*(?: [A-Za-z][A-Za-z0-9_]*)?)\s*[:=]\s*"
                       r"(?:%[-+ 0#]*\d*(?:\.\d+)?[fegd]|\{f\})")


def formatted_metric(plan: Plan) -> tuple[str, str] | None:
    """(label, where) of a number the script formats after a metric's name in a string no
    print init reads shows (`progress_bar(i, n, 'Loss: %.3f | Acc: %.3f%%' % ...)`,
    `logger.info(f"Acc: {acc:.2f}")`), preferring one in a function that evaluates; None
    when there is none. Makes a refusal's hint concrete."""
    try:
        tree = ast.parse((plan.root / plan.script).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    found: list[tuple[bool, str, str]] = []
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))]
    owner = {id(n): f.name for f in functions for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) \
                and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            text = node.left.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str)
                           else "{f}" if isinstance(v, ast.FormattedValue) and v.format_spec
                           else "{}" for v in node.values)
        else:
            continue
        func = owner.get(id(node), "")
        for label in FORMATTED.findall(text):
            if direction_of(label.replace(" ", "_")):
                evaluating = bool(re.search(r"(^|_)(val|valid|test|eval)", func, re.I))
                found.append((evaluating, label, f"in {func}()" if func else "at module level"))
    # what the script keeps its best by (`if acc > best_acc:`) names the objective
    kept = {ast.unparse(side).lower() for c in ast.walk(tree) if isinstance(c, ast.Compare)
            for side in (c.left, *c.comparators)
            if "best" not in ast.unparse(side).lower()
            and any("best" in ast.unparse(o).lower() for o in (c.left, *c.comparators))}
    found.sort(key=lambda f: (not f[0], re.sub(r"\W+", "_", f[1]).lower() not in kept))
    return (found[0][1], found[0][2]) if found else None
