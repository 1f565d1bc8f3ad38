"""The tuner: Optuna's TPE (the default) or CMA-ES over the task's `search_space`.

Each proposal is a whole point of the space: every searched constant set, written on the tip
as "set these constants" (a Change of Settings, like mutate's: data, made again as such on
a newer best). Constants the point leaves at the tip's value are pinned too (`C stays 2.5`
in the description), so a replayed proposal still runs the point it names.

Stateless: the study is rebuilt from the context at every proposal, so a resumed night,
even after kill -9, proposes exactly what it would have. Each attempt's point is read back
from its description (`Set A to 0.5 (was 4), B to ... in train.py; C stays 2.5`; a
description naming only some constants, mutate's, takes the others from the best it was
proposed on: the tip with the later keeps undone; past a kept code change, an LLM's, as
loop/proposers/epochs.py says) and told to the study in iteration order:
a keep or a discard as its measured mean, a failure (crash, timeout, diverged, no_metric,
bad_edit) as a failed trial, a run stopped early as clearly worse (a discard without a
value) as a pruned one (TPE counts it among its start-up trials and in its worse group: told
as a failure, a night whose runs are mostly stopped never left TPE's random start-up),
an attempt in flight as a running one (TPE's constant liar
steers the next point away from it, so N slots get N distinct points). The best's own
point is told with the best's value (the baseline's, on the first proposal), so a night
continued on the same tag starts where the journal left off. The sampler's seed comes from
the proposer seed and the iteration.

A point is proposed only if it can run (inside the space, every `divides`, `multiple_of`
and `requires` holding, as mutate checks) and was never tried (any attempt's point, those in
flight, the best's). Samples that fail that are left running in the study and it is asked
again; after ASKS, random draws take over; when none is left, SpaceExhausted. CMA-ES
samples categorical constants (`choices`) at random, as Optuna does."""
from __future__ import annotations

import hashlib
import math
import random
import re
import threading
import warnings
from typing import Any

from loop.errors import UsageError
from loop.kinds import TUNE_SAMPLERS
from loop.proposers import change as recorded
from loop.proposers.axes import Axis, SpaceExhausted, apply_setting, axes_of, describe
from loop.proposers.base import Attempt, Context, Proposal
from loop.proposers.epochs import read_keep
from loop.setup.search_space import constants, implied, number, parse_space, valid

ASKS = 64        # samples from the study before random draws look for an untried point
DRAWS = 2000     # random draws before the space counts as exhausted
DONE = ("keep", "discard")       # judged with a measured value; any other end is a failure

SET = re.compile(r"(?:^Set |, |; )([A-Za-z_][\w.\-]*) to ([^\s,;()]+) \(was ([^\s,;()]+)\)")
STAYS = re.compile(r"([A-Za-z_][\w.\-]*) stays ([^\s,;()]+)")


def _optuna():
    try:
        import optuna
    except ImportError:
        raise UsageError("the tune proposer needs Optuna: pip install 'autoresearch[tune]'") \
            from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


class _Codec:
    """One constant as an Optuna parameter: its distribution, and value <-> parameter.
    pow2 constants are searched by exponent (so CMA-ES sees an ordered integer)."""

    def __init__(self, optuna, axis: Axis, pow2: bool):
        self.axis, self.pow2 = axis, pow2
        d = optuna.distributions
        if pow2:
            lo, hi = (int(min(axis.choices)).bit_length() - 1,
                      int(max(axis.choices)).bit_length() - 1)
            self.dist = d.IntDistribution(lo, hi)
        elif axis.choices:
            self.dist = d.CategoricalDistribution(list(axis.choices))
        elif axis.integer:
            self.dist = d.IntDistribution(int(axis.low), int(axis.high), log=axis.log)
        else:
            self.dist = d.FloatDistribution(axis.low, axis.high, log=axis.log)

    def text(self, param) -> str:
        """The source text the parameter is written as (rounded as mutate writes numbers)."""
        return self.axis.text(2 ** int(param) if self.pow2 else param)

    def param(self, value: float):
        """The parameter standing for a written value; None when it is outside the space."""
        p: Any
        if self.pow2:
            p = int(value).bit_length() - 1 if value >= 1 else -1
            ok = 2 ** p == value
        elif self.axis.choices:
            p = next((c for c in self.axis.choices if math.isclose(c, value)), None)
            ok = p is not None
        else:
            p = int(value) if self.axis.integer else value
            ok = not self.axis.integer or value == int(value)
        return p if ok and self.dist._contains(self.dist.to_internal_repr(p)) else None


