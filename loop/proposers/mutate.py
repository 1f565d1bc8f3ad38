"""The offline proposer: random search over the numeric constants of the editable files.

The random-search baseline an LLM must beat. Each proposal sets one, two or three of the
task's numeric UPPER_CASE constants (or the module-level settings its search_space names,
lowercase ones included: nanoGPT's `learning_rate = 6e-4`; a seed only when declared) to
values drawn from their whole declared space (`search_space` in task.yaml: uniformly over
a range, log-uniformly over a log_range or an integer range spanning orders of magnitude,
any of the choices), seeded and reproducible.
It never proposes a change already tried from the same parent (the history it is shown,
plus what it proposed itself and is not yet in the history: proposals asked for ahead),
nor a point it has already seen this session (an earlier best, such as the baseline),
and proposes only points that can run: inside the declared space, and within what the
code asserts (`assert A % B == 0`) and what a name implies (betas in (0, 1), probabilities
in [0, 1]). Without a declared space a constant moves within a factor of ten of its current
value. When every point of a finite space has been tried it raises SpaceExhausted (the
loop stops there, successfully). It does not read program.md: steering it means declaring
the space in task.yaml."""
from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
import threading

from loop.proposers.base import Context, Proposal, ProposerFatal
from loop.proposers import change as recorded
from loop.setup import settings
from loop.setup.search_space import (SEED, Dim, constants, implied, is_constant_name, number,
                                     parse_space, valid)

SPREAD = 10.0          # an undeclared constant moves within [v / SPREAD, v * SPREAD]
GRID = 101             # points of a continuous dimension tried once random draws run dry
MAX_INT_GRID = 10_000  # an integer range up to this many values: every value is a point
DRAWS = 200            # random draws before the systematic search for an untried point
CHANGED = ((1, 0.5), (2, 0.3), (3, 0.2))   # how many constants one proposal sets

Change = tuple[str, str, str, str]         # (file, constant, old text, new text)


class SpaceExhausted(ProposerFatal):
    """Every valid point of the search space was tried: a finished search, not a failure."""
    exit_code = 0


def _format(value: float, like: str) -> str:
    """`value` written the way the constant's current text `like` is written."""
    if "e" in like.lower():
        return f"{value:.2e}".replace("e-0", "e-").replace("e+0", "e")
    text = f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"
    if "." in like and not re.search(r"[.eE]", text):
        text += ".0"                                 # a float stays a float literal
    return text


def _is_int(text: str) -> bool:
    return re.fullmatch(r"[-+]?\d[\d_]*", text) is not None


def _same(a: str, b: str) -> bool:
    return number(a) == number(b)


