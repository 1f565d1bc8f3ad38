"""The numbers a script's log lines show, and the label before each, read with `ast` (nothing
is run). One reader for every common log form: `print` and logging calls (`logger.info`,
`logging.info("...%f", x)`, `tqdm.write`), f-strings, `str.format` (positional and named
fields, format specs), %-formatting, `print("name:", x)` and `"name " + str(x)`, a dict
printed or logged by a Trainer's `self.log(d)` (`{'eval_acc': 0.9}`), a message built in a
variable first, and the script's own print wrapper (`print0(msg)`). Each call is
normalised to text and fields, and one rule reads the label before a field: `name: value`
opening the line (any name), else a metric name of the line (`val loss`, `test acc`,
`| valid ppl 1446.77 |`, `loss=0.3`): a metric or count word right before the value, with the
split and qualifier words before it (`valid`, `best`) or a split heading the line (`Test set:
Average loss:` is `test_average_loss`), or the metric a sentence names before its verb
(`The RMSE of prediction is: {rmse}` is `rmse`), never the words of a sentence (`new top
score of {score}` shows no metric). Two forms besides calls: a table's columns (a header
row printed from a list of names, then `|`-separated rows of values only: `table_values`),
and what a LightningModule logs with `self.log` and whether its progress bar prints it
(`lightning_logged`). It must not decide which metric is the objective
(loop/init/metric_choice.py does) nor write patterns (shapes/base.py pattern_for does)."""
from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass, field

# -- the vocabulary ----------------------------------------------------------------------
# words of a count or a measure: a number by its name (`num_steps: {step}`)
COUNT_WORDS = ("num", "n", "step", "steps", "count", "mb", "gb", "seconds", "sec", "tokens",
               "params", "epoch", "epochs", "iter", "iters", "mfu", "tflops", "time")
# words of a metric's name -> its direction
MINIMIZE = ("bpb", "loss", "perplexity", "ppl", "error", "err", "rmse", "mse", "mae", "nll",
            "wer", "cer", "bpc")
MAXIMIZE = ("acc", "accuracy", "score", "f1", "auc", "r2", "reward", "success", "bleu", "rouge",
            "precision", "recall", "pass_rate", "top1", "top5", "map", "iou", "dice",
            "spearman", "pearson", "corr", "mcc")
# the split a metric is measured on, and words that qualify it: a label's words before its
# metric word (`valid loss`, `best val acc`); any other word is a sentence's
SPLIT_WORDS = ("train", "training", "val", "valid", "validation", "eval", "dev", "test",
               "holdout")
HELD_OUT_WORDS = ("val", "valid", "validation", "eval", "dev", "holdout")   # not test
QUALIFIERS = ("best", "avg", "average", "mean", "final", "running", "total", "min", "max")
JOINERS = SPLIT_WORDS + QUALIFIERS + MINIMIZE + MAXIMIZE
# a sentence that names its metric, then says it: `The RMSE of prediction is: {x}`
COPULAS = ("is", "was", "are", "were", "equals")
# words a sentence opening a line may put before its metric: `The test accuracy of ...: {x}`
ARTICLES = ("the", "a", "an", "our", "model", "overall")
# a sentence opening the line, ending with one colon before the value: `Test Accuracy of the
# model on the 10000 test images: {x} %`
OPENING_SENTENCE = re.compile(r"^\s*(?P<text>[A-Za-z][^:=\n{}]*?)\s*:\s*$")

# the text before a printed number opening the line: `val_bpb:   ` or `accuracy=`
PRINTED_NAME = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:=]\s*$")
# the words before a value inside a line, and the separator: `..., val loss ` or `| acc=`
# (a word may hold `/` and `-`: `val/loss`, `val-acc`)
TAIL = re.compile(r"(?<![\w./-])(?P<words>(?:[A-Za-z][\w./-]*[ \t]+){0,5}[A-Za-z][\w./-]*)"
                  r"(?P<sep>\s*[:=]\s*|\s+)$")
NUMERIC_SPEC = re.compile(r"^[<>^=+\- #0]*\d*[,_]?(?:\.\d+)?[eEfFgGn%d]$")
NUMERIC_CALLS = {"float", "int", "round", "abs", "min", "max", "sum", "len", "item", "mean",
                 "median", "std", "sqrt", "log", "exp"}
WORD_CALLS = {"str", "repr", "join", "upper", "lower", "strip", "format", "type", "getattr",
              "basename", "dirname", "title"}
