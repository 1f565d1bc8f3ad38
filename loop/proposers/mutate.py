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
import random
import threading

from loop.proposers import change as recorded
from loop.proposers.axes import (Axis, Change, SpaceExhausted, apply_setting, axes_of, describe,
                                 same)
from loop.proposers.base import Context, Proposal
from loop.script import settings
from loop.script.seeds import SEED_NAME
from loop.setup.search_space import (Dim, constants, implied, number, parse_space,
                                     valid)

DRAWS = 200            # random draws before the systematic search for an untried point
CHANGED = ((1, 0.5), (2, 0.3), (3, 0.2))   # how many constants one proposal sets



def _ok(changes: list[Change], values: dict[str, float], rules: dict[str, Dim],
        space: dict[str, Dim]) -> bool:
    point = {**values, **{name: number(new) for _, name, _, new in changes}}
    return valid(point, rules) is None and valid(point, space) is None


def candidates(files: dict[str, str], space: dict[str, Dim] | None = None) -> list[Change]:
    """Every single-constant change of the systematic pass (file, name, old, new): each
    constant to each value of its grid, valid points only."""
    space = space or {}
    values, rules = constants(files, space), implied(files, space)
    return [c for axis in axes_of(files, space) for new in axis.grid()
            for c in [(axis.path, axis.name, axis.old, new)]
            if _ok([c], values, rules, space)]


def _fingerprint(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def make(config, seed: int = 0) -> MutateProposer:
    """The `mutate` kind of loop/proposers/registry.py."""
    return MutateProposer(seed=seed)


class MutateProposer:
    def __init__(self, seed: int = 0):
        self.seed = seed
        self._proposed: dict[str, set[str]] = {}   # parent fingerprint -> descriptions
        self._points: set[tuple] = set()            # every constant's value: states seen
        self._lock = threading.Lock()               # proposals may be asked for in parallel

    def propose(self, context: Context) -> Proposal:
        space = parse_space(getattr(context.task, "search_space", None) or {}, "task.yaml")
        files = context.files
        axes = axes_of(files, space)
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
            new_files[path] = apply_setting(new_files.get(path, files[path]), path, name, old, new)
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
                if not same(new, a.old):
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


def _names(axes: list[Axis]) -> str:
    names = [a.name for a in axes]
    return ", ".join(names) if names else "no constant"


def declarable(task) -> list[str]:
    """Every setting of `task`'s editable files (any kind, loop/script/settings.py) but a
    seed, by name: what a `search_space` may name."""
    files = {rel: (task.root / rel).read_text(errors="replace")
             for rel in task.editable_files() if settings.kind_of(rel)}
    return [s.name for s in settings.find_all(files)
            if not SEED_NAME.search(s.name.rpartition(".")[2])]


def searchable(task) -> list[str]:
    """The settings mutate and tune would search in `task`'s editable files as they are:
    an empty list is a night that could search nothing (refused before the baseline)."""
    files = {rel: (task.root / rel).read_text(errors="replace")
             for rel in task.editable_files() if settings.kind_of(rel)}
    return [a.name for a in axes_of(files, parse_space(task.search_space or {}, "task.yaml"))]
