"""The boundary with untrusted input: text, numbers and paths that a proposer's reply or a
run's output gave, made safe before the engine keeps them anywhere.

  * `clean(text)`: what may reach a record (the terminal, results.tsv, a commit message,
    the journal, MLflow, the report, the next prompt). NUL is removed; every other control
    character (C0, DEL, C1, the bidirectional overrides that reorder what a terminal shows)
    is written out visibly as `\\x1b` / `\\u202e`, as is a lone surrogate (which no UTF-8
    file, git argument or MLflow request can hold); the size is capped with a marker that
    says how much was cut. `one_line` also folds every line break and tab into one space.
  * `parse_number(text)`: a number as a model writes it (`8`, `3e-4`, `1_000`, `2**19`),
    read, never evaluated: a power is computed only after its size is known to fit a float.
  * `evaluate(expr, values)`: arithmetic and comparisons over named numbers (task.yaml's
    `requires`, a script's assert, a constant computed from literals), read with `ast`,
    never eval()'d; a power is bounded as in `parse_number`.
  * `canonical_path(rel)`: an edit's path in its one spelling (`././a.py` is `a.py`), or
    ValueError when no edit may name it (absolute, `..`, `.git`, `__pycache__`, ...).

Every error is a ValueError with a one-line reason, worded to be sent back to the model.
Imports no loop module (the engine, the edit formats and the setup code all use it); it
decides nothing about what is editable, only what is well-formed."""
from __future__ import annotations

import ast
import math
import re

DESCRIPTION_MAX = 1000    # a proposal's description (its commit subject): mutate and tune
                          # list every constant they set, an LLM's is cut at 120 before this
REASON_MAX = 2000         # a one-line reason (why an edit failed, why a run crashed)
TEXT_MAX = 20_000         # a multi-line text (a log's tail in the next prompt)

# the characters a log line may hold as they are; anything else below U+00A0 that is not
# printable ASCII is a control character
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}\\ud800-\\udfff]")
_BREAKS = re.compile(r"[\s\u2028\u2029\x85]+")
_MARKER = "… [{} more characters]"


def _visible(m: re.Match) -> str:
    ch = m.group(0)
    if ch == "\x00":
        return ""
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def clean(text: object, limit: int = TEXT_MAX, lines: bool = True) -> str:
    """`text` as it may be recorded: no NUL, other control characters (and lone surrogates)
    escaped, at most `limit` characters plus the marker. `lines`: keep line breaks (`\\r\\n`
    and a lone `\\r` become `\\n`) and tabs; else fold all whitespace into single spaces."""
    text = text if isinstance(text, str) else str(text)
    if lines:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        text = _CONTROL.sub(_visible, text.replace("\u2028", "\n").replace("\u2029", "\n"))
    else:
        text = _CONTROL.sub(_visible, _BREAKS.sub(" ", text).strip())
    return cap(text, limit)


def one_line(text: object, limit: int = REASON_MAX) -> str:
    """`clean` for a field that is one line: a description, a reason, a tag."""
    return clean(text, limit, lines=False)


def cap(text: str, limit: int) -> str:
    """At most `limit` characters, then a marker saying how many more there were."""
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + _MARKER.format(len(text) - limit)


# -- numbers ---------------------------------------------------------------------------------

NUMBER_CHARS_MAX = 100       # longer than any constant a training script writes
POWER_EXPONENT_MAX = 1024    # 2**1024 is already beyond a float
_FLOAT_LOG2_MAX = 1024       # log2 of the largest float, rounded up
_LITERAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")


def parse_number(text: object) -> float:
    """A number's source text -> its value, or ValueError (one line) when it is not a
    finite number written as a literal or as `a**b` with integers (`2**19`)."""
    raw = text if isinstance(text, str) else str(text)
    shown = one_line(raw, 40)
    if len(raw) > NUMBER_CHARS_MAX:
        raise ValueError(f"{shown} is longer than {NUMBER_CHARS_MAX} characters")
    body = raw.strip()
    if "_" in body:       # `1_000`: Python's digit groups, between digits only
        if re.search(r"(?<!\d)_|_(?!\d)", body):
            raise ValueError(f"{shown}: `_` may only stand between digits")
        body = body.replace("_", "")
    if "**" in body:
        base, _, exp = (part.strip() for part in body.partition("**"))
        if not (_INTEGER.fullmatch(base) and _INTEGER.fullmatch(exp)):
            raise ValueError(f"{shown}: a power is read only as integer**integer (e.g. 2**19)")
        sign = -1 if base.startswith("-") else 1     # -2**2 is -(2**2), as in Python
        return float(sign * bounded_power(abs(int(base)), int(exp), shown))
    if not _LITERAL.fullmatch(body):
        raise ValueError(f"{shown} is not a number literal (e.g. 8, 0.003, 3e-4)")
    value = float(body)
    if not math.isfinite(value):
        raise ValueError(f"{shown} is beyond the range of a float (about 1.8e308)")
    return value