# methods that print a line: logging's, and `accelerator.print`, `console.print`
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "print"}
PERCENT = re.compile(r"%(?:\((?P<key>\w+)\))?[#0\- +]*(?P<width>\*|\d+)?"
                     r"(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])")


def name_words(name: str) -> list[str]:
    return [w for w in re.split(r"[_.\W]+", name.lower()) if w]


def direction_of(name: str) -> str | None:
    """minimize / maximize, read from a metric's name (`val_loss`, `test_auc`), else None."""
    words = name_words(name)
    if any(w in MINIMIZE for w in words):
        return "minimize"
    if any(w in MAXIMIZE for w in words) or name.lower() in MAXIMIZE:
        return "maximize"
    return None


def _names_a_number(token: str) -> bool:
    """A metric or a count word, alone or in a compound (`loss`, `val_loss`, `top1_acc`)."""
    return bool(direction_of(token)) or any(w in COUNT_WORDS for w in name_words(token))


# -- a log call as text and fields -------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """A value a line shows; `expr` None: one the reader cannot name (a missing argument)."""
    expr: ast.expr | None
    spec: str = ""
    key: str = ""        # the key a printed dict shows it under: `{'val_loss': 2.1}`


Part = str | Field


@dataclass(frozen=True)
class Column:
    """Where a table's rows show a value: cell `index` of `count`, `|`-separated; `edges`:
    each row opens and closes with the separator (`|  0.91  |  0.93  |`)."""
    index: int
    count: int
    edges: bool
    printer: str = ""    # the script's function that prints the rows ("": a print call)


@dataclass(frozen=True)
class Value:
    """A number a print shows, and the text just before it."""
    name: str            # `val_loss` (a label of words, `val loss`, joined by `_`, lowercase)
    label: str           # the words as printed: `val_loss`, `valid loss`
    expr: ast.expr
    line_start: bool     # `name: value` opening the line
    sure: bool           # a numeric format or arithmetic (not only a metric-like name)
    alone: bool = True   # nothing printed after it on its line
    line: str = ""       # the line as it would print, each number a distinct sample
    sample: str = ""     # this value's sample in `line`
    split_from: str = ""  # `{split} loss {x}`: the variable printing the word before it
    gap: str = ""        # a sentence's words between the label and the value: `of prediction is`
    quoted: bool = False  # a printed dict's key: `{'eval_stsb_spearman': 0.81, ...}`
    ratio: bool = False   # `final score: 40/50 = 80.00%`: the value is the ratio after `=`
    column: Column | None = None   # a cell of a table's rows, under the header's name

    @property
    def default_line(self) -> bool:
        """`name: value` and nothing else: what a task's default metric pattern reads."""
        return self.line_start and self.alone


def log_parts(node, subst: dict[str, str] | None = None,
              bound: dict[str, ast.expr] | None = None, wrapper: bool = False
              ) -> list[Part] | None:
    """The line a print or logging call writes, as text and fields; None for another call.
    `subst`: loop variables known to be words (`for split in ['train', 'val']`); `bound`:
    names bound to a message or a dict in the call's scope (`msg = f"..."`); `wrapper`: the
    call is to the script's own function that prints its first argument (`print0(msg)`)."""
    args = _log_args(node, bound or {})
    if wrapper and args is None and isinstance(node, ast.Call) and node.args \
            and not any(isinstance(a, ast.Starred) for a in node.args):
        args = [(bound or {}).get(getattr(node.args[0], "id", ""), node.args[0])]
    if not args:
        return None
    first = args[0]
    if not is_print(node) and len(args) >= 2 and _text(first) is not None \
            and PERCENT.search(_text(first) or ""):
        parts = _percent(_text(first) or "", args[1:])       # logging's own %-formatting
    else:
        parts = []
        for k, arg in enumerate(args):
            parts += ([" "] if k else []) + _expr_parts(arg)
    return _merge(parts, subst or {})


def _log_args(node, bound: dict[str, ast.expr]) -> list[ast.expr] | None:
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    args = [bound.get(a.id, a) if isinstance(a, ast.Name) else a for a in node.args]
    if is_print(node):
        return args
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = ast.unparse(func.value)
        if func.attr in LOG_METHODS or (func.attr == "write" and owner in
                                        ("tqdm", "sys.stdout", "sys.stderr")):
            return args
        if func.attr == "log" and owner == "self" and len(args) == 1 and not node.keywords \
                and isinstance(args[0], ast.Dict):
            return args       # a Hugging Face Trainer's `self.log(metrics)` prints the dict
            #                   (never `wandb.log({...})`: it prints nothing)
    return None


