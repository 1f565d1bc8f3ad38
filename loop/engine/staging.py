"""Staging a change as an attempt commit, the one way every change is made: committed on a
base (a proposal's files, or a candidate's change made again on a new best), compared with
every change in flight or judged on that base (a change is never run twice), then adopted
by its candidate (the attempt ref, the best before it, its diff). Journals nothing and
decides nothing: the loop says what follows."""
from __future__ import annotations

from dataclasses import dataclass

from loop.edits.hunks import hunks
from loop.engine.flight import InFlight
from loop.engine.lifecycle import Candidate
from loop.engine.parts import LoopParts
from loop.proposers.base import Proposal
from loop.proposers.change import Change, ChangeFailed, redo
from loop.repo.gitsafe import GitError
from loop.run.faults import is_disk_full
from loop.setup.search_space import SpaceError, parse_space
from loop.untrusted import one_line


@dataclass(frozen=True)
class Staged:
    commit: str = ""              # the attempt commit; "" when there is none
    problem: str | None = None    # why there is none (a proposal's bad edit, a change that
                                  # does not apply on the new best)
    repeats: int | None = None    # on this base it is exactly this iteration's change
    notes: str = ""               # made again: what differed on the new base


class Stager:
    def __init__(self, parts: LoopParts, flight: InFlight):
        self.parts, self.flight = parts, flight
        self.workspace, self.task_rel = parts.setup.workspace, parts.setup.task_rel

    def proposal(self, n: int, base: str, proposal: Proposal) -> Staged:
        """A proposal for iteration n on `base`. Git refusing what it wrote (a path, a file)
        is that attempt's bad_edit, never the night's stop; a full disk still stops it."""
        problem = proposal.error or self.parts.prompt.check(proposal, base)
        if problem:
            return Staged(problem=problem)
        try:
            return self._stage(n, base, proposal.files, proposal.description)
        except GitError as exc:
            if is_disk_full(exc):
                raise
            return Staged(problem=f"git refused the change: {one_line(exc.first_line(), 300)}")

    def remake(self, cand: Candidate, tip: str) -> Staged:
        """The candidate's change made again on `tip` (the same constants set, the same
        edits applied); `problem` says why it does not apply there."""
        try:
            made = redo(self._change(cand), self.parts.prompt.editable(tip), self.parts.task,
                        self._space())
        except ChangeFailed as exc:
            return Staged(problem=str(exc))
        staged = self._stage(cand.iteration, tip, made.files,
                             self.workspace.message(cand.rec.commit))
        return Staged(staged.commit, None, staged.repeats, "; ".join(made.notes))

    def adopt(self, cand: Candidate, base: str, commit: str) -> None:
        """`commit` is the candidate's attempt now: its ref, the best it is measured against,
        its diff against `base`."""
        rec = cand.rec
        rec.attempt_ref = self.workspace.keep_ref(f"attempt-{rec.iteration}", commit)
        rec.best_before = self.parts.score.best_value()
        cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(base, commit)

    def keep_old(self, cand: Candidate) -> None:
        """Its attempt on the old base stays reachable (attempt-<n>-on-<base>)."""
        rec = cand.rec
        self.workspace.keep_ref(f"attempt-{rec.iteration}-on-{rec.parent[:7]}", rec.commit)

    def _stage(self, n: int, base: str, files, message: str) -> Staged:
        commit = self.workspace.stage_on(base, self.task_rel, files, message)
        return Staged(commit, repeats=self._same_change(n, base, commit))

    def _same_change(self, n: int, base: str, commit: str) -> int | None:
        """The iteration other than `n` whose change on `base` is exactly `commit`'s (same
        parent, same tree), in flight or judged; None when there is none. Told apart by
        iteration, not by commit: two answers staged within a second are the same commit."""
        others = [(c.iteration, c.rec.commit) for c in self.flight.others(n)
                  if c.rec.parent == base and c.rec.commit]
        others += [(r.iteration, r.commit) for r in self.parts.sink.records
                   if r.iteration != n and r.parent == base and r.commit and r.attempt_ref]
        if not others:
            return None
        others.sort()
        # the workspace remembers each commit's tree (loop/repo/commits.py): git is asked once
        tree, *trees = self.workspace.trees([commit, *(c for _, c in others)])
        return next((i for (i, _), t in zip(others, trees) if t == tree), None)

    def _change(self, cand: Candidate) -> Change:
        """The candidate's change as data: what its proposer said, else the hunks of its diff
        (a proposer that gives none, or a candidate left from before it was recorded)."""
        given = cand.proposal.change if cand.proposal is not None else None
        if given:
            return given
        rec = cand.rec
        paths = self.workspace.changed_paths(rec.parent, rec.commit, self.task_rel)
        return Change(edits=tuple(hunks(
            self.workspace.read_at(rec.parent, self.task_rel, paths),
            self.workspace.read_at(rec.commit, self.task_rel, paths))))

    def _space(self):
        try:
            return parse_space(self.parts.task.search_space or {}, "task.yaml")
        except SpaceError:          # check-task reports it; a replay only skips the check
            return {}