class _Axis:
    """One constant's values: drawn at random, or listed (finite) for the systematic pass."""

    def __init__(self, path: str, name: str, old: str, dim: Dim | None):
        self.path, self.name, self.old = path, name, old
        v = number(old)
        if "**" in old or (dim is not None and dim.kind == "pow2"):
            # `2**19`: powers of two, written the same way (declared exponents, else +-3)
            k = max(0, round(math.log2(max(v, 1))))
            lo, hi = ((int(dim.low).bit_length() - 1, int(dim.high).bit_length() - 1)
                      if dim is not None and dim.kind == "pow2" else (max(0, k - 3), k + 3))
            dim = Dim(name, "choices", float(2 ** lo), float(2 ** hi),
                      tuple(2 ** e for e in range(lo, hi + 1)), True)
        self.integer = (dim.integer if dim and dim.kind
                        else _is_int(old) or bool(dim and dim.integer))
        self.choices: tuple = dim.choices if dim and dim.choices else ()
        low, high = (dim.low, dim.high) if dim else (-math.inf, math.inf)
        if not (math.isfinite(low) and math.isfinite(high)):   # undeclared: near its value
            if v > 0:
                near = (v / SPREAD, v * SPREAD)
            elif v < 0:
                near = (v * SPREAD, v / SPREAD)
            else:
                near = (1.0, SPREAD) if self.integer else (1e-4, 1.0)
            low, high = max(low, near[0]), min(high, near[1])
        if self.integer:
            low, high = math.ceil(low), math.floor(high)
            if v > 0 and not (dim and dim.kind):
                low = max(low, 1)                      # a positive count stays positive
        self.low, self.high = low, high
        self.log = low > 0 and (bool(dim and dim.kind == "log_range") or high / low >= 16
                                or not (dim and dim.kind))

    def text(self, x: float) -> str:
        if "**" in self.old:
            return f"2**{int(round(x)).bit_length() - 1}"
        if self.integer:
            return str(int(round(x)))
        return _format(x, self.old)

    def draw(self, rng: random.Random) -> str:
        if self.choices:
            return self.text(rng.choice(self.choices))
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        if self.integer:
            x = min(self.high, max(self.low, round(x)))
        return self.text(x)

    def grid(self) -> list[str]:
        """Every value (choices, an integer range) or an even grid (continuous), the current
        value excluded."""
        if self.choices:
            values = [self.text(c) for c in self.choices]
        elif self.integer and self.high - self.low < MAX_INT_GRID:
            values = [str(i) for i in range(int(self.low), int(self.high) + 1)]
        else:
            f = (lambda t: math.exp(math.log(self.low) + t * (math.log(self.high)
                                                          - math.log(self.low)))) \
                if self.log else (lambda t: self.low + t * (self.high - self.low))
            values = [self.text(f(i / (GRID - 1))) for i in range(GRID)]
        out: list[str] = []
        for t in values:
            if t not in out and not _same(t, self.old) and self._inside(t):
                out.append(t)
        return out

    def _inside(self, t: str) -> bool:
        x = number(t)
        return self.low <= x <= self.high if not self.choices else True


def _axes(files: dict[str, str], space: dict[str, Dim]) -> list[_Axis]:
    """The settings that may move, in file order (loop/setup/settings.py: module-level
    constants, a config's keys, the flags file's flags): the declared ones, else every
    UPPER_CASE constant but a seed."""
    rules = implied(files, space)
    out, seen = [], set()
    for s in settings.find_all(files):
        name = s.name
        if name in seen or (space and name not in space):
            continue                     # a declared space names what may change
        if not space and (s.kind != "constant" or not is_constant_name(name)
                          or SEED.search(name)):
            continue                     # undeclared: UPPER_CASE constants, seeds fixed
        seen.add(name)
        dim = space.get(name) or rules.get(name)
        out.append(_Axis(s.path, name, s.text, dim))
    return out


def _ok(changes: list[Change], values: dict[str, float], rules: dict[str, Dim],
        space: dict[str, Dim]) -> bool:
    point = {**values, **{name: number(new) for _, name, _, new in changes}}
    return valid(point, rules) is None and valid(point, space) is None


def candidates(files: dict[str, str], space: dict[str, Dim] | None = None) -> list[Change]:
    """Every single-constant change of the systematic pass (file, name, old, new): each
    constant to each value of its grid, valid points only."""
    space = space or {}
    values, rules = constants(files, space), implied(files, space)
    return [c for axis in _axes(files, space) for new in axis.grid()
            for c in [(axis.path, axis.name, axis.old, new)]
            if _ok([c], values, rules, space)]


def describe(changes: list[Change] | tuple) -> str:
    """`Set A to 2 (was 1) in train.py`; several: `Set A to 2 (was 1), B to 8 (was 4) in
    train.py` (one clause per file, joined by `; `)."""
    if isinstance(changes, tuple):           # the one-change form: describe(path, name, ..)
        changes = [changes]
    parts = []
    for path, group in itertools.groupby(changes, key=lambda c: c[0]):
        sets = ", ".join(f"{name} to {new} (was {old})" for _, name, old, new in group)
        parts.append(f"{sets} in {path}")
    return "Set " + "; ".join(parts)


def _apply(text: str, path: str, name: str, old: str, new: str) -> str:
    """The file's text with one setting changed (its value written `old` there)."""
    out = settings.write(text, path, name, new, old)
    return text if out is None else out