def is_print(node) -> bool:
    """A call of the builtin `print`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "print"


def _text(expr) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) \
        else None


def _expr_parts(expr: ast.expr) -> list[Part]:
    if _text(expr) is not None:
        return [_text(expr) or ""]
    if isinstance(expr, ast.Dict) and expr.keys and all(
            k is not None and _text(k) is not None for k in expr.keys):
        shown: list[Part] = ["{"]                # printed as its repr: {'val_loss': 2.1, ...}
        for k, (key, value) in enumerate(zip(expr.keys, expr.values)):
            shown += [f"{', ' if k else ''}'{_text(key)}': ", Field(value, key=_text(key) or "")]
        return shown + ["}"]
    if isinstance(expr, ast.JoinedStr):
        out: list[Part] = []
        for v in expr.values:
            if isinstance(v, ast.FormattedValue):
                spec = "".join(str(c.value) for c in getattr(v.format_spec, "values", [])
                               if isinstance(c, ast.Constant))
                out.append(Field(v.value, spec))
            else:
                out.append(str(getattr(v, "value", "")))
        return out
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr == "format" and _text(expr.func.value) is not None:
        return _format(_text(expr.func.value) or "", expr)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) \
            and _text(expr.left) is not None:
        right = expr.right
        values = right.elts if isinstance(right, ast.Tuple) else right if isinstance(
            right, ast.Dict) else [right]
        return _percent(_text(expr.left) or "", values)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and (
            _text(expr.left) is not None or _text(expr.right) is not None
            or isinstance(expr.left, ast.BinOp)):
        return _expr_parts(expr.left) + _expr_parts(expr.right)
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", "") == "str" \
            and len(expr.args) == 1:
        return [Field(expr.args[0])]               # `"loss " + str(x)`: the number itself
    return [Field(expr)]


def _format(fmt: str, call: ast.Call) -> list[Part]:
    """`'| valid loss {:5.2f} |'.format(x)`, `'{name:.3f}'.format(name=x)`, `'{0}'...`."""
    kwargs = {k.arg: k.value for k in call.keywords if k.arg}
    out: list[Part] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return [Field(None)]
    for literal, name, spec, _ in parsed:
        out.append(literal)
        if name is None:
            continue
        base = re.match(r"\w*", name)[0]     # type: ignore[index]
        if base == "":
            base, auto = str(auto), auto + 1
        expr = call.args[int(base)] if base.isdigit() and int(base) < len(call.args) \
            else kwargs.get(base)
        out.append(Field(expr, re.sub(r"\{[^}]*\}", "", spec or "")))
    return out


def _percent(fmt: str, values) -> list[Part]:
    """`'%s loss %.3f' % (split, x)`, `'%(loss).2f' % d`, logging's `("acc %f", x)`."""
    keyed = {_text(k): v for k, v in zip(values.keys, values.values)} \
        if isinstance(values, ast.Dict) else {}
    listed = [] if isinstance(values, ast.Dict) else list(values)
    out: list[Part] = []
    at, k = 0, 0
    for m in PERCENT.finditer(fmt):
        out.append(fmt[at:m.start()])
        at = m.end()
        if m["conv"] == "%":
            out.append("%")
            continue
        expr = keyed.get(m["key"]) if m["key"] else (listed[k] if k < len(listed) else None)
        k += 0 if m["key"] else 1
        conv = m["conv"]
        spec = ("d" if conv in "diu" else f".{m['prec']}{conv}" if m["prec"] and conv in
                "eEfFgG" else conv if conv in "eEfFgG" else "r" if conv in "ra" else "")
        out.append(Field(expr, spec))
    out.append(fmt[at:])
    return out


