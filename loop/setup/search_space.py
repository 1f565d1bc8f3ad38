"""Which values of a task's numeric constants can run: the `search_space:` a task.yaml
declares, and what the code itself says when it declares none (`assert A % B == 0`, betas
in (0, 1), probabilities in [0, 1]). Pure: the offline proposer asks it before it proposes,
`load_task` validates a declared space with it. Runs nothing.

Two additions for repos whose constants are written as powers (`TOTAL_BATCH_SIZE = 2**19`):
such a constant is a constant here too (`POWER`), and `pow2: [lo, hi]` declares one whose
values are 2**lo .. 2**hi. `requires: ["A % (B * 2048) == 0"]` carries a condition the code
asserts (what `autoresearch init` reads from an `assert`) as an arithmetic expression over the
constants; a point that fails it is not proposed."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from loop.edits.constant_lines import CONSTANT
from loop.script import settings
from loop.untrusted import evaluate, names_in, parse_number

# `learning_rate = 6e-4`: a module-level setting of any case (nanoGPT's style); a constant of
# the search space only when task.yaml's `search_space` names it
SETTING = re.compile(CONSTANT.pattern.replace("[A-Z][A-Z0-9_]*", r"[A-Za-z_]\w*"), re.M)
# `assert cfg.n_embd % cfg.n_head == 0` (any expression ending in a name, on either side)
ASSERT_DIVIDES = re.compile(r"assert\s+[\w.]*?(\w+)\s*%\s*[\w.]*?(\w+)\s*==\s*0\b")
# `n_embd: int = N_EMBD` (a dataclass field or attribute standing for a constant)
ALIAS = re.compile(r"^\s+(\w+)\s*(?::\s*[\w\[\]. |]+)?\s*=\s*([A-Z][A-Z0-9_]*)\s*(?:#.*)?$", re.M)
KINDS = ("range", "log_range", "choices", "pow2")
KEYS = (*KINDS, "integer", "divides", "multiple_of", "requires")
OPEN_UNIT = re.compile(r"BETA", re.I)                  # Adam betas: 0 < b < 1
CLOSED_UNIT = re.compile(r"DROPOUT|PROB|FRAC", re.I)   # probabilities, fractions: 0 <= p <= 1


class SpaceError(ValueError):
    """A declared search space that cannot be right (one line)."""


@dataclass(frozen=True)
class Dim:
    name: str
    kind: str = ""                 # range | log_range | choices | "" (no bounds declared)
    low: float = -math.inf
    high: float = math.inf
    choices: tuple = ()
    integer: bool = False
    low_open: bool = False         # the bound itself is not allowed (betas: (0, 1))
    high_open: bool = False
    divides: str = ""              # this constant must divide that one
    multiple_of: str = ""          # this constant must be a multiple of that one
    requires: tuple = ()           # expressions over the constants that must hold (asserts)

    def contains(self, v: float) -> bool:
        if self.kind == "pow2" and not (v >= 1 and v == int(v) and int(v) & (int(v) - 1) == 0):
            return False
        if self.choices:
            return any(math.isclose(v, c, rel_tol=1e-9) for c in self.choices)
        if self.integer and v != int(v):
            return False
        lo_ok = v > self.low if self.low_open else v >= self.low
        hi_ok = v < self.high if self.high_open else v <= self.high
        return lo_ok and hi_ok


def parse_space(data, where: str, known: set[str] | None = None) -> dict[str, Dim]:
    """`search_space:` from task.yaml -> {constant: Dim}. `known`: the constants the
    editable files define (None: do not check). Raises SpaceError with one line."""
    if data in (None, {}):
        return {}
    if not isinstance(data, dict):
        raise SpaceError(f"{where}: search_space must map constant names to their ranges")
    space = {}
    for name, spec in data.items():
        at = f"{where}: search_space.{name}"
        if known is not None and name not in known:
            raise SpaceError(f"{at}: no numeric setting {name} in the editable files (a "
                             f"module-level assignment, a key of an editable YAML or JSON "
                             f"file, a flag of the flags file)"
                             + (f"; they define {', '.join(sorted(known))}" if known else ""))
        if not isinstance(spec, dict):
            raise SpaceError(f"{at}: expected a mapping such as {{range: [1, 8], integer: "
                             f"true}}, got {spec!r}")
        unknown = [k for k in spec if k not in KEYS]
        if unknown:
            raise SpaceError(f"{at}: unknown key '{unknown[0]}'; allowed: {', '.join(KEYS)}")
        kinds = [k for k in KINDS if k in spec]
        if len(kinds) != 1:
            raise SpaceError(f"{at}: give exactly one of {', '.join(KINDS)}")
        space[name] = _dim(name, kinds[0], spec, at)
    for dim in space.values():
        for expr in dim.requires:
            unknown = [n for n in names_in(expr) if known is not None and n not in known]
            if unknown:
                raise SpaceError(f"{where}: search_space.{dim.name}: requires names "
                                 f"{unknown[0]}, which is not a numeric constant of the "
                                 f"editable files")
        for other in (dim.divides, dim.multiple_of):
            if other and known is not None and other not in known:
                raise SpaceError(f"{where}: search_space.{dim.name}: constraint names "
                                 f"{other}, which is not a numeric constant of the editable files")
    return space


def _dim(name: str, kind: str, spec: dict, at: str) -> Dim:
    integer = spec.get("integer", False)
    if not isinstance(integer, bool):
        raise SpaceError(f"{at}: integer must be true or false")
    extra: dict = {k: str(spec[k]) for k in ("divides", "multiple_of") if k in spec}
    if "requires" in spec:
        extra["requires"] = _requires(spec["requires"], at)
    if kind == "choices":
        values = _numbers(spec["choices"])
        if not isinstance(values, list) or not values or not all(_number(v) for v in values):
            raise SpaceError(f"{at}: choices must be a non-empty list of numbers")
        return Dim(name, kind, min(values), max(values), tuple(values),
                   integer or all(isinstance(v, int) for v in values), **extra)
    bounds = _numbers(spec[kind])
    if kind == "pow2":
        if not (isinstance(bounds, list) and len(bounds) == 2
                and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 62
                        for b in bounds) and bounds[0] < bounds[1]):
            raise SpaceError(f"{at}: pow2 must be [low, high] exponents, 0 <= low < high <= 62"
                             f" (2**low .. 2**high), got {bounds!r}")
        return Dim(name, kind, float(2 ** bounds[0]), float(2 ** bounds[1]), (), True, **extra)
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(_number(b) for b in bounds)):
        raise SpaceError(f"{at}: {kind} must be [low, high], got {bounds!r}")
    low, high = float(bounds[0]), float(bounds[1])
    if not low < high:
        raise SpaceError(f"{at}: {kind} [{bounds[0]}, {bounds[1]}] is empty (low must be < high)")
    if kind == "log_range" and low <= 0:
        raise SpaceError(f"{at}: log_range needs low > 0, got {bounds[0]}")
    return Dim(name, kind, low, high, (), integer, **extra)


def _requires(value, at: str) -> tuple[str, ...]:
    exprs = [value] if isinstance(value, str) else value
    if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
        raise SpaceError(f"{at}: requires must be an expression or a list of them")
    for expr in exprs:
        try:
            evaluate(expr, {n: 1.0 for n in names_in(expr)})
        except ZeroDivisionError:
            pass
        except (SyntaxError, ValueError) as exc:
            raise SpaceError(f"{at}: requires: '{expr}' is not an arithmetic condition over "
                             f"constants ({exc})") from None
    return tuple(exprs)


def number(text: str) -> float:
    """A constant's source text (`3e-4`, `1_000`, `2**19`) -> its value; ValueError (one
    line) when it is no number or beyond a float. Read, never evaluated (loop/untrusted.py):
    the text may be a model's."""
    return parse_number(text)