def _codecs(optuna, files: dict[str, str], space: dict) -> dict[str, _Codec]:
    """The searched constants (mutate's axes: the declared ones, else every one), by name."""
    return {a.name: _Codec(optuna, a, "**" in a.old or getattr(space.get(a.name), "kind", "")
                           == "pow2") for a in axes_of(files, space)}


def make(config, seed: int = 0) -> TuneProposer:
    """The `tune` kind of loop/proposers/registry.py."""
    return TuneProposer(seed=seed, sampler=config.sampler)


class TuneProposer:
    def __init__(self, seed: int = 0, sampler: str = "tpe"):
        if sampler not in TUNE_SAMPLERS:
            raise UsageError(f"proposer.sampler must be one of {', '.join(TUNE_SAMPLERS)}, "
                             f"got '{sampler}'")
        self.optuna = _optuna()
        self.seed, self.sampler = seed, sampler
        self._pending: dict[str, dict] = {}   # description -> point: proposed, not yet shown
        self._lock = threading.Lock()          # proposals may be asked for in parallel

    def propose(self, context: Context) -> Proposal:
        space = parse_space(getattr(context.task, "search_space", None) or {}, "task.yaml")
        files = context.files
        codecs = _codecs(self.optuna, files, space)
        if not codecs:
            raise SpaceExhausted("nothing to tune: no numeric UPPER_CASE constant to search and no "
                                 "search_space in task.yaml")
        values, rules = constants(files, space), implied(files, space)
        tip = {n: values[n] for n in codecs}
        with self._lock:
            shown = {a.description for a in context.history}
            self._pending = {d: p for d, p in self._pending.items() if d not in shown}
            trials = _trials(context, codecs, tip) + [(p, None, "running")
                                                      for p in self._pending.values()]
            best = {n: c.param(tip[n]) for n, c in codecs.items()}
            tried = {_key(p) for p, _, _ in trials} | {_key(best)}
            seed = int(hashlib.sha256(f"{self.seed}:{context.seed}:{context.iteration}"
                                      .encode()).hexdigest()[:8], 16)
            study = self._study(context.task.metric.direction, seed, codecs, trials,
                                best if None not in best.values() else None)

            def fits(params: dict) -> dict | None:
                point = {n: number(c.text(params[n])) for n, c in codecs.items()}
                told = {n: c.param(point[n]) for n, c in codecs.items()}
                if any(v is None for v in told.values()) or _key(told) in tried:
                    return None
                whole = {**values, **point}
                return told if valid(whole, rules) is None and valid(whole, space) is None \
                    else None
            point = self._ask(study, codecs, fits, random.Random(seed))
            if point is None:
                raise SpaceExhausted(f"search space exhausted: no untried valid point of "
                                     f"{', '.join(codecs)} found in {ASKS + DRAWS} samples")
            changes, pinned = [], []
            for name, c in codecs.items():
                new = c.text(point[name])
                if number(new) == tip[name]:
                    pinned.append((c.axis.path, name, c.axis.old, c.axis.old))
                else:
                    changes.append((c.axis.path, name, c.axis.old, new))
            description = describe(changes) + ("; " + ", ".join(
                f"{name} stays {old}" for _, name, old, _ in pinned) if pinned else "")
            self._pending[description] = point
        new_files: dict[str, str] = {}
        for path, name, old, new in changes:
            new_files[path] = apply_setting(new_files.get(path, files[path]), path, name, old, new)
        settings = tuple(recorded.Setting(*c) for c in changes + pinned)
        return Proposal(description, files=new_files, change=recorded.Change(settings=settings))

    def _study(self, direction: str, seed: int, codecs: dict, trials: list, x0: dict | None):
        """The study as the journal says it went: every trial told, in order."""
        optuna = self.optuna
        direction = "maximize" if direction == "maximize" else "minimize"
        dists = {n: c.dist for n, c in codecs.items()}
        state = optuna.trial.TrialState
        if self.sampler == "tpe":
            sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                                 constant_liar=True)
            study = optuna.create_study(direction=direction, sampler=sampler)
            study.add_trials([optuna.trial.create_trial(
                params=p, distributions=dists, value=v,
                state=state.COMPLETE if how == "done" else
                state.RUNNING if how == "running" else
                state.PRUNED if how == "pruned" else state.FAIL) for p, v, how in trials])
            return study
        # CMA-ES keeps its state in the trials it asked for: ask for each past point again
        # (enqueued, so the point is the journal's), then tell it, in order
        # started at the best's point (x0: deprecated in Optuna 4.9; without it, the centre)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                sampler = optuna.samplers.CmaEsSampler(seed=seed, x0=x0,
                                                       warn_independent_sampling=False)
        except TypeError:
            sampler = optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
        study = optuna.create_study(direction=direction, sampler=sampler)
        for p, v, how in sorted(trials, key=lambda t: t[2] == "running"):
            study.enqueue_trial(p)
            trial = study.ask(dists)
            if how != "running":
                study.tell(trial, v if how == "done" else None,
                           state=state.COMPLETE if how == "done" else
                           state.PRUNED if how == "pruned" else state.FAIL)
        return study

    def _ask(self, study, codecs: dict, fits, rng: random.Random) -> dict | None:
        """The first sample that fits: ASKS from the study's sampler, then random draws.
        A rejected sample stays running, so the constant liar moves TPE away from it."""
        dists = {n: c.dist for n, c in codecs.items()}
        for _ in range(ASKS):
            found = fits(study.ask(dists).params)
            if found is not None:
                return found
        for _ in range(DRAWS):
            found = fits({n: _draw(d, rng) for n, d in dists.items()})
            if found is not None:
                return found
        return None