def _merge(parts: list[Part], subst: dict[str, str]) -> list[Part]:
    """Words put in as text (`'{}'.format('val')`, a loop's word), adjacent texts joined."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, Field):
            word = _text(p.expr) if p.expr is not None else None
            if word is None and isinstance(p.expr, ast.Name):
                word = subst.get(p.expr.id)
            if word is None:
                out.append(p)
                continue
            p = word
        if out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return out


# -- the labels ----------------------------------------------------------------------------
def values_of(parts: list[Part], tag: str = "") -> list[Value]:
    """Every number of a line shown after a label, with the line rendered (each number a
    distinct sample, `tag` telling lines apart) for checking a pattern against it."""
    samples = {i: f"{tag}{i:02d}.5" for i, p in enumerate(parts) if isinstance(p, Field)}
    found = []
    for i, part in enumerate(parts):
        if not isinstance(part, Field) or part.expr is None or i == 0 \
                or not isinstance(parts[i - 1], str):
            continue
        said = (part.key, "") if part.key else _label(parts, i) or _split_label(parts, i)
        if said is None:
            continue
        label, gap = said
        k = _ratio_after(parts, i)
        shown = parts[k] if k else part
        if not isinstance(shown, Field) or shown.expr is None:
            continue
        sure = _numeric(shown.expr, shown.spec, label, _after(parts, k or i))
        if sure is not None:
            found.append((i, k, label, gap, sure, shown.expr))
    numbers = {f[1] or f[0] for f in found} | {
        i for i, p in enumerate(parts) if isinstance(p, Field) and p.expr is not None
        and _numeric(p.expr, p.spec, "", "") is not None}
    line = "".join(p if isinstance(p, str) else samples[i] if i in numbers else "word"
                   for i, p in enumerate(parts))
    out = []
    for i, k, label, gap, sure, expr in found:
        key = isinstance(parts[i], Field) and bool(parts[i].key)    # type: ignore[union-attr]
        if key:
            out.append(Value(label, label, expr, False, sure, False, line, samples[i],
                             quoted=True))
            continue
        split_only = label.lower() in SPLIT_WORDS     # `Val: {val_acc:.4f}`
        at_start = i == 1 and PRINTED_NAME.match(str(parts[0])) is not None and not split_only
        alone = all(isinstance(p, str) and not p.strip() for p in parts[i + 1:]) and not k
        name = label if at_start else re.sub(r"[\s/-]+", "_", label).lower()
        if split_only:                  # the split, then the metric the value's name says
            name = "_".join([name, *(w for w in name_words(expr_name(expr))
                                     if w not in SPLIT_WORDS)])
        split = _heading(parts, i) if not at_start else None
        split = split or next((w.lower() for w in gap.split() if w.lower() in SPLIT_WORDS),
                              None)      # `Accuracy of the network on the test images: {}`
        if split and not set(name_words(label)) & set(SPLIT_WORDS):
            name = f"{split}_{name}"          # `Test set: Average loss:` -> test_average_loss
        out.append(Value(name, label, expr, at_start, sure, alone, line, samples[k or i],
                         _word_before(parts, i, label), gap, ratio=bool(k)))
    return out


def _ratio_after(parts: list[Part], i: int) -> int | None:
    """`final score: {a}/{b} = {r:.2f}%` (minGPT's adder): the index of the ratio's field
    after the label's fraction, which is the number the label names; else None."""
    if len(parts) <= i + 4:
        return None
    slash, fraction_of, equals, ratio = parts[i + 1:i + 5]
    if isinstance(slash, str) and slash.strip() == "/" and isinstance(fraction_of, Field) \
            and isinstance(equals, str) and equals.strip() == "=" \
            and isinstance(ratio, Field) and ratio.expr is not None:
        return i + 4
    return None


# a split heading the rest of a line: `Test set: `, `[val] `, `| valid | `, `Validation: `
HEADING = re.compile(r"(?<![\w.])(" + "|".join(SPLIT_WORDS) + r")(?: set| split| data)?"
                     r"\s*[:\]|]", re.I)


def _heading(parts: list[Part], i: int) -> str | None:
    """The split the text before field `i` names as a heading, lowercase; else None."""
    text = "".join(p if isinstance(p, str) else " word " for p in parts[:i])
    found = HEADING.findall(text)
    return found[-1].lower() if found else None


def _word_before(parts: list[Part], i: int, label: str) -> str:
    """The variable printing the word a label follows (`f"{split} loss {x}"`), or opening
    the line before it (`f"{phase} Loss: {l} Acc: {a}"`): the label's split, known only when
    the script runs; else ""."""
    if set(name_words(label)) & set(SPLIT_WORDS):
        return ""
    right_before = re.sub(r"[\s:=]*$", "", str(parts[i - 1])).strip() == label.strip()
    opening = next((k for k, p in enumerate(parts[:i]) if isinstance(p, Field)
                    or re.sub(r"[\s\[\]|:-]", "", p)), None)
    for k in (i - 2 if right_before else None, opening):
        word = parts[k] if k is not None and k >= 0 else None
        if isinstance(word, Field) and word.expr is not None \
                and _numeric(word.expr, word.spec, "", "") is None:
            return ast.unparse(word.expr)
    return ""


def _after(parts: list[Part], i: int) -> str:
    return str(parts[i + 1]) if i + 1 < len(parts) and isinstance(parts[i + 1], str) else ""


def _label(parts: list[Part], i: int) -> tuple[str, str] | None:
    """The label before field `i` and the words between them: `name:` opening the line,
    else the metric name the words before it end with (`train loss: `, `| valid ppl `,
    `acc=`), or a sentence that names a metric and says it (`The RMSE of prediction is: `:
    `RMSE`, then `of prediction is`); else None (a sentence's words, `saving model with new
    top score of `)."""
    before = str(parts[i - 1])
    if i == 1:
        m = PRINTED_NAME.match(before)
        if m:
            return m[1], ""
    m = TAIL.search(before)
    if m is None:
        return _opening_sentence(before) if i == 1 else None
    words = m["words"].split()
    end = len(words) - 1
    if not _names_a_number(words[end]):
        if words[end].lower() not in COPULAS:
            return _opening_sentence(before) if i == 1 else None
        # the metric the sentence is about: its last metric word before the verb
        end = next((k for k in range(end - 1, -1, -1) if direction_of(words[k])), -1)
        if end < 0:
            return None
    label = [words[end]]
    for w in reversed(words[:end]):
        if w.lower() not in JOINERS:
            break
        label.insert(0, w)
    return " ".join(label), " ".join(words[end + 1:])


def _split_label(parts: list[Part], i: int) -> tuple[str, str] | None:
    """A split word alone before the value, the metric named by the value itself:
    `Train: {train_acc:.4f}, Val: {val_acc:.4f}` -> `Val` (a `val_acc`); else None."""
    m = re.search(r"(?<![\w./-])([A-Za-z]+)\s*[:=]\s*$", str(parts[i - 1]))
    expr = parts[i].expr if isinstance(parts[i], Field) else None   # type: ignore[union-attr]
    if m is None or m[1].lower() not in SPLIT_WORDS or expr is None \
            or not direction_of(expr_name(expr)):
        return None
    return m[1], ""


def _opening_sentence(text: str) -> tuple[str, str] | None:
    """A sentence opening the line that names its metric first and says it after a colon:
    `Test Accuracy of the model on the 10000 test images: ` -> (`Test Accuracy`, `of the model
    on the 10000 test images`); only split, qualifier and article words before the metric
    word (`Saving model with new top score: ` names none). Else None."""
    m = OPENING_SENTENCE.match(text)
    if m is None:
        return None
    tokens = m["text"].split()
    for k, w in enumerate(tokens[:4]):
        if direction_of(w):
            lead = tokens[:k]
            if not all(t.lower() in JOINERS + ARTICLES for t in lead) or len(tokens) > 16:
                return None
            joined = [t for t in lead if t.lower() in JOINERS]
            if lead[len(lead) - len(joined):] != joined:
                return None       # `Test the Accuracy`: the joiners must be next to it
            return " ".join([*joined, w]), " ".join(tokens[k + 1:])
    return None


def _numeric(expr: ast.expr, spec: str, label: str, after: str) -> bool | None:
    """True: surely a number; False: a number by its metric-like name only; None: words
    (a string, a `key = value` pair, a name that says nothing)."""
    if after.lstrip().startswith(("=", ":")):
        return None                   # `Overriding: {key} = {value}`: the label names a key
    if NUMERIC_SPEC.match(spec):
        return True
    if isinstance(expr, ast.Constant):
        return True if isinstance(expr.value, (int, float)) and not isinstance(
            expr.value, bool) else None
    if isinstance(expr, (ast.JoinedStr, ast.List, ast.Dict, ast.Tuple, ast.Set, ast.Compare)):
        return None
    if isinstance(expr, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(expr, ast.Call):
        func = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(
            expr.func, "id", "")
        if func in WORD_CALLS:
            return None
        if func in NUMERIC_CALLS:
            return True
    named = direction_of(label) or direction_of(expr_name(expr)) or any(
        w in COUNT_WORDS for w in name_words(f"{label}_{expr_name(expr)}"))
    return False if named else None


def expr_name(expr: ast.expr) -> str:
    """The name a value goes by: `auc`, `metrics.val_loss`, `losses['val']` -> `val`."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return str(expr.slice.value)
    return ""


@dataclass
class CallContext:
    """What the code around a call tells of the line it prints."""
    words: dict[str, list[str]] = field(default_factory=dict)  # `for split in ['train', 'val']`
    bound: dict[str, ast.expr] = field(default_factory=dict)   # `msg = f"..."`, `m = {...}`
    wrapper: bool = False    # a function of the script that prints its first argument


Context = dict[ast.AST, CallContext]


def print_context(tree: ast.AST) -> Context:
    """{call: what the code around it tells}: the words a loop variable it prints takes
    (`for split in ['train', 'val']:` reads `print(f"{split} loss {x:.3f}")` as both `train
    loss` and `val loss`); a name its scope binds once to a message or a dict of string keys
    (`msg = f"val loss: {v:.3f}"; print(msg)`, `metrics = {"eval_acc": a}; self.log(metrics)`);
    and whether it calls a function of the script that prints its first argument
    (modded-nanogpt's `def print0(s, console=False): ... print(s)`)."""
    out: Context = {}
    wrappers = {f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                ast.AsyncFunctionDef)) and _prints_its_first_argument(f)}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                         ast.AsyncFunctionDef)))]:
        nodes = list(own_nodes(scope))
        assigned: dict[str, list[ast.expr]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, []).append(node.value)
        bound = {name: values[0] for name, values in assigned.items()
                 if len(values) == 1 and _a_message(values[0])}
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            names = {a.id for a in node.args if isinstance(a, ast.Name) and a.id in bound}
            if names:
                out.setdefault(node, CallContext()).bound.update({n: bound[n] for n in names})
            if isinstance(node.func, ast.Name) and node.func.id in wrappers:
                out.setdefault(node, CallContext()).wrapper = True
    for func, param, words in _word_parameters(tree):
        for node in ast.walk(func):
            if isinstance(node, ast.Call):
                out.setdefault(node, CallContext()).words[param] = words
    for loop in ast.walk(tree):
        if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) \
                and isinstance(loop.iter, (ast.List, ast.Tuple)) and loop.iter.elts \
                and all(_text(e) is not None for e in loop.iter.elts):
            words = [_text(e) or "" for e in loop.iter.elts]
            for node in ast.walk(loop):
                if isinstance(node, ast.Call):
                    out.setdefault(node, CallContext()).words[loop.target.id] = words
    return out


