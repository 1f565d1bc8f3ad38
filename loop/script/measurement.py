"""Which settings change what the metric measures, read from the script's data flow with `ast`
(nothing is run). A search that moves them compares numbers that measure different things: a
validation loss over 64 bytes against one over 1024 is no gain. So `autoresearch init` leaves
out, and names:

- a setting the metric's computation reads: the slice of the code the printed metric is
  computed from, followed back through assignments (`results.append(x)` among them), loop
  targets, local functions' returns and the arguments a local function is called with,
  stopping at the trained model (what the search is meant to change): a setting reached
  there sizes the validation data, its batch or sequence length, or the evaluation (`left
  out: SEQ_LEN (sets the validation batch)`);
- a setting whose every use ends in output the metric never reads (a generated text sample,
  a print, a plot): searching it changes nothing measured.

And the limits the code asserts on a value a setting flows into (`assert seq_len <= 256` in
the function it is passed to, `assert SEQ_LEN < MAX`) bound its range. When the metric is not
computed in the script (printed by a module, or read by a pattern only), this reading cannot
decide, and init says so."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from loop.script.prints import own_nodes
from loop.script.source import Script

# methods and calls that mark the thing being trained (the search's object, not the ruler)
TRAINED_METHODS = {"fit", "train", "parameters", "named_parameters", "zero_grad",
                   "partial_fit", "load_state_dict", "state_dict", "fit_transform"}
TRAINING_CALLS = {"train", "fit", "compile"}
# calls whose arguments are output only: a text sample, a print, a log, a plot, a file
OUTPUT_CALL = re.compile(r"^(print|generate|sample|decode\w*|\w*_decode|log|info|debug|warning|"
                         r"write|save\w*|plot|imshow|show|savefig|add_scalar|add_text|"
                         r"set_description|set_postfix|pprint)$|(^|_)(generate|sample|print)",
                         re.I)
PASS_THROUGH = (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Slice, ast.Attribute, ast.Tuple,
                ast.List, ast.JoinedStr, ast.FormattedValue, ast.keyword, ast.Starred,
                ast.IfExp, ast.Compare, ast.BoolOp)
PURE_CALLS = {"int", "float", "round", "abs", "min", "max", "str", "format", "len", "sum"}


# names of the validation side: its data, loaders, splits and the function that evaluates
# (`value`, `device` are none of them)
VALIDATION = re.compile(r"(^|_)(val(?!ue)|valid|validation|test|eval|evaluate|evaluation|"
                        r"dev(?!ice)|holdout|estimate)", re.I)
# names that size data or an evaluation, or tune a metric (a threshold)
SIZING = re.compile(r"batch|seq|block|context|ctx|_len|len_|^len|eval|split|test|sample|"
                    r"thresh|cutoff|window|horizon", re.I)


# a validation-side name that holds a result, not data (`val_loss`, `test_acc`, `val`)
RESULT = re.compile(r"loss|acc|score|metric|bpb|ppl|perplexity|auc|f1|rmse|mae|mse|err|^val$|"
                    r"^valid$|^test$|^eval$", re.I)


def _validation_data(name: str) -> bool:
    """A name of the validation side's data or loader (`val_loader`, `X_test`, `data_val`),
    not of a result computed on it."""
    return bool(VALIDATION.search(name)) and not RESULT.search(name)


@dataclass
class Measurement:
    """What the metric's computation reads, each with whether it was reached through the
    validation side (a name such as val_loader, X_test, estimate_loss on the way)."""
    names: dict[str, bool] = field(default_factory=dict)     # module-level names it reaches
    chains: dict[str, bool] = field(default_factory=dict)    # attribute paths: args.bs, cfg.a.b
    nodes: dict[tuple[int, int], bool] = field(default_factory=dict)  # (line, col) it reads

    def reads(self, name: str, start: tuple[int, int] | None = None) -> bool | None:
        """Whether the metric's computation reads setting `name` (a module-level name, a
        flag's dest, a config key path) or, with `start`, the literal written there: None
        when it does not, else whether it was reached through the validation side."""
        found = [v for v in (self.nodes.get(start) if start else None, self.names.get(name),
                             *(v for c, v in self.chains.items()
                               if c == name or c.endswith("." + name)))
                 if v is not None]
        return any(found) if found else None

    def changes_measure(self, name: str, start: tuple[int, int] | None = None) -> bool:
        """A setting the metric's computation reads through the validation side, or whose
        name says it sizes data or the evaluation: it changes what the metric measures (a
        toy loss formula that reads a learning rate directly does not make it one)."""
        via = self.reads(name, start)
        return via is not None and (via or bool(SIZING.search(name.rpartition(".")[2])))


def reason(name: str, validation: bool = False) -> str:
    """Why a setting the metric reads is left out, in words from its name; `validation`:
    it was reached through the validation side."""
    leaf = name.rpartition(".")[2]
    if re.search(r"batch", leaf, re.I):
        return "sets the validation batch"
    if re.search(r"seq|block|context|ctx|len|bptt", leaf, re.I):
        return "sets the validation sequence length"
    if re.search(r"eval|iter|step|sample|size|split|frac|test|val", leaf, re.I):
        return "sets the evaluation's size"
    if validation:
        return "flows into the validation data or its evaluation"
    return "enters the metric's computation"


def metric_expr(src: Script, metric: str) -> ast.expr | None:
    """The expression the script prints as the metric (its first print), or None."""
    return next((v.expr for v in src.reported() if v.name == metric and v.expr is not None),
                None)


def trainer_evaluation(src: Script) -> ast.Call | None:
    """The Hugging Face `transformers.Trainer` (or `Seq2SeqTrainer`, ...) call the script
    makes with an `eval_dataset=` other than None: the Trainer evaluates on that data and
    prints each evaluation's dict (`{'eval_loss': 1.23}`), no print of the script's own."""
    trainers = {name for name, mod in src.imports_from().items()
                if mod.split(".")[0] == "transformers" and name.endswith("Trainer")}
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = func.id in trainers if isinstance(func, ast.Name) else isinstance(
            func, ast.Attribute) and func.attr.endswith("Trainer") and ast.unparse(
            func.value) == "transformers"
        evals = [k.value for k in node.keywords if k.arg == "eval_dataset"]
        if named and evals and not (isinstance(evals[0], ast.Constant)
                                    and evals[0].value is None):
            return node
    return None


def measured(src: Script, modules: list[Script], metric: str) -> Measurement | None:
    """The backward slice of the metric's print, or, for an `eval_*` metric a Trainer
    prints, of the `eval_dataset=` it evaluates on (all of it the validation side); None
    when the script computes no metric this reading can follow (it is printed elsewhere)."""
    expr = metric_expr(src, metric)
    if expr is not None:
        return _Slicer(src, modules).run(expr)
    through = _through_module(src, modules, metric)
    if through is not None:
        return through
    trainer = trainer_evaluation(src) if metric.startswith("eval_") else None
    if trainer is None:
        return None
    data = next(k.value for k in trainer.keywords if k.arg == "eval_dataset")
    return _Slicer(src, modules).run(data, validation=True)


def _through_module(src: Script, modules: list[Script], metric: str) -> Measurement | None:
    """A metric an imported module computes and prints in a function the script calls
    (a typer command's `train.train(batch_size=batch_size, ...)`): the module's slice, and
    what the script passes as each parameter of that function the slice reaches; None when
    no module computes it or the script calls none of its functions."""
    for module in modules:
        expr = metric_expr(module, metric)
        if expr is None:
            continue
        inner = _Slicer(module, modules).run(expr)
        outer = _Slicer(src, modules)
        # a parameter the module calls (`model(x)` in `evaluate(model, val)`) is the thing
        # evaluated, the search's object, not the ruler
        predictors = {n.func.id for f in ast.walk(module.tree)
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for n in ast.walk(f) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Name)
                      and n.func.id in {a.arg for a in (*f.args.posonlyargs, *f.args.args,
                                                        *f.args.kwonlyargs)}}
        called = False
        for func in module.tree.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [a.arg for a in (*func.args.posonlyargs, *func.args.args,
                                      *func.args.kwonlyargs)]
            reached = {p: inner.names[p] for p in params
                       if p in inner.names and p not in predictors}
            for node in ast.walk(src.tree):
                if not (isinstance(node, ast.Call) and _called(node) == func.name):
                    continue
                called = True
                for param, val in reached.items():
                    arg = next((k.value for k in node.keywords if k.arg == param), None)
                    index = params.index(param)
                    if arg is None and index < len(node.args):
                        arg = node.args[index]
                    if arg is not None:
                        outer.expr(arg, outer.scope_of(node), val)
        if called:
            return outer.out
    return None


class _Slicer:
    def __init__(self, src: Script, modules: list[Script]):
        self.src = src
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for script in [*modules, src]:
            for node in ast.walk(script.tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, node)
        self.parents = src.parents
        self.trained = _trained(src.tree)
        self.evaluating = _without_gradients(src.tree)
        self.out = Measurement()
        self.done: set[tuple[int, str, bool, int, int]] = set()
        self.entered: set[str] = set()

    def run(self, expr: ast.expr, validation: bool = False) -> Measurement:
        self.expr(expr, self._scope(expr), validation or id(expr) in self.evaluating)
        return self.out

    def scope_of(self, node: ast.AST) -> ast.AST:
        return self._scope(node)

    def _scope(self, node: ast.AST) -> ast.AST:
        """The function a node of the script is in (the module at module level)."""
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return self.src.tree

    def expr(self, expr: ast.AST, scope: ast.AST, val: bool) -> None:
        """Visit what `expr` reads; `val`: reached through the validation side."""
        for node in ast.walk(expr):
            if isinstance(node, (ast.expr, ast.stmt)):
                at = (node.lineno, node.col_offset)
                self.out.nodes[at] = self.out.nodes.get(at, False) or val
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                chain = _chain(node)
                if chain:
                    self.out.chains[chain] = self.out.chains.get(chain, False) or val
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.name(node.id, scope, getattr(node, "lineno", 0), val, node)
                # a local function passed rather than called (`data.map(tokenize_fn)`):
                # what it returns is what the call it is passed to makes of the data
                parent = self.parents.get(node)
                if node.id in self.functions and not _defs(scope, node.id) and not (
                        isinstance(parent, ast.Call) and parent.func is node):
                    self._enter(self.functions[node.id], node.id, val)
            if isinstance(node, ast.Call):
                called = _called(node)
                func = self.functions.get(called)
                on_trained = isinstance(node.func, ast.Attribute) and isinstance(
                    node.func.value, ast.Name) and node.func.value.id in self.trained
                # a method of the trained model (`model.init_hidden(bsz)`) is the model's
                # own code: its arguments are followed, not its body
                if func is not None and not on_trained:
                    self._enter(func, called, val)

    def _enter(self, func: ast.FunctionDef | ast.AsyncFunctionDef, called: str,
               val: bool) -> None:
        """Follow what a local function returns (once per side)."""
        key = f"{called}:{val}"
        if key in self.entered:
            return
        self.entered.add(key)
        inside = val or bool(VALIDATION.search(called)) \
            or any(_stops_gradients(d) for d in func.decorator_list)
        for ret in ast.walk(func):
            if isinstance(ret, ast.Return) and ret.value is not None:
                self.expr(ret.value, func, inside)
        if inside:
            self._evaluated_on(func)

    def name(self, name: str, scope: ast.AST, line: int, val: bool,
             use: ast.AST | None = None) -> None:
        """Follow what `name`, read at `line` (at `use`; None: the end of `scope`), is set
        from."""
        val = val or _validation_data(name)
        if name in self.trained:
            return
        defs = _defs(scope, name)
        # the settings a use at `line` sees: those made before it (`x = f(x)` reads the x
        # made before, not itself); each set of them is followed once
        before = [d for d in defs if d[0] < line] or defs
        # the last replacing setting that runs on every way to the use hides those before
        # it; one in a branch hides nothing (`if n > 0: data = f(...)` / `else: data = None`)
        last = max((i for i, d in enumerate(before)
                    if not d[2] and self._runs_before(d[3], use, scope)), default=0)
        if (id(scope), name, val, len(before), last) in self.done:
            return
        self.done.add((id(scope), name, val, len(before), last))
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args,
                                      *scope.args.kwonlyargs)]
            if name in params:
                if not self._call_sites(scope, params.index(name), name, val):
                    # called by none of the script's code, or by a call that leaves it at
                    # its default: an entry point whose parameters are the settings
                    # (`fire.Fire(train)`, a click or typer command, `train()`)
                    self.out.names[name] = self.out.names.get(name, False) or val
                return
            if not defs:              # a name of the enclosing function's, or a global
                self.name(name, self._scope(scope), 10 ** 9, val)
                return
        if scope is self.src.tree and defs:
            self.out.names[name] = self.out.names.get(name, False) or val
        for _, value, _, _ in before[last:]:
            if value is not None:
                self.expr(value, scope, val or id(value) in self.evaluating)

    def _block(self, stmt: ast.AST) -> int | None:
        """The statement list `stmt` is in (a body, an else branch), by id; None off the
        script's statements."""
        parent = self.parents.get(stmt)
        for part in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, part, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return id(block)
        return None

    def _runs_before(self, stmt: ast.AST, use: ast.AST | None, scope: ast.AST) -> bool:
        """Whether statement `stmt` runs on every way to `use` (the end of `scope` when
        None): it is in the block `use` is in or one that holds it (unknown: yes)."""
        block = self._block(stmt)
        if block is None:
            return True
        if use is None:
            return block == id(getattr(scope, "body", None))
        node: ast.AST | None = use
        while node is not None:
            if self._block(node) == block:
                return True
            node = self.parents.get(node)
        return False

    def _evaluated_on(self, func: ast.AST) -> None:
        """In a function that evaluates, the data the trained model is called on there is
        what the metric measures, whether the metric reads the call's result or state the
        call leaves (llama2.c's estimate_loss: `logits = model(X, Y)`, then `loss =
        raw_model.last_loss`)."""
        for node in own_nodes(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in self.trained:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    self.expr(arg, func, True)

    def _call_sites(self, func: ast.AST, index: int, param: str, val: bool) -> bool:
        """Follow the arguments passed as `param` where the script calls `func`; whether
        the script calls it, each time passing `param`."""
        name = getattr(func, "name", "")
        args = getattr(func, "args", None)
        method = bool(args and args.args and args.args[0].arg in ("self", "cls"))
        index -= method                              # `obj.f(a)` passes a as f's 2nd param
        called, passed = False, True
        for node in ast.walk(self.src.tree):
            # a function by its name (`train(...)`, not `model.train()`), a method on an object
            if isinstance(node, ast.Call) and _called(node) == name \
                    and isinstance(node.func, ast.Attribute) == method:
                called = True
                arg = next((k.value for k in node.keywords if k.arg == param), None)
                if arg is None and 0 <= index < len(node.args):
                    arg = node.args[index]
                if arg is not None:
                    self.expr(arg, self._scope(node), val)
                elif not any(isinstance(a, ast.Starred) for a in node.args) \
                        and not any(k.arg is None for k in node.keywords):
                    passed = False                      # left at its default there
        return called and passed


def _defs(scope: ast.AST, name: str) -> list[tuple[int, ast.AST | None, bool, ast.AST]]:
    """(line, the value it is set from, whether it updates rather than replaces, the
    statement) for each
    place `scope` (its own body, not nested functions) sets `name`, in line order; an
    assignment's line is its last, so the names its value reads are those set before."""
    out: list[tuple[int, ast.AST | None, bool, ast.AST]] = []
    for node in own_nodes(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for part, value in _pairs(t, node.value):      # `a, b = x, y`: a from x
                    if name in _stored(part):
                        out.append((_end(node), value, isinstance(part, ast.Subscript),
                                    node))
        elif isinstance(node, ast.AugAssign) and name in _stored(node.target):
            out.append((_end(node), node.value, True, node))
        elif isinstance(node, ast.Expr) and _grown(node, name):   # `results.append(x)`:
            out.append((_end(node), _grown(node, name), True, node))  # results holds x now
        elif isinstance(node, (ast.For, ast.AsyncFor)) and name in _stored(node.target):
            out.append((node.lineno, node.iter, False, node))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None and name in _stored(item.optional_vars):
                    out.append((node.lineno, item.context_expr, False, node))
        elif isinstance(node, ast.comprehension) and name in _stored(node.target):
            out.append((getattr(node.iter, "lineno", 0), node.iter, False, node))
    return sorted(out, key=lambda d: d[0])


GROWS = {"append", "extend", "add", "appendleft"}


def _grown(node: ast.Expr, name: str) -> ast.expr | None:
    """The value the statement `node` puts into the collection `name` holds, if it does:
    `name.append(x)`, `name.extend(xs)`, `name.add(x)`."""
    call = node.value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
            and call.func.attr in GROWS and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == name and len(call.args) == 1 and not call.keywords:
        return call.args[0]
    return None


def _end(node: ast.stmt) -> int:
    """The line an assignment takes effect after (its last)."""
    return node.end_lineno or node.lineno


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """An assignment's target parts with the values they get, element by element where a
    tuple is unpacked from a tuple of the same length."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts) \
            and not any(isinstance(e, ast.Starred) for e in target.elts):
        return [p for t, v in zip(target.elts, value.elts) for p in _pairs(t, v)]
    return [(target, value)]


def _stored(target: ast.AST) -> set[str]:
    """The names an assignment target sets (`x`, `x, y`, `x[i]` updates x)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_stored(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return {target.value.id}
    if isinstance(target, ast.Starred):
        return _stored(target.value)
    return set()


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _chain(node: ast.AST) -> str:
    """`cfg.training.lr`, `cfg["optim"]["lr"]` -> `cfg.training.lr`, `cfg.optim.lr`."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            parts.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Name):
            return ".".join([node.id, *reversed(parts)]) if parts else ""
        else:
            return ""


GRADIENT_FREE = {"no_grad", "inference_mode"}


def _stops_gradients(expr: ast.expr) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()` (called or not, as a decorator)."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    name = expr.attr if isinstance(expr, ast.Attribute) else \
        expr.id if isinstance(expr, ast.Name) else ""
    return name in GRADIENT_FREE


def _without_gradients(tree: ast.Module) -> set[int]:
    """ids of the nodes computed without gradients: in a `with torch.no_grad():` block or a
    function decorated `@torch.no_grad()`. The model is evaluated there, not trained: a
    setting the metric reads there is on the validation side (`valid_loss += loss.item() /
    SEGMENTS` averages over SEGMENTS segments, whatever the data is named)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        regions: list[ast.AST] = []
        if isinstance(node, (ast.With, ast.AsyncWith)) \
                and any(_stops_gradients(i.context_expr) for i in node.items):
            regions = list(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and any(_stops_gradients(d) for d in node.decorator_list):
            regions = list(node.body)
        out |= {id(n) for r in regions for n in ast.walk(r)}
    return out


def _trained(tree: ast.Module) -> set[str]:
    """Names of the things trained: `model.parameters()`, `clf.fit(...)`, `bst =
    lgb.train(...)`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in TRAINED_METHODS and isinstance(node.func.value, ast.Name):
            out.add(node.func.value.id)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _called(node.value) in TRAINING_CALLS:
            out |= set().union(*(_stored(t) for t in node.targets))
    return out


# -- output only ---------------------------------------------------------------------------------
def output_only(src: Script, names: set[str], metric_expr: ast.expr | None) -> set[str]:
    """Those of `names` whose every use ends in output the metric never reads: a print, a
    generated sample, a log, a plot (through arithmetic, slicing and variables whose every
    use does too). A use it does not understand is a real one; an unused name is not
    output-only (nothing is known of it)."""
    metric_nodes = {id(n) for n in ast.walk(metric_expr)       # (ctx objects are shared)
                    if not isinstance(n, ast.expr_context)} if metric_expr is not None else set()

    def only(name: str, seen: frozenset) -> bool:
        uses = src.loads.get(name, [])
        return bool(uses) and all(_ends_in_output(u, src.parents, metric_nodes,
                                                  lambda t: t in seen or only(t, seen | {t}))
                                  for u in uses)
    return {n for n in names if only(n, frozenset({n}))}


def output_only_keywords(src: Script, literal_at: dict[str, tuple[int, int]]) -> set[str]:
    """Those of the keyword-argument settings `literal_at` (name -> where its literal is) that
    are passed to an output call whose result is dropped: `print_samples(num=50)` or
    `plot(width=3)` as a statement, a sample printed and nothing returned to the metric."""
    output: set[tuple[int, int]] = set()
    for node in ast.walk(src.tree):
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and OUTPUT_CALL.search(_called(call)) \
                and not _is_math(call):
            output |= {(n.lineno, n.col_offset) for k in call.keywords
                       for n in ast.walk(k.value) if isinstance(n, ast.expr)}
    return {name for name, at in literal_at.items() if at in output}


def _ends_in_output(use: ast.AST, parents: dict, metric_nodes: set, target_only) -> bool:
    node = use
    while True:
        if id(node) in metric_nodes:
            return False
        parent = parents.get(node)
        if parent is None:
            return False
        if isinstance(parent, ast.Call) and node is not parent.func:
            called = _called(parent)
            if OUTPUT_CALL.search(called) and not _is_math(parent):
                return not any(id(n) in metric_nodes for n in ast.walk(parent))
            if called not in PURE_CALLS:
                return False
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                return False
            return all(target_only(t.id) for t in targets if isinstance(t, ast.Name))
        elif isinstance(parent, ast.Call) or not isinstance(parent, PASS_THROUGH):
            return False
        node = parent


MATH_MODULES = {"math", "np", "numpy", "torch", "jnp", "F", "tf", "cmath", "scipy"}


def _is_math(call: ast.Call) -> bool:
    """`math.log(x)`, `np.log(x)`: arithmetic, not a log line."""
    f = call.func
    return _called(call) == "log" and not (isinstance(f, ast.Attribute) and isinstance(
        f.value, ast.Name) and f.value.id not in MATH_MODULES)


# -- limits the code asserts ---------------------------------------------------------------------
_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


def asserted_limits(src: Script, modules: list[Script], names: set[str],
                    known: dict[str, object]) -> dict[str, list[tuple[str, float]]]:
    """{setting: [(op, bound)]} for the asserts that bound a value a setting flows into:
    `assert SEQ_LEN <= 256` at module level, or `assert seq_len <= MAX` in a function the
    script calls with the setting (`Model(seq_len=SEQ_LEN)`, positional too; a class's
    __init__). op is one of <, <=, >, >=; bound a number (a literal, or a name `known` or
    the script's own literals give)."""
    values = {**known, **src.literals()}
    receivers: dict[tuple[str, str], set[str]] = {}     # (function, param) -> settings
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for script in [*modules, src]:
        for node in ast.walk(script.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, node)
            if isinstance(node, ast.ClassDef):
                init = next((b for b in node.body if isinstance(b, ast.FunctionDef)
                             and b.name == "__init__"), None)
                if init is not None:
                    functions.setdefault(node.name, init)
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call) or _called(node) not in functions:
            continue
        func = functions[_called(node)]
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if params and params[0] == "self":
            params = params[1:]
        pairs = list(zip(params, node.args)) + [(k.arg, k.value) for k in node.keywords
                                                 if k.arg]
        for param, arg in pairs:
            if isinstance(arg, ast.Name) and arg.id in names:
                receivers.setdefault((func.name, param), set()).add(arg.id)
    out: dict[str, list[tuple[str, float]]] = {}

    def bound(expr: ast.expr):
        if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) \
                and not isinstance(expr.value, bool):
            return float(expr.value)
        if isinstance(expr, ast.Name) and isinstance(values.get(expr.id), (int, float)):
            return float(values[expr.id])  # type: ignore[arg-type]
        return None
    scopes: list[ast.AST] = [src.tree, *functions.values()]   # module level: the script's
    for scope in scopes:
        for node in own_nodes(scope):
            if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
                    and len(node.test.ops) == 1 and type(node.test.ops[0]) in _FLIP):
                continue
            left, op = node.test.left, type(node.test.ops[0])
            right = node.test.comparators[0]
            for side, limit, kind in ((left, right, op), (right, left, _FLIP[op])):
                b = bound(limit)
                if b is None or not isinstance(side, (ast.Name, ast.Attribute)):
                    continue
                ident = side.id if isinstance(side, ast.Name) else side.attr
                tied = ({ident} & names if scope is src.tree else set()) | \
                    receivers.get((getattr(scope, "name", ""), ident), set())
                for setting in tied:
                    text = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}[kind]
                    if (text, b) not in out.get(setting, []):
                        out.setdefault(setting, []).append((text, b))
    return out
