"""What a training script says about itself, read with `ast` (nothing is run): the
`name: value` lines it prints, its module-level literals, the names it imports from local
modules, which UPPER_CASE constants only feed prints (display-only), and the asserts over its
constants written as conditions a search space can check. `autoresearch init` reads a
repo through it; what a script prints is read by loop/script/prints.py, which it calls."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from loop.untrusted import evaluate
from loop.script.prints import Value, call_values, is_print, print_context, table_values

# calls a value may pass through and still only be shown (`round(x, 2)`, `f"{int(x)}"`)
PURE_CALLS = {"int", "float", "round", "abs", "min", "max", "str", "format", "sum", "len"}


@dataclass
class Script:
    """One parsed Python file."""
    path: str
    source: str
    tree: ast.Module = field(init=False)

    def __post_init__(self):
        self.tree = ast.parse(self.source, filename=self.path)

    # -- its tree, walked once ----------------------------------------------------------------
    @cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Each node's parent in the tree (the module has none)."""
        return {child: node for node in ast.walk(self.tree)
                for child in ast.iter_child_nodes(node)}

    @cached_property
    def loads(self) -> dict[str, list[ast.Name]]:
        """Every read of each name (`ast.Name` in a Load context), in walk order."""
        out: dict[str, list[ast.Name]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                out.setdefault(node.id, []).append(node)
        return out

    # -- what it prints ---------------------------------------------------------------------
    def printed(self) -> list[tuple[str, ast.expr | None]]:
        """(name, the expression printed after it) for each `print(f"name: {expr}")` or
        `print("name:", expr)` of a number, in source order, each name once."""
        return [(v.name, v.expr) for v in self.reported() if v.line_start]

    def reported(self) -> list[Value]:
        """Every number its prints show after a label (log lines too), or under a table's
        header (a column of its rows), in source order, each name once (its first print)."""
        out: dict[str, Value] = {}
        loops = print_context(self.tree)
        for node in ast.walk(self.tree):
            for value in call_values(node, loops):
                out.setdefault(value.name, value)
        for value in table_values(self.tree):
            out.setdefault(value.name, value)
        return sorted(out.values(), key=lambda v: _line(v.expr))

    def lines(self) -> list[str]:
        """Every line its prints and log calls show a labelled number in, and each table's
        header and a row, rendered with a distinct sample per number: what a metric
        pattern is checked against."""
        loops = print_context(self.tree)
        return list(dict.fromkeys([*(v.line for node in ast.walk(self.tree)
                                     for v in call_values(node, loops)),
                                   *(v.line for v in table_values(self.tree))]))

    # -- what it defines and imports --------------------------------------------------------
    def assigns(self) -> dict[str, ast.expr]:
        """Module-level `name = expr` (the last one wins, as when the module runs)."""
        out = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                out[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.value is not None:
                out[node.target.id] = node.value
        return out

    def literals(self) -> dict[str, object]:
        """Module-level names bound to a number or string literal (or arithmetic of them)."""
        out: dict[str, object] = {}
        for name, expr in self.assigns().items():
            value = literal(expr, out)
            if value is not None:
                out[name] = value
        return out

    def imports_from(self) -> dict[str, str]:
        """{name: module} for `from module import name` (any level of the file)."""
        out = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    out[alias.asname or alias.name] = node.module
        return out

    def imported_modules(self) -> set[str]:
        """Every absolute module it imports (`import model`, `from prepare import x`)."""
        out = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module)
            elif isinstance(node, ast.Import):
                out |= {alias.name for alias in node.names}
        return out

    def defines(self, name: str) -> bool:
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                   for n in self.tree.body)

    def calls(self, func: str) -> list[ast.Call]:
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id == func]

    def assigned_from(self, call: ast.Call) -> str | None:
        """The name a call's result is assigned to (`val_bpb = evaluate_bpb(...)`)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                return node.targets[0].id
        return None

    def mentions(self, text: str) -> bool:
        return text in self.source

    # -- which constants matter -------------------------------------------------------------
    def display_only(self, names, metric: str = "") -> set[str]:
        """Those of `names` whose every use ends in a print other than the `metric` line:
        read only to be shown (an MFU figure from a peak-FLOPs constant), so changing them
        changes no result. Unused names count as display-only too. Conservative: a use it
        does not understand is a real use."""
        def shown(name: str, seen: frozenset) -> bool:
            return all(_use_shown(use, self.parents,
                                  lambda t: t in seen or shown(t, seen | {t}), metric)
                       for use in self.loads.get(name, []))
        return {n for n in names if shown(n, frozenset({n}))}

    def conditions(self, constants: set[str], known: dict[str, object]) -> list[str]:
        """The asserts that read only the editable `constants` once module-level variables
        are expanded and `known` names (a protected module's literals) put in as numbers:
        `assert TOTAL_BATCH_SIZE % tokens_per_fwdbwd == 0` with `tokens_per_fwdbwd =
        DEVICE_BATCH_SIZE * MAX_SEQ_LEN` -> `TOTAL_BATCH_SIZE % (DEVICE_BATCH_SIZE * 2048) ==
        0`. Asserts over anything else (attributes, locals, calls) are left out."""
        assigns = self.assigns()
        out = []
        for node in self.tree.body:           # module level: what runs with the constants
            if isinstance(node, ast.Assert):
                text = _expand(node.test, constants, known, assigns, set())
                if text and any(c in text for c in constants) and text not in out:
                    out.append(text)
        return out


def _line(node) -> int:
    return getattr(node, "lineno", 0)


def _use_shown(use: ast.AST, parents: dict, target_shown, metric: str) -> bool:
    """Does this one read of a name end in a print (directly, through arithmetic and
    formatting, or through variables whose every use does)?"""
    node = use
    while True:
        parent = parents.get(node)
        if parent is None:
            return False
        if is_print(parent) and node is not parent.func:
            # a print showing the metric anywhere (a log line, a sentence) is a real use
            return not metric or metric not in {v.name for v in call_values(parent)}
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            names = []
            for t in targets:
                elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                if not all(isinstance(e, ast.Name) for e in elts):
                    return False             # into an attribute or an item: a real use
                names += [e.id for e in elts if isinstance(e, ast.Name)]
            return all(target_shown(n) for n in names)
        if isinstance(parent, ast.Call):
            if not (isinstance(parent.func, ast.Name) and parent.func.id in PURE_CALLS):
                return False
        elif isinstance(parent, ast.keyword):
            if not is_print(parents.get(parent)):
                return False
        elif not isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.IfExp, ast.BoolOp,
                                     ast.Compare, ast.JoinedStr, ast.FormattedValue,
                                     ast.Tuple, ast.List)):
            return False
        node = parent


def literal(expr: ast.expr, known: dict[str, object]):
    """The value of a literal, or of arithmetic over literals and `known` names; else None."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float, str)) \
            and not isinstance(expr.value, bool):
        return expr.value
    try:
        value = evaluate(ast.unparse(expr), {k: v for k, v in known.items()
                                             if isinstance(v, (int, float))})
    except (ValueError, SyntaxError, ZeroDivisionError, OverflowError, TypeError):
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _expand(expr: ast.expr, constants: set[str], known: dict, assigns: dict,
            busy: set) -> str | None:
    """`expr` as text over `constants` only, or None when it reads anything else."""
    class Sub(ast.NodeTransformer):
        ok = True

        def visit_Name(self, node):
            if node.id in constants:
                return node
            if node.id in known and isinstance(known[node.id], (int, float)):
                return ast.copy_location(ast.Constant(known[node.id]), node)
            if node.id in assigns and node.id not in busy:
                inner = _expand(assigns[node.id], constants, known, assigns, busy | {node.id})
                if inner is not None:
                    return ast.parse(inner, mode="eval").body
            self.ok = False
            return node

        def generic_visit(self, node):
            if not isinstance(node, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp,
                                     ast.Compare, ast.BoolOp, ast.expr_context, ast.operator,
                                     ast.unaryop, ast.cmpop, ast.boolop)):
                self.ok = False
                return node
            return super().generic_visit(node)
    sub = Sub()
    out = sub.visit(ast.parse(ast.unparse(expr), mode="eval").body)
    return ast.unparse(out) if sub.ok else None
