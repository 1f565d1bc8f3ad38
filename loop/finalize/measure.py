"""Runs for `finalize`: versions of the code measured in pairs, through the night's own
scheduler and backend, each run journalled as it ends so a restart repeats none.

A run is known by (tree, k): the code's git tree and its seed's index. Trees, not commits:
a version made again after a restart is a new commit with the same tree, and its runs are
already in the journal. Every version's k-th run gets the same fresh seed (`seed_of`), so a
run of the final code serves every comparison's pair k. Rounds: the k-th runs of every
comparison still undecided are queued together (every slot used), the round's results
come back, the estimates are updated, and the next round asks only for what is needed."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from loop.engine.events import RunEnded
from loop.finalize.estimate import LIKELY, Call, Estimate, estimate, group_call, run_noise
from loop.judge.stats import pooled_sd
from loop.judge.verdict import improvement
from loop.run.spec import RunJob
from loop.state.journal import Journal
from loop.words import RunKey, Status

FRESH_SEED = 10_000_000     # above any night's seed + 1000 * iteration + run
ITERATION = 9999            # $AUTORESEARCH_ITERATION of finalize's runs


def seed_of(base_seed: int, k: int) -> int:
    return base_seed + FRESH_SEED + k


@dataclass(frozen=True)
class Version:
    commit: str
    tree: str


@dataclass
class Comparison:
    """Reference vs variant: how much better the reference is (the final code against the
    start: the night's gain; against the final code without a change: that change's effect)."""
    name: str
    kind: str                # gain | leave-one-out | check
    ref: Version
    variant: Version
    est: Estimate = field(default_factory=lambda: Estimate(None, None, 0, False, 0))
    capped: bool = False     # stopped by --max-runs / --max-wall before it was decided
    call: Call | None = None  # kind "group": the screen's call (estimate.group_call)


class MeasuredRuns:
    """The journal of finalize's runs and the rounds that add to it."""

    def __init__(self, journal: Journal, sched, direction: str, base_seed: int,
                 logs: Path, run_id: str, out):
        self.journal, self.sched, self.direction = journal, sched, direction
        self.base_seed, self.logs, self.run_id, self.out = base_seed, logs, run_id, out
        self.values: dict[tuple[str, int], float | None] = {}
        self.seen: dict[str, Comparison] = {}       # every comparison measured, by name
        self.run_s: list[float] = []
        for e in journal.load():
            if e.get("event") == "measure":
                self.values[(e["tree"], e["k"])] = e.get("value")
        self.earlier = len(self.values)      # runs made before this start

    @property
    def runs(self) -> int:
        return len(self.values)

    def run_sd(self) -> float | None:
        """One run's noise sd: each version's runs over the seeds, pooled."""
        by_tree: dict[str, list[float]] = {}
        for (tree, _), value in self.values.items():
            if value is not None:
                by_tree.setdefault(tree, []).append(value)
        return run_noise(list(by_tree.values()))

    def pairs(self, c: Comparison) -> tuple[list[float], int]:
        """The comparison's differences (pairs where both ran), and the pairs tried."""
        diffs, k = [], 0
        while (c.ref.tree, k) in self.values and (c.variant.tree, k) in self.values:
            a, b = self.values[(c.ref.tree, k)], self.values[(c.variant.tree, k)]
            if a is not None and b is not None:
                diffs.append(improvement(a, b, self.direction))
            k += 1
        return diffs, k

    def update(self, comps: list[Comparison], confidence: float, max_pairs: int) -> None:
        """Each comparison's estimate, its noise pooled over every comparison measured so
        far (those of earlier rounds too: the screen measures one group at a time)."""
        for c in comps:
            self.seen[c.name] = c
        every = {name: self.pairs(c)[0] for name, c in self.seen.items()}
        for c in comps:
            others = [d for name, d in every.items() if name != c.name]
            c.est = estimate(every[c.name], others, confidence, max_pairs,
                             LIKELY if c.kind == "leave-one-out" else None)
            if c.kind == "group":
                c.call = group_call(every[c.name], others, self.run_sd(), max_pairs,
                                    confidence)
                c.est.decided = bool(c.call.verdict)
            tried = self.pairs(c)[1]
            if tried >= 2 * max_pairs:        # runs keep failing: stop asking
                c.est.decided = True

    def run_df(self) -> int:
        """The degrees of freedom of run_sd (0: not known)."""
        by_tree: dict[str, list[float]] = {}
        for (tree, _), value in self.values.items():
            if value is not None:
                by_tree.setdefault(tree, []).append(value)
        return pooled_sd(list(by_tree.values()))[1]

    def measure(self, comps: list[Comparison], confidence: float, max_pairs: int,
                budget) -> None:
        """Rounds until every comparison is decided or `budget()` says stop (a reason)."""
        self.update(comps, confidence, max_pairs)
        while True:
            wanted: dict[tuple[str, int], Version] = {}
            for c in comps:
                if c.est.decided:
                    continue
                k = self.pairs(c)[1]
                for v in (c.ref, c.variant):
                    if (v.tree, k) not in self.values:
                        wanted.setdefault((v.tree, k), v)
            if not wanted:
                return
            stop, room = budget(len(wanted))
            if room < len(wanted):       # the runs that fit: the reference's first
                order = sorted(wanted, key=lambda key: (key[1], key[0] != comps[0].ref.tree))
                wanted = {key: wanted[key] for key in order[:room]}
            if wanted:
                self._round(wanted)
            if stop:
                self.update(comps, confidence, max_pairs)
                for c in comps:
                    c.capped = c.capped or not c.est.decided
                self.out(f"finalize: {stop}; what is measured so far decides")
                return
            self.update(comps, confidence, max_pairs)

    def runs_of(self, version: Version, n: int, budget) -> None:
        """The version's runs on the first `n` seeds, those not made yet, as far as
        `budget()` lets."""
        wanted = {(version.tree, k): version for k in range(n)
                  if (version.tree, k) not in self.values}
        if wanted:
            room = budget(len(wanted))[1]
            self._round(dict(sorted(wanted.items(), key=lambda item: item[0][1])[:room]))

    def _round(self, wanted: dict[tuple[str, int], Version]) -> None:
        for (tree, k), v in sorted(wanted.items(), key=lambda item: item[0][1]):
            name = f"{tree[:10]}-{k}"
            job = RunJob.make(ITERATION, RunKey.candidate(k), v.commit, self.run_id, 0,
                              self.logs / f"{name}.log", self.logs.parent / "runs" / name)
            job.seed = seed_of(self.base_seed, k)
            self.sched.add(job)
        self.sched.dispatch()
        left = len(wanted)
        while left:
            event = self.sched.next_event()
            if not isinstance(event, RunEnded):
                continue
            job, result = event.job, event.result
            self.sched.finished(job)
            self.sched.dispatch()
            left -= 1
            value = result.metric if result.status == Status.OK else None
            tree = next(t for (t, k), v in wanted.items()
                        if v.commit == job.commit and k == job.key.index)
            self.journal.write("measure", tree=tree, commit=job.commit, k=job.key.index,
                               seed=job.seed, value=value, status=result.status,
                               detail=result.detail, wall_s=result.wall_s)
            self.values[(tree, job.key.index)] = value
            self.run_s.append(result.wall_s)
            shown = "failed" if value is None else f"{value:.6g}"
            self.out(f"      run {job.commit[:7]} seed #{job.key.index}: {shown}"
                     + (f" ({result.status}: {result.detail})" if value is None else ""))


def budget_check(measured_runs: MeasuredRuns, max_runs: int | None, max_wall_s: float | None):
    """A callable: given the runs a round wants, why the measuring stops after it ("" when
    it goes on) and how many of them may still start."""
    started = time.monotonic()

    def check(wanted: int) -> tuple[str, int]:
        if max_wall_s is not None and time.monotonic() - started >= max_wall_s:
            return f"--max-wall {max_wall_s:g}s spent", 0
        if max_runs is not None and measured_runs.runs + wanted >= max_runs:
            room = max(0, max_runs - measured_runs.runs)
            return f"--max-runs {max_runs} reached", room
        return "", wanted
    return check