def _draw(dist, rng: random.Random):
    if hasattr(dist, "choices"):
        return rng.choice(dist.choices)
    lo, hi = dist.low, dist.high
    x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if dist.log else rng.uniform(lo, hi)
    return min(hi, max(lo, round(x))) if isinstance(lo, int) and isinstance(hi, int) else x


def _key(point: dict) -> tuple:
    return tuple(sorted(point.items()))


def _trials(context: Context, codecs: dict, tip: dict) -> list[tuple[dict, float | None, str]]:
    """(point, value, how) of every attempt a point can be read from, in iteration order,
    the best's point first; how: done | failed | running | pruned (a discard without a
    value: its run was stopped early as clearly worse, loop/run/early_stop.py)."""
    state, out = dict(tip), []
    # the gain of the code changes kept since a point was measured: its value on today's
    # code, as loop/proposers/epochs.py assumes (a shift; points past a change of a
    # searched constant's meaning are not told)
    shift, sign = 0.0, (-1.0 if context.task.metric.direction != "maximize" else 1.0)
    for a in sorted(context.history, key=lambda a: -a.iteration):
        sets = _sets(a)
        if not sets and a.status == "keep":    # a code change (an LLM's): step back past it
            step = read_keep(a, set(codecs))
            if step.breaks:
                break
            state.update({n: v for n, v in step.before.items() if n in state})
            shift += (a.delta or 0.0) if step.code else 0.0
            continue
        if not sets:
            continue
        if a.status == "keep":                 # the state it was proposed on: undo it
            state.update({n: old for n, (_, old) in sets.items() if n in state})
        point = {**state, **{n: new for n, (new, _) in sets.items() if n in state}}
        told = {n: c.param(point[n]) for n, c in codecs.items()}
        if any(v is None for v in told.values()):
            continue                           # outside today's space: not told
        how = ("done" if a.status in DONE and a.metric is not None else
               "running" if a.status == "running" else
               "pruned" if a.status == "discard" else "failed")   # stopped: clearly worse
        value = a.metric + sign * shift if how == "done" and a.metric is not None else None
        out.append((told, value, how))
    out.reverse()
    best = {n: c.param(tip[n]) for n, c in codecs.items()}
    if context.best_metric is not None and all(v is not None for v in best.values()) \
            and not any(p == best and how == "done" for p, _, how in out):
        out.insert(0, (best, context.best_metric, "done"))
    return out


def _sets(a: Attempt) -> dict[str, tuple[float, float]]:
    """name -> (value set, value before) read from a `Set ...` description; {} otherwise."""
    if not a.description.startswith("Set "):
        return {}
    try:
        out = {m[1]: (number(m[2]), number(m[3])) for m in SET.finditer(a.description)}
        out.update({m[1]: (number(m[2]), number(m[2])) for m in STAYS.finditer(a.description)})
    except (ValueError, ZeroDivisionError):
        return {}
    return out
