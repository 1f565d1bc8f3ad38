"""What the proposer is shown and what its answer must pass: the prompt context (the best's
files, every attempt so far, those in flight), the steering file program.md, and the checks
on a proposal: `received` as it comes from any proposer (the boundary with untrusted text,
loop/untrusted.py), `check` before it is staged."""
from __future__ import annotations

import hashlib
from pathlib import Path

from loop.kinds import PROPOSER_KINDS
from loop.judge import judge as judging
from loop.record import Record
from loop.proposers.base import Attempt, Context, Proposal, Redo
from loop.proposers.tried import ChangeKey, key_of_patch
from loop.untrusted import DESCRIPTION_MAX, REASON_MAX, canonical_path, clean, one_line
from loop.words import BASELINE, FAILURES

TAIL_MAX = 4000     # a failed run's log tail in the next prompt (read as its last 3000 bytes)


def received(proposal: Proposal) -> Proposal:
    """A proposal as it comes from a proposer (any: a reply's text is the model's), made
    safe once, before anything records it: its description and error one clean line each,
    capped (loop/untrusted.py), every file path in its one spelling. A path no edit may
    name, or text that is not text, makes the proposal a failed edit (its `error`)."""
    proposal.description = one_line(proposal.description, DESCRIPTION_MAX)
    proposal.proposer = one_line(proposal.proposer, 100)
    problems = [] if proposal.error is None else [proposal.error]
    files: dict[str, str] = {}
    for rel, text in proposal.files.items():
        try:
            path = canonical_path(rel)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if not isinstance(text, str):
            problems.append(f"{path}: its new content is not text")
        elif path in files and files[path] != text:
            problems.append(f"{path}: two different new contents (under two spellings)")
        files[path] = text if isinstance(text, str) else ""
    proposal.files = files
    if problems:
        proposal.error = one_line("; ".join(problems), REASON_MAX)
    return proposal


class PromptContext:
    def __init__(self, workspace, task, task_rel: str, program_path: Path, seed: int,
                 proposer_kind: str, out):
        self.workspace, self.task, self.task_rel = workspace, task, task_rel
        self.program_path, self.seed = program_path, seed
        self.proposer_kind, self.out = proposer_kind, out
        self._program_sha: str | None = None   # the program.md the last iteration read
        # a commit's files never change: read each once (the tip is read for every context,
        # and again to check a proposal made on it); a few recent commits are enough
        self._seen: dict[str, dict[str, str | None]] = {}
        self._listed: dict[str, list[str]] = {}
        self._keys: dict[str, ChangeKey] = {}   # attempt commit -> what its diff did

    def _list(self, commit: str) -> list[str]:
        if commit not in self._listed:
            self._forget(self._listed)
            self._listed[commit] = self.workspace.list_at(commit, self.task_rel)
        return self._listed[commit]

    def _read(self, commit: str, paths: list[str]) -> dict[str, str]:
        """Like Workspace.read_at (absent files skipped), each file read once."""
        if commit not in self._seen:
            self._forget(self._seen)
        known = self._seen.setdefault(commit, {})
        missing = [p for p in paths if p not in known]
        if missing:
            got = self.workspace.read_at(commit, self.task_rel, missing)
            known.update({p: got.get(p) for p in missing})
        return {p: text for p in paths if (text := known[p]) is not None}

    @staticmethod
    def _forget(cache: dict) -> None:
        while len(cache) >= 8:
            del cache[next(iter(cache))]

    def program(self) -> tuple[str, str]:
        """program.md's text and short hash ("none" when there is none)."""
        try:
            text = self.program_path.read_text()
        except OSError:
            return "", "none"
        return text, hashlib.sha256(text.encode()).hexdigest()[:12]

    def editable(self, commit: str) -> dict[str, str]:
        """The editable files as of `commit`: path -> text."""
        return self._read(commit, [p for p in self._list(commit) if self.task.is_editable(p)])

    def build(self, n: int, program: str, tip: str, records: list[Record],
              in_flight: list[Record], score, tail, redo: Redo | None = None) -> Context:
        """What the proposer sees: the best's files (the main worktree is always the tip),
        every finished attempt, and those in flight or queued (status `running`), so that
        proposals made ahead do not repeat them. `tail(rec)`: the end of a run's log;
        `redo`: a change to make again on the tip (it no longer applies there)."""
        files = self.editable(tip)
        done = sorted(records, key=lambda r: r.iteration)
        failures = [r for r in done if r.status in FAILURES][-2:]
        history = [Attempt(r.iteration, r.description, r.status, r.metric, r.delta, r.reason,
                           clean(tail(r), TAIL_MAX) if r in failures else "", self._key(r))
                   for r in done if r.description != BASELINE]
        history += [Attempt(r.iteration, r.description, "running", None, None,
                            change=self._key(r)) for r in in_flight]
        return Context(n, self.task, files, program, history, score.best_value(),
                       self.seed + n, judging.estimate_noise(score.history), redo)

    def _key(self, rec: Record) -> ChangeKey | None:
        """What an attempt's diff did (read once per attempt commit), so that the proposer
        can refuse a proposal that repeats it; None when it was never staged."""
        if not (rec.commit and rec.parent) or rec.commit == rec.parent:
            return None
        if rec.commit not in self._keys:
            self._keys[rec.commit] = key_of_patch(self.workspace.diff(rec.parent,
                                                                      rec.commit)[0])
        return self._keys[rec.commit]

    def check(self, proposal: Proposal, base: str) -> str | None:
        """Why a proposal cannot be staged (a `bad_edit`), or None."""
        if not proposal.files:
            return "the proposal changes nothing"
        for rel in proposal.files:
            reason = self.task.check_edit_path(rel)
            if reason:
                return reason
            if "\x00" in proposal.files[rel]:
                return f"{rel}: binary content"
        present = self._list(base)
        for rel in map(canonical_path, proposal.files):
            reason = None if rel in present else self.task.check_new_path(rel, present)
            if reason:
                return reason
        current = self._read(base, list(proposal.files))
        if all(current.get(p) == t for p, t in proposal.files.items()):
            return "the edit changes nothing"
        return None

    def note_steering(self, n: int, sha: str, records: list[Record]) -> None:
        """One line when program.md changed since the last iteration that read it."""
        last = self._program_sha or next(
            (r.program_sha for r in sorted(records, key=lambda r: -r.iteration)
             if r.program_sha), None)
        self._program_sha = sha
        if last and sha != last:
            who = (f" (the {self.proposer_kind} proposer does not read it)"
                   if not PROPOSER_KINDS[self.proposer_kind].asks_an_llm else "")
            self.out(f"steering: {self.program_path.name} changed ({last} -> {sha}); "
                     f"iteration {n} is the first to use it{who}")