def _word_parameters(tree: ast.AST):
    """(function, parameter, words) for a parameter every call of the function in the file
    passes a word (minGPT's `eval_split(trainer, 'train')`, `eval_split(trainer, 'test')`)."""
    funcs = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    calls: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in funcs:
            calls.setdefault(node.func.id, []).append(node)
    for name, found in calls.items():
        func = funcs[name]
        for j, param in enumerate(func.args.posonlyargs + func.args.args):
            passed = [c.args[j] if j < len(c.args) else next(
                (k.value for k in c.keywords if k.arg == param.arg), None) for c in found]
            words = [_text(p) for p in passed]
            if all(w for w in words):
                yield func, param.arg, list(dict.fromkeys(w or "" for w in words))


def own_nodes(scope: ast.AST):
    """The nodes of a module or function, not those of the functions and classes inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _a_message(expr: ast.expr) -> bool:
    """A line built to be printed: an f-string, `'...'.format(...)`, `'...' % x`, or a dict
    of string keys."""
    parts = _expr_parts(expr)
    return isinstance(expr, ast.Dict) and len(parts) > 1 or (
        not isinstance(expr, ast.Dict) and any(isinstance(p, str) for p in parts)
        and any(isinstance(p, Field) for p in parts))


def _prints_its_first_argument(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`def print0(s, console=False): ... print(s)`: a print or logging call of the body shows
    the function's first parameter as it is."""
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    params = params[1:] if params[:1] in (["self"], ["cls"]) else params
    if not params:
        return False
    first = params[0]
    return any(isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
               and node.args[0].id == first and _log_args(node, {}) is not None
               for node in ast.walk(func))


