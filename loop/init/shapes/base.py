"""The interface of a repo shape `autoresearch init` reads (loop/init/shapes/__init__.py
holds the table of shapes): what init read of the repo (`Scan`), a metric a shape can grade
(`Candidate`), the shape itself (`Shape`: its candidates and how it fills in the plan), and
the metric patterns the shapes share. Imports no shape."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from loop.script.source import Script
from loop.script.periodic import prints_in_loop
from loop.script.prints import (SPLIT_WORDS, Column, Value, call_values, name_words,
                                print_context)


@dataclass
class Scan:
    """What init read of the repo: the script and the local modules it imports."""
    root: Path
    script: Script
    modules: dict[str, Script] = field(default_factory=dict)    # module name -> its code
    known: dict[str, object] = field(default_factory=dict)      # the modules' literals

    def module_file(self, mod: str) -> str:
        return self.modules[mod].path if mod in self.modules else f"{mod.replace('.', '/')}.py"


@dataclass
class Candidate:
    """A metric a shape can grade."""
    name: str
    shape: str
    source: str                  # who prints it, in words
    pattern: str = ""            # metric.pattern ("": the default `name: value` line)
    sure: bool = True            # a number for certain (a numeric format, arithmetic)
    data: Any = None             # the shape's own (lm: the evaluation call)
    problem: str = ""            # why its pattern would not read exactly it ("": it does)
    report: bool = False         # said in a sentence, outside any loop: the script's result
    file: str = ""               # the file whose print shows it ("": the script's)
    opaque: str = ""             # printed as is, an attribute the code never sets (`model.
    #                              best_score`): what it holds (a number, a dict) is unknown
    fix: str = ""                # with `problem`: what to change so that it can be read
    selects: str = ""            # what of the repo keeps its best model by it, in words
    #                              (`ModelCheckpoint(monitor=...)`): the repo's own objective


@dataclass(frozen=True)
class Shape:
    key: str
    words: str                   # the shape, as init prints it
    candidates: Callable[[Scan], list[Candidate]]
    apply: Callable[..., None]   # (plan, scan, candidate)


def pattern_for(value: Value, others: list[Value] | tuple = ()) -> str:
    r"""`metric.pattern` for a value: "" for a `name: value` line (the task's default reads
    it), else a regex for its label inside the line that matches no more than it names:
    `valid loss 7.28` -> `(?<![\w./-])valid\s+loss\s*[:=]?\s*(NUMBER)` (a sentence's
    words after it too: `RMSE\s+of\s+prediction\s+is\s*[:=]?\s*(NUMBER)`). The label must
    not follow a word, a dot, `/` or `-` (`loss` never reads `train_loss` nor `val/loss`);
    a label without a split word must not follow one (`loss` never reads `train loss` or
    `test loss`), nor any word that another label of the script puts before it (`val loss`
    never reads `best val loss`)."""
    if value.default_line:
        return ""
    from loop.setup.metric import NUMBER
    if value.column is not None:     # a table's cell: the row's cells counted, blanks too
        return column_pattern(value.column)
    if value.quoted:             # a printed dict's key: `{'eval_acc': 0.81, 'epoch': 1.0}`
        return rf"['\"]{re.escape(value.label)}['\"]\s*:\s*{NUMBER}"
    words = [w.lower() for w in value.label.split()]
    before = {o.label.split()[-len(words) - 1].lower() for o in others
              if [w.lower() for w in o.label.split()[-len(words):]] == words
              and len(o.label.split()) > len(words)}
    if not set(name_words(value.label)) & set(SPLIT_WORDS):
        before |= set(SPLIT_WORDS)
    by_length: dict[int, list[str]] = {}
    for w in sorted(before):
        by_length.setdefault(len(w), []).append(re.escape(w))
    guards = "".join(f"(?<!{alts[0]} )" if len(alts) == 1 else f"(?<!(?:{'|'.join(alts)}) )"
                     for _, alts in sorted(by_length.items()))
    body = r"\s+".join(re.escape(w) for w in (value.label + " " + value.gap).split())
    if value.ratio:              # `final score: 40/50 = 80.00%`: the number after the `=`
        body += r"\s*[:=]?\s*[-+]?\d+(?:\.\d*)?\s*/\s*[-+]?\d+(?:\.\d*)?\s*="
    return rf"(?<![\w./-]){guards}{body}\s*[:=]?\s*{NUMBER}"


def column_pattern(column: Column) -> str:
    r"""The regex that reads cell `column.index` of a row of `column.count` `|`-separated
    cells, when it holds a number: `|  3  |  0.51  |        |` matches for its second cell,
    never for the blank third (the reader then keeps the last row where it is filled), nor
    a row of another table (its cells counted) or the header (names, not numbers)."""
    from loop.setup.metric import NUMBER
    cell = r"[^|\n]*"
    before = rf"(?:{cell}\|){{{column.index}}}"
    after = rf"(?:\|{cell}){{{column.count - column.index - 1}}}"
    if column.edges:
        return rf"^[ \t]*\|{before}[ \t]*{NUMBER}[ \t]*{after}\|[ \t]*$"
    return rf"^[ \t]*{before}[ \t]*{NUMBER}[ \t]*{after}[ \t]*$"


def pattern_problem(value: Value, pattern: str, lines: list[str],
                    twice: set[str] | frozenset = frozenset()) -> str:
    """Why `pattern` does not read exactly this value from the lines the script prints
    (each rendered with a distinct sample number per value), or "". `twice`: the samples
    of other prints of the same value, which it may read too."""
    if value.split_from:
        return (f"its split is printed from `{value.split_from}`, known only when the "
                f"script runs")
    if not pattern or not value.line:
        return ""
    got = re.findall(pattern, "\n".join(lines), re.M | re.I)
    if value.sample in got and set(got) <= {value.sample, *twice}:
        return ""
    if value.sample not in got:
        return f"it would not read the line `{value.line}`"
    return f"it would read {len(got)} numbers of the lines printed, not one"


def from_values(src: Script, shape: str, source: str) -> list[Candidate]:
    values = src.reported()
    lines = src.lines()
    shown = _shown(src)
    set_attrs = {t.attr for node in ast.walk(src.tree) if isinstance(node, (ast.Assign,
                 ast.AugAssign, ast.AnnAssign))
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(t, ast.Attribute)}
    out = []
    for v in values:
        pattern = pattern_for(v, values)
        call = shown[v.sample][0] if v.sample in shown else None
        report = bool(v.gap) and call is not None and not prints_in_loop(
            src, lambda node, call=call: node is call)
        out.append(Candidate(v.name, shape, source, pattern, v.sure,
                             problem=pattern_problem(v, pattern, lines, _twice(v, shown)),
                             report=report, file=src.path,
                             opaque=_opaque(v, set_attrs)))
    return out


def _opaque(value: Value, set_attrs: set[str]) -> str:
    """`model.best_score` printed as is (no numeric format, no arithmetic), an attribute no
    code of the script sets: a library object's, which may hold a number or a dict of
    splits (LightGBM's `best_score` is {'valid': {'l2': ...}}); "" for anything else."""
    expr = value.expr
    if value.sure or not isinstance(expr, ast.Attribute) or expr.attr in set_attrs:
        return ""
    return ast.unparse(expr)


def _shown(src: Script) -> dict[str, tuple[ast.AST, str]]:
    """{a value's sample: the print or logging call that shows it, the expression shown}."""
    loops = print_context(src.tree)
    return {v.sample: (node, ast.unparse(v.expr)) for node in ast.walk(src.tree)
            for v in call_values(node, loops)}


def _twice(value: Value, shown: dict[str, tuple[ast.AST, str]]) -> set[str]:
    """The samples of the other prints of the very expression `value` shows (`test_loss`
    on the step line, then in `test loss {test_loss} is the best so far`): one value
    printed twice, so a pattern that reads them all reads that number. Another line of the
    same print (a loop's `train` and `val`) is another value."""
    if value.sample not in shown:
        return set()
    call, text = shown[value.sample]
    return {sample for sample, (node, expr) in shown.items() if node is not call and expr == text}