def bounded_power(base: float, exp: float, shown: str = "") -> float:
    """base ** exp (an int for int ** int >= 0), computed only when the result fits a
    float (checked first, from exp * log2|base|); ValueError otherwise, or when it is not a
    real number. `shown`: the power as written, for the message."""
    if isinstance(base, bool) or isinstance(exp, bool) \
            or not all(isinstance(v, (int, float)) for v in (base, exp)):
        raise ValueError("a power of something other than numbers")
    if not (math.isfinite(base) and math.isfinite(exp)):
        raise ValueError("a power of a number that is not finite")
    shown = shown or f"{base:.6g}**{exp:.6g}"
    if base == 0:
        if exp < 0:
            raise ValueError(f"{shown}: zero to a negative power")
        return 1.0 if exp == 0 else 0.0
    if base < 0 and exp != int(exp):
        raise ValueError(f"{shown}: a negative number to a fractional power is not real")
    if abs(base) != 1 and exp * math.log2(abs(base)) >= _FLOAT_LOG2_MAX:
        raise ValueError(f"{shown} is beyond the range of a float (about 1.8e308)")
    if abs(exp) > POWER_EXPONENT_MAX:   # 1**10**9, 0.5**10**9: a tiny result, a long loop
        if abs(base) != 1:
            return 0.0
        return float(base) ** (exp % 2) if base < 0 else 1.0
    try:
        if isinstance(base, int) and isinstance(exp, int) and exp >= 0:
            float(base ** exp)             # raises when it rounds past the largest float
            return base ** exp             # exact (an int stays one), at most 1024 bits
        return float(base) ** float(exp)
    except OverflowError:                  # within a rounding of the largest float
        raise ValueError(f"{shown} is beyond the range of a float (about 1.8e308)") from None


def _short(v: float) -> str:
    return f"{v:.6g}"


# -- arithmetic ------------------------------------------------------------------------------
# a condition over constants (task.yaml's `requires`, a script's assert) or a module-level
# value computed from literals: arithmetic only, evaluated without eval()
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: bounded_power}
_CMPS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
         ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
         ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def names_in(expr: str) -> list[str]:
    """The constant names an expression reads (SyntaxError when it is no expression)."""
    return sorted({n.id for n in ast.walk(ast.parse(expr, mode="eval"))
                   if isinstance(n, ast.Name)})


def evaluate(expr: str, values: dict[str, float]):
    """The value of an arithmetic expression or comparison over `values`; ValueError for
    anything else (calls, attributes, unknown names)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and _finite(node.value):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"unknown name {node.id}")
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.Compare) and all(type(o) in _CMPS for o in node.ops):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if not _CMPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        raise ValueError(f"unsupported {type(node).__name__}")
    return ev(ast.parse(expr, mode="eval"))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- paths -----------------------------------------------------------------------------------

# never an edit's, whatever the task says: git's own folder, Python's byte code, the engine's
# state (compared case-folded: a filesystem that folds case opens `.GIT` as `.git`)
FORBIDDEN_PARTS = (".git", "__pycache__", ".autoresearch")


def canonical_path(rel: object) -> str:
    """An edit's path relative to the task folder in its one spelling: `/`-separated, no
    empty or `.` segment (`././a.py` -> `a.py`). ValueError (one line, naming the path as
    cleaned) for a path outside the task folder or one no edit may write."""
    raw = rel if isinstance(rel, str) else str(rel)
    shown = one_line(raw, 200)
    if not raw.strip():
        raise ValueError("an empty file path")
    if _CONTROL.search(raw) or "\n" in raw or "\r" in raw or "\t" in raw:
        raise ValueError(f"{shown}: a file path with control characters")
    if "\\" in raw:
        raise ValueError(f"{shown}: write paths with `/`, not `\\`")
    if raw.startswith(("/", "~")) or re.match(r"[A-Za-z]:", raw):
        raise ValueError(f"{shown}: outside the task folder (an absolute path)")
    parts = [p for p in raw.strip().split("/") if p not in ("", ".")]
    if any(p != p.strip() for p in parts):
        raise ValueError(f"{shown}: a file or folder name that starts or ends with a space")
    if not parts:
        raise ValueError(f"{shown}: names a folder, not a file")
    if ".." in parts:
        raise ValueError(f"{shown}: outside the task folder (`..`)")
    for part in parts:
        if part.rstrip(". ").casefold() in FORBIDDEN_PARTS:   # `.git.`: Windows' `.git`
            raise ValueError(f"{shown}: inside {part}/, which no edit may write")
    return "/".join(parts)