def call_values(node, context: Context | None = None) -> list[Value]:
    """Every value a print or logging call shows after a label, once per word of a loop
    variable it prints (at most 16 lines)."""
    around = (context or {}).get(node, CallContext())
    substs: list[dict[str, str]] = [{}]
    for var, words in around.words.items():
        substs = [{**s, var: w} for s in substs for w in words][:16]
    out: list[Value] = []
    for k, subst in enumerate(substs):
        parts = log_parts(node, subst, around.bound, around.wrapper)
        if parts:
            out += values_of(parts, f"{getattr(node, 'lineno', 0)}{k:02d}")
    return out


# -- a table: a header row of column names, then rows of values only ----------------------
# a column's name as a header shows it: `tta_val_acc`, `val/acc`, `Val Acc` (padding aside)
COLUMN_NAME = re.compile(r"^[A-Za-z_][\w./-]*(?: [\w./-]+){0,3}$")


def table_values(tree: ast.AST, tag: str = "9") -> list[Value]:
    """Every column of a `|`-separated table the script prints whose name names a number
    (`val_acc`, `epoch`). The table: a list of column names bound once (`columns = ['epoch',
    'train_loss', 'val_acc']`), printed as the header row by a function of the script that
    prints `|`-separated cells (`for c in cells: s += "|  %s  " % c`) or by `print(" |
    ".join(columns))`, and named again where the rows are built (`for c in columns: ...`),
    so each row has the header's cells in its order, values only, a cell blank where a
    value is missing. The value a column shows is the variable of its name (rows built from
    `locals()` by column name): its last assignment, else the header's name itself."""
    functions = {f.name: f for f in ast.walk(tree)
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
    loads: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads[node.id] = loads.get(node.id, 0) + 1
    out: list[Value] = []
    done: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        shown, printer = _header_of(node, functions)
        name = printer.name if isinstance(printer, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else ""
        if shown is None or shown.id in done or loads.get(shown.id, 0) < 2 \
                or len(assigned.get(shown.id, [])) != 1:
            continue
        header = assigned[shown.id][0]
        names = _column_names(header)
        edges = _row_edges(printer, functions) if printer is not None else None
        if names is None or edges is None:
            continue
        done.add(shown.id)
        out += _columns(names, header, Column(0, len(names), edges, name), assigned,
                        f"{tag}{getattr(node, 'lineno', 0)}")
    return out


def _header_of(call: ast.Call, functions: dict) -> tuple[ast.Name | None, ast.AST | None]:
    """(the list printed, what prints its cells) for a header row's call: a function of the
    script given the list first (`print_columns(columns, is_head=True)`), or a print of
    `SEP.join(columns)`; else (None, None)."""
    first = call.args[0]
    if isinstance(call.func, ast.Name) and call.func.id in functions \
            and isinstance(first, ast.Name):
        return first, functions[call.func.id]
    if is_print(call):
        for arg in ast.walk(first):
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
                    and arg.func.attr == "join" and arg.args \
                    and isinstance(arg.args[0], ast.Name):
                return arg.args[0], call
    return None, None


def _column_names(header: ast.expr) -> list[str] | None:
    """The names a list literal of strings holds (padding stripped), when they look like a
    header's (at least two, names of a metric or count among them); else None."""
    if not isinstance(header, (ast.List, ast.Tuple)) or len(header.elts) < 2:
        return None
    names = [_text(e) for e in header.elts]
    if any(n is None or not COLUMN_NAME.match(n.strip()) for n in names):
        return None
    stripped = [(n or "").strip() for n in names]
    return stripped if any(direction_of(n) for n in stripped) else None


def _row_edges(printer: ast.AST, functions: dict) -> bool | None:
    """Whether the rows `printer` prints (a function and those it calls, or a print call)
    open and close with `|` (`"|  %s  "` per cell and a last `"|"`) rather than only
    separate cells (`" | ".join(cells)`); None when it prints no `|`-separated cells."""
    scopes = [printer] + [functions[n.func.id] for n in ast.walk(printer)
                          if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                          and n.func.id in functions and functions[n.func.id] is not printer]
    texts: list[str] = []
    joins: set[int] = set()
    prints = False
    for scope in scopes:
        for n in ast.walk(scope):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "join":
                joins.add(id(n.func.value))
            prints = prints or (isinstance(n, ast.Call) and _log_args(n, {}) is not None)
            if "|" in (_text(n) or ""):
                texts.append("" if id(n) in joins else _text(n) or "")
    if not texts or not prints:
        return None
    return any(t.strip().startswith("|") for t in texts)


def _columns(names: list[str], header: ast.expr, table: Column,
             assigned: dict[str, list[ast.expr]], tag: str) -> list[Value]:
    """A Value per column whose name names a number, each with the rows rendered."""
    numbered = [k for k, n in enumerate(names) if _names_a_number(n.replace(" ", "_"))]
    samples = {k: f"{tag}{k:02d}.5" for k in numbered}

    def row(cells: list[str]) -> str:
        return "|  " + "  |  ".join(cells) + "  |" if table.edges else " | ".join(cells)

    head = row(names)
    line = row([samples.get(k, "word") for k in range(len(names))])
    out = []
    for k in numbered:
        label = names[k]
        values = [v for v in assigned.get(label, [])
                  if not (isinstance(v, ast.Constant) and v.value is None)]
        expr = values[-1] if values else header.elts[k]    # type: ignore[attr-defined]
        out.append(Value(re.sub(r"[\s/-]+", "_", label), label, expr, False, True, False,
                         f"{head}\n{line}", samples[k],
                         column=Column(k, len(names), table.edges, table.printer)))
    return out


# -- Lightning's `self.log`: what its progress bar prints ----------------------------------
# the hooks whose `self.log` defaults to on_step=True, on_epoch=False (all others: the reverse)
STEP_HOOKS = ("training_step", "on_train_batch_end", "on_train_batch_start")


@dataclass(frozen=True)
class Logged:
    """A number a LightningModule logs: `self.log("val/acc", acc, prog_bar=True)` or a key
    of `self.log_dict({...})`."""
    name: str            # as Lightning names it: `val/acc`; `val_loss_epoch` when logged on
    #                      both step and epoch (the bar shows `val_loss_step` and that)
    logged: str          # as the code names it: `val_loss`
    expr: ast.expr       # the value logged
    on_bar: bool         # prog_bar=True: the progress bar prints it, else only loggers see it
    hook: str            # the method that logs it: `validation_step`
    call: ast.Call
    owner: str = ""      # the LightningModule class: `MNISTLitModule`


def lightning_logged(tree: ast.AST) -> list[Logged]:
    """Every metric the LightningModules of a file log under a name the code spells out
    (`self.log(f"{stage}/acc", ...)` names none). With `prog_bar=True` Lightning's progress
    bar prints it, as `val/acc=0.961` in the TQDM bar's postfix (rewritten with `\\r`, to
    stderr) or `val/acc: 0.961` in the RichProgressBar's (printed once, when fit ends, when
    the output is not a terminal; the name and value may wrap onto two lines); both
    rounded to 3 digits. Without it the number goes only to the loggers (TensorBoard, CSV)."""
    out: list[Logged] = []
    classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
    modules: set[str] = set()          # a LightningModule, or a class of the file deriving one
    while True:
        found = {c.name for c in classes if any(
            ast.unparse(b).endswith("LightningModule") or ast.unparse(b) in modules
            for b in c.bases)}
        if found <= modules:
            break
        modules |= found
    for cls in classes:
        if cls.name not in modules:
            continue
        for hook in cls.body:
            if not isinstance(hook, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(hook):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and ast.unparse(call.func.value) == "self" \
                        and call.func.attr in ("log", "log_dict"):
                    out += _logged(call, hook.name, cls.name)
    return out


def _logged(call: ast.Call, hook: str, owner: str) -> list[Logged]:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    args = list(call.args)

    def flag(key: str, default: bool) -> bool:
        value = keywords.get(key)
        return value.value is True if isinstance(value, ast.Constant) else \
            default if value is None else False
    step = flag("on_step", hook in STEP_HOOKS)
    epoch = flag("on_epoch", hook not in STEP_HOOKS)
    on_bar = flag("prog_bar", False)
    if call.func.attr == "log":                               # type: ignore[attr-defined]
        name = args[0] if args else keywords.get("name")
        value = args[1] if len(args) > 1 else keywords.get("value")
        pairs = [(name, value)]
    else:
        found = args[0] if args else keywords.get("dictionary")
        pairs = list(zip(found.keys, found.values)) if isinstance(found, ast.Dict) else []
    out = []
    for name, value in pairs:
        text = _text(name)
        if text is None or value is None:
            continue
        shown = f"{text}_epoch" if step and epoch else text
        out.append(Logged(shown, text, value, on_bar, hook, call, owner))
    return out