def _fingerprint(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


class MutateProposer:
    def __init__(self, seed: int = 0):
        self.seed = seed
        self._proposed: dict[str, set[str]] = {}   # parent fingerprint -> descriptions
        self._points: set[tuple] = set()            # every constant's value: states seen
        self._lock = threading.Lock()               # proposals may be asked for in parallel

    def propose(self, context: Context) -> Proposal:
        space = parse_space(getattr(context.task, "search_space", None) or {}, "task.yaml")
        files = context.files
        axes = _axes(files, space)
        values, rules = constants(files, space), implied(files, space)
        rng = random.Random(f"{self.seed}:{context.seed}:{context.iteration}")
        parent = _fingerprint(files)
        with self._lock:
            mine = self._proposed.setdefault(parent, set())
            described = {a.description for a in context.history} | mine
            self._points.add(_point(values, []))

            def tried(changes: list[Change]) -> bool:
                return describe(changes) in described or _point(values, changes) in self._points
            changes = self._draw(axes, values, rules, space, tried, rng) or \
                self._first_untried(axes, values, rules, space, tried)
            if changes is None:
                where = "task.yaml's search_space" if space else \
                    "the numeric UPPER_CASE constants of the editable files"
                raise SpaceExhausted(f"search space exhausted: every valid value of "
                                     f"{_names(axes)} in {where} was tried")
            description = describe(changes)
            mine.add(description)
            self._points.add(_point(values, changes))
        new_files: dict[str, str] = {}
        for path, name, old, new in changes:
            new_files[path] = _apply(new_files.get(path, files[path]), path, name, old, new)
        # "set these constants": made again as such on a newer best (a replay)
        settings = tuple(recorded.Setting(*c) for c in changes)
        return Proposal(description, files=new_files, change=recorded.Change(settings=settings))

    @staticmethod
    def _draw(axes, values, rules, space, tried, rng) -> list[Change] | None:
        """A random untried valid point: DRAWS tries, each setting 1-3 constants."""
        if not axes:
            return None
        counts = [k for k, _ in CHANGED if k <= len(axes)]
        weights = [w for k, w in CHANGED if k <= len(axes)]
        for _ in range(DRAWS):
            k = rng.choices(counts, weights)[0]
            picked = sorted(rng.sample(range(len(axes)), k))
            changes = []
            for i in picked:
                a = axes[i]
                new = a.draw(rng)
                if not _same(new, a.old):
                    changes.append((a.path, a.name, a.old, new))
            if changes and _ok(changes, values, rules, space) and not tried(changes):
                return changes
        return None

    @staticmethod
    def _first_untried(axes, values, rules, space, tried) -> list[Change] | None:
        """The systematic pass (random draws ran dry): single changes, then pairs, then
        triples, the first valid untried one; None when there is none."""
        grids = [[(a.path, a.name, a.old, v) for v in a.grid()] for a in axes]
        for k in range(1, min(3, len(axes)) + 1):
            for group in itertools.combinations(range(len(axes)), k):
                for combo in itertools.product(*(grids[i] for i in group)):
                    changes = list(combo)
                    if _ok(changes, values, rules, space) and not tried(changes):
                        return changes
        return None


def _point(values: dict[str, float], changes: list[Change]) -> tuple:
    """The state after `changes`: every constant's value (a state already seen is not
    proposed again, whatever the parent)."""
    return tuple(sorted({**values, **{name: number(new) for _, name, _, new in changes}}.items()))


def _names(axes: list[_Axis]) -> str:
    names = [a.name for a in axes]
    return ", ".join(names) if names else "no constant"


def searchable(task) -> list[str]:
    """The settings mutate and tune would search in `task`'s editable files as they are:
    an empty list is a night that could search nothing (refused before the baseline)."""
    files = {rel: (task.root / rel).read_text(errors="replace")
             for rel in task.editable_files() if settings.kind_of(rel)}
    return [a.name for a in _axes(files, parse_space(task.search_space or {}, "task.yaml"))]