def _numbers(values):
    """A list's number texts (`'5e-05'`, as YAML 1.1 reads it) as numbers, by the one number
    parser; anything else as it was (refused by the checks after)."""
    if not isinstance(values, list):
        return values
    out = []
    for v in values:
        try:
            out.append(parse_number(v) if isinstance(v, str) else v)
        except ValueError:
            out.append(v)
    return out


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def constants(files: dict[str, str], named=()) -> dict[str, float]:
    """{NAME: value} of the settings a search may read (loop/script/settings.py): the numeric
    UPPER_CASE constants of the Python files, their lowercase module-level settings, dict
    keys and keyword arguments among `named` (a declared search space's names), and every
    numeric key of the YAML and JSON files (a config's keys, the flags file's flags)."""
    out: dict[str, float] = {}
    for s in settings.find_all(files):
        if s.kind in ("yaml", "json") or s.name in named or (
                s.kind == "constant" and is_constant_name(s.name)):
            try:
                out.setdefault(s.name, number(s.text))
            except (ValueError, OverflowError):
                continue
    return out


def is_constant_name(name: str) -> bool:
    """UPPER_CASE: a constant by its name, searched without being declared."""
    return re.fullmatch(r"[A-Z][A-Z0-9_]*", name) is not None


def implied(files: dict[str, str], named=()) -> dict[str, Dim]:
    """Without a declared space: the bounds a name implies and the divisibility the code
    asserts (`assert cfg.n_embd % cfg.n_head == 0` -> N_HEAD divides N_EMBD)."""
    names = constants(files, named)
    alias: dict[str, str] = {}
    for text in files.values():
        for m in ALIAS.finditer(text):
            alias.setdefault(m[1], m[2])
    dims: dict[str, Dim] = {}
    for name in names:
        if OPEN_UNIT.search(name):
            dims[name] = Dim(name, low=0.0, high=1.0, low_open=True, high_open=True)
        elif CLOSED_UNIT.search(name):
            dims[name] = Dim(name, low=0.0, high=1.0)

    def resolve(ident: str) -> str | None:
        const = ident if ident in names else ident.upper() if ident.upper() in names else None
        return const or (alias.get(ident) if alias.get(ident) in names else None)
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        for m in ASSERT_DIVIDES.finditer(text):
            big, small = resolve(m[1]), resolve(m[2])
            if big and small:
                base = dims.get(small, Dim(small))
                dims[small] = Dim(**{**vars(base), "divides": big, "integer": True})
    return dims


def valid(values: dict[str, float], space: dict[str, Dim]) -> str | None:
    """Why these constant values are not a point of the space, or None when they are."""
    for dim in space.values():
        if dim.name not in values:
            continue
        v = values[dim.name]
        if not dim.contains(v):
            return f"{dim.name} = {v:g} is outside its space"
        for other, divides in ((dim.divides, True), (dim.multiple_of, False)):
            if other and other in values:
                a, b = (values[other], v) if divides else (v, values[other])
                if b == 0 or a % b:
                    how = "divide" if divides else "make a multiple of"
                    return f"{dim.name} = {v:g} does not {how} {other} = {values[other]:g}"
        for expr in dim.requires:
            if all(n in values for n in names_in(expr)):
                try:
                    holds = evaluate(expr, values)
                except (ZeroDivisionError, ValueError, OverflowError):
                    holds = False
                if not holds:
                    return f"{dim.name} = {v:g} fails {expr}"
    return None
