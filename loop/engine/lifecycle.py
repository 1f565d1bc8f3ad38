"""The life of one candidate (an iteration in flight), as a pure state machine.

Each event the engine sees about a candidate goes in; what to do next comes out. No I/O:
no git, journal, MLflow, clock or scheduler; the engine carries out each step and reports
back. The judge decides; this decides only what follows from its verdict.

    begin(tip, problem)            -> Finish (bad_edit) | Replay (its base moved) | Run
    ran(key, value, status, detail) -> None (runs still out) | Cancel | Judge | Finish
    forget(keys)                    -> None | Judge | Finish      (after Cancel)
    judged(verdict, tip, free)      -> Run | Replay | Finish
    replayed(commit, tip, verdict, why, notes, cannot_ask, repeats) -> Run | Repropose | Finish
                                    (commit None: its change does not apply to the tip)
    reproposed(commit, tip, verdict, why, description, problem, repeats) -> Run | Finish
                                    (commit None: the proposer's answer is not usable)

    Run(keys)        queue these runs (a pair's run of the best right before its partner)
    Cancel()         a run failed: drop this candidate's waiting runs, kill its running
                     ones, then call forget() with the keys dropped
    Judge()          every run is in: judge it against the best now (the record holds its
                     samples and pairs), then call judged()
    Replay(verdict)  make its change again on the tip, then call replayed()
    Repropose(..)    its change does not apply to the tip: ask the proposer again, on the
                     tip, for this iteration, then call reproposed()
    Finish(..)       the record's status and reason are final: settle it

Run numbers: a candidate's runs are 0, 1, 2, ... across replays and a new proposal (logs
and seeds stay unique); after either only the runs on the new base count (`first_on_base`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loop.record import Record
from loop.judge.judge import KEEP, RERUN, Verdict
from loop.words import RunKey, RunKind, Status

if TYPE_CHECKING:   # for the annotation only: the state machine imports no proposer
    from loop.proposers.base import Proposal


@dataclass(frozen=True)
class Run:
    keys: tuple[RunKey, ...]


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class Judge:
    pass


@dataclass(frozen=True)
class Replay:
    verdict: Verdict | None      # the would-be keep; None: the proposal's base moved


@dataclass(frozen=True)
class Repropose:
    verdict: Verdict | None      # as in Replay
    why: str                     # why its change does not apply to the tip
    repeats: int | None = None   # made again on the tip, it is this iteration's change: ask
                                 # for another change (not the same one again)


@dataclass(frozen=True)
class Finish:
    status: Status
    reason: str


Step = Run | Cancel | Judge | Replay | Repropose | Finish | None


@dataclass
class Candidate:
    rec: Record                  # the record so far; final at Finish
    baseline: bool = False
    proposal: Proposal | None = None   # what the proposer returned (logged with the record)
    patch: str = ""              # its diff against its base
    next_k: int = 0              # its next run's number
    first_on_base: int = 0       # its first run on the current base
    next_pair: int = 0           # its next run of the best beside it
    values: dict[int, float] = field(default_factory=dict)           # run k -> metric
    curves: dict[int, list] = field(default_factory=dict)            # run k -> its curve
    pair_best: dict[int, float | None] = field(default_factory=dict)  # k -> the best beside k
    runs_out: set[RunKey] = field(default_factory=set)               # runs not back yet
    failed: tuple[int, str, str] | None = None   # (k, status, detail) of its first failure
    stats: dict = field(default_factory=dict)    # the last verdict's numbers
    replayed_onto: str = ""
    asked_again: str = ""        # set when proposed again: what did not apply, and why
    notes: str = ""              # what differed on the tip when its change was made again
    # run k -> how it was measured when not at its own end (`on_timeout: last`: at the time box)
    at_time_box: dict[int, str] = field(default_factory=dict)

    @property
    def iteration(self) -> int:
        return self.rec.iteration

    def begin(self, tip: str, problem: str | None = None) -> Step:
        """Staged on its base (or not: `problem` says why it cannot run)."""
        if problem:
            return self._finish(Status.BAD_EDIT, problem)
        if self.rec.parent != tip:      # the best moved while it was proposed
            return Replay(None)
        return self._runs(1, paired=False)

    def ran(self, key: RunKey, value: float | None, status: str = "ok",
            detail: str = "", curve: list | None = None) -> Step:
        """A run came back: `value` None when it failed or was stopped early (`status`,
        `detail` say how); `curve` its loss over the budget, if the task prints one."""
        self.runs_out.discard(key)
        if key.kind is RunKind.PAIR:         # a failed run of the best leaves its pair out
            self.pair_best[key.beside] = value
        elif value is None:
            stopped = self.failed is not None and self.failed[1] == Status.STOPPED
            if self.failed is None or (key.index < self.failed[0] and not stopped):
                self.failed = (key.index, status, detail)   # a stop's reason is kept: the
                                                            # runs it cancelled end as kills
            return Cancel()                  # its other runs are not needed now
        else:
            self.values[key.index] = value
            self.curves[key.index] = curve or []
            if detail:               # a measured run's detail: scored at the time box
                self.at_time_box[key.index] = detail
        return self.settle()

    def forget(self, keys: set[RunKey]) -> Step:
        """Runs dropped before they started (after Cancel)."""
        self.runs_out -= keys
        return self.settle()

    def settle(self) -> Step:
        """None while runs are out; else finish a failure or ask for the verdict."""
        if self.runs_out:
            return None
        rec = self.rec
        rec.samples = [self.values[k] for k in sorted(self.values)]
        rec.pairs = [[self.values[k], b] for k, b in sorted(self.pair_best.items())
                     if k in self.values and b is not None]
        rec.curves = [self.curves[k] for k in sorted(self.values)] \
            if any(self.curves.values()) else []
        if self.failed:
            k, status, detail = self.failed
            if status == Status.STOPPED:       # clearly worse: decided by the rule, not a failure
                rec.stats = {**self.stats, "stopped_runs": 1}
                return self._finish(Status.DISCARD, detail)
            if self.baseline or k == self.first_on_base:      # its first run: that is its status
                return self._finish(Status(status), detail)
            rec.stats = self.stats
            return self._finish(Status.DISCARD, f"confirmation run: {status}")
        return Judge()

    def judged(self, verdict: Verdict, tip: str, free: int) -> Step:
        """The verdict on its runs against the best now; `free`: slots nothing will take."""
        if not self.baseline:
            self.stats = verdict.stats
        if verdict.action == RERUN:            # as many as free slots allow, at least one
            share = free // 2 if verdict.paired else free
            return self._runs(max(1, min(verdict.runs, share)), verdict.paired)
        if verdict.action == KEEP and not self.baseline and self.rec.parent != tip:
            return Replay(verdict)
        reason = verdict.reason
        if self.asked_again:
            reason = (f"proposed again on {self.replayed_onto[:7]} ({self.asked_again}): "
                      f"{reason}")
        elif self.replayed_onto:
            notes = f" ({self.notes})" if self.notes else ""
            reason = f"replayed onto {self.replayed_onto[:7]}{notes}: {reason}"
        if not self.baseline:
            self.rec.stats = verdict.stats
        return self._finish(Status(verdict.action), reason)

    def replayed(self, commit: str | None, tip: str, verdict: Verdict | None,
                 why: str = "", notes: str = "", cannot_ask: str = "",
                 repeats: int | None = None) -> Step:
        """Its change made again on the tip as `commit` (`notes`: what differed there),
        measured again there from scratch (a gain on an older base is not a gain on the new
        one). None: the change does not apply there (`why`): the proposer is asked again on
        the tip, once, unless `cannot_ask` says why not; else a discard that says so.
        `repeats`: made again, it is that iteration's change on the tip (never run twice):
        a would-be keep ends, its idea measured there; one that never ran is asked again."""
        if repeats is not None and verdict:
            self.rec.stats = verdict.stats
            return self._finish(Status.DISCARD, (
                f"would be kept ({verdict.reason}), but made again on the best now {tip[:7]} "
                f"it is iteration {repeats}'s change, measured there"))
        if commit is None or repeats is not None:
            if not cannot_ask and not self.asked_again:
                return Repropose(verdict, why, repeats)
            self.rec.stats = verdict.stats if verdict else {}
            end = cannot_ask or "it was proposed again once already"
            return self._finish(Status.DISCARD,
                                f"{self._lost(verdict, tip, why, repeats)}; {end}")
        self.notes = notes
        return self._moved(commit, tip)

    def reproposed(self, commit: str | None, tip: str, verdict: Verdict | None, why: str,
                   description: str = "", problem: str = "",
                   repeats: int | None = None) -> Step:
        """The proposer, asked again on `tip` (see Repropose), answered `commit` (None: no
        usable change, `problem` says why)."""
        if commit is None:
            self.rec.stats = verdict.stats if verdict else {}
            # an idea measured better is a discard (not the code's failure); one that never
            # ran is the proposer's bad edit, like any other proposal
            return self._finish(Status.DISCARD if verdict else Status.BAD_EDIT,
                                f"{self._lost(verdict, tip, why, repeats)}; proposed again, "
                                f"no usable change: {problem}")
        self.asked_again = (f"{self.rec.description!r} was iteration {repeats}'s change there"
                            if repeats is not None else
                            f"{self.rec.description!r} did not apply there ({why})")
        self.notes = ""
        if description:
            self.rec.description = description
        return self._moved(commit, tip)

    def _lost(self, verdict: Verdict | None, tip: str, why: str,
              repeats: int | None = None) -> str:
        base = self.rec.parent[:7]
        if verdict:
            return (f"would be kept ({verdict.reason}), but its change does not apply to the "
                    f"best kept since its base {base} ({why})")
        if repeats is not None:
            return (f"its base {base} was replaced by a new best {tip[:7]} before it ran, "
                    f"where it is iteration {repeats}'s change")
        return (f"its base {base} was replaced by a new best {tip[:7]} before it ran, and "
                f"its change does not apply there ({why})")

    def _moved(self, commit: str, tip: str) -> Run:
        rec = self.rec
        rec.commit, rec.parent, rec.samples, rec.pairs = commit, tip, [], []
        self.values, self.pair_best, self.curves, self.at_time_box = {}, {}, {}, {}
        self.first_on_base, self.replayed_onto = self.next_k, tip
        return self._runs(1, paired=False)

    def _runs(self, count: int, paired: bool) -> Run:
        keys: list[RunKey] = []
        for _ in range(count):
            k, self.next_k = self.next_k, self.next_k + 1
            if paired:      # the best runs in the same period as the candidate's run k
                keys.append(RunKey.pair(self.next_pair, beside=k))
                self.next_pair += 1
            keys.append(RunKey.candidate(k))
        self.runs_out.update(keys)
        return Run(tuple(keys))

    def _finish(self, status: Status, reason: str) -> Finish:
        reason += self._time_box_note() if status in (Status.KEEP, Status.DISCARD) else ""
        # plain strings in the record: every serialiser sees what it saw before
        self.rec.status, self.rec.reason = status.value, reason
        return Finish(status, reason)

    def _time_box_note(self) -> str:
        """`; val_loss 2.48 at the time box (last printed value, line 40, step 2100)`: its
        runs scored from their last print, said in its reason (results.tsv, MLflow)."""
        said = [self.at_time_box[k] for k in sorted(self.values) if k in self.at_time_box]
        if not said:
            return ""
        if len(self.values) == 1:
            return f"; {said[0]}"
        return f"; {len(said)} of {len(self.values)} runs scored at the time box, e.g. {said[-1]}"
