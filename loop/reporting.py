"""What the engine reads and records besides git: the proposer's context, the checks on a
proposal, logs and seeds of each run, and the MLflow projection of a finished record.

A mixin of `loop.engine.Engine` (it uses the engine's fields); kept apart so that engine.py
reads as the loop."""
from __future__ import annotations

import hashlib
from pathlib import Path

from loop import judge as judging
from loop.journal import Record
from loop.proposers.base import Attempt, Context, Proposal
from loop.runner import read_tail
from loop.tracking import write_results
from loop.words import BASELINE, FAILURES, RunKey, kept_changes

# a candidate's runs are numbered below the best's runs (loop/words.py): its logs stop there
_MAX_RUNS = RunKey.best(0).number


class Reporting:
    # -- helpers --------------------------------------------------------------------
    def _seed(self, n: int, k: int) -> int:
        """A fresh, reproducible seed for run k of iteration n ($AUTORESEARCH_SEED)."""
        return self.config.seed + 1000 * n + k

    def best_value(self) -> float | None:
        return self.score.best_value()

    def _log_path(self, n: int, key: RunKey = RunKey.candidate(0)) -> Path:
        return self.dir / "logs" / key.log_name(n)

    def _program(self) -> tuple[str, str]:
        try:
            text = self.program_path.read_text()
        except OSError:
            return "", "none"
        return text, hashlib.sha256(text.encode()).hexdigest()[:12]

    def _context(self, n: int, program: str) -> Context:
        """What the proposer sees: the best's files (the main worktree is always the tip),
        every finished attempt, and those in flight or queued (status `running`), so that
        proposals made ahead do not repeat them."""
        files = self.workspace.read_at(self.tip, self.task_rel, [
            p for p in self.workspace.list_at(self.tip, self.task_rel) if self.task.is_editable(p)])
        done = sorted(self.records, key=lambda r: r.iteration)
        failures = [r for r in done if r.status in FAILURES][-2:]
        history = [Attempt(r.iteration, r.description, r.status, r.metric, r.delta, r.reason,
                           self._tail(r) if r in failures else "")
                   for r in done if r.description != BASELINE]
        history += [Attempt(c.rec.iteration, c.rec.description, "running", None, None)
                    for c in self.cands.values() if not c.baseline]
        return Context(n, self.task, files, program, history, self.score.best_value(),
                       self.config.seed + n, judging.estimate_noise(self.score.history))

    def _tail(self, rec: Record) -> str:
        path = self._log_path(rec.iteration)
        return read_tail(path, 3000) if path.exists() else ""

    def _check(self, proposal: Proposal, base: str) -> str | None:
        if not proposal.files:
            return "the proposal changes nothing"
        for rel in proposal.files:
            reason = self.task.check_edit_path(rel)
            if reason:
                return reason
            if "\x00" in proposal.files[rel]:
                return f"{rel}: binary content"
        current = self.workspace.read_at(base, self.task_rel, list(proposal.files))
        if all(current.get(p) == t for p, t in proposal.files.items()):
            return "the edit changes nothing"
        return None

    def _track(self, rec: Record, patch: str = "", proposal: Proposal | None = None) -> None:
        """Project a finished record into MLflow, then journal that it is there."""
        artifacts = {"run.log": self._log_path(rec.iteration)}
        for k in range(1, _MAX_RUNS):       # every run, also those before a replay
            path = self._log_path(rec.iteration, RunKey.candidate(k))
            if not path.exists():
                break
            artifacts[f"run{k}.log"] = path
        if patch:
            artifacts["diff.txt"] = patch    # .txt: the MLflow UI previews it, not .patch
        if proposal and self.config.proposer.log_prompts:
            artifacts.update(proposal.artifacts)
        params = {"iteration": rec.iteration, "parent_commit": rec.parent,
                  "program_sha": rec.program_sha, "seed": rec.seed,
                  "proposer": self.config.proposer.kind, "model": self.config.proposer.model,
                  "time_budget_s": self.task.time_budget_s}
        tags = {"git.branch": self.workspace.branch, "iteration": rec.iteration,
                "program_sha": rec.program_sha}
        if rec.description == BASELINE and rec.kept:
            tags["status"] = "baseline"   # not a kept change: `status=keep` runs = branch commits
        # queued and retried when MLflow is busy; journals `tracked` once it is in
        self.tracker.finish_iteration(rec, self.task.metric.name, params, tags, artifacts,
                                      kept_changes(self.records))

    def _tracked(self, n: int, run_id: str) -> None:
        """An iteration is in MLflow (called from the tracker's thread); a run created late
        replaces its pending id in the journal and results.tsv."""
        self.journal.write("tracked", iteration=n, run_id=run_id)
        for rec in self.records:
            if rec.iteration == n and rec.run_id != run_id:
                rec.run_id = run_id
                write_results(self.results_path, self.task.metric.name, self._rows())

    def _rows(self) -> list[Record]:
        """The records results.tsv holds: in iteration order, up to the first gap."""
        by_iter = {r.iteration: r for r in self.records}
        return [by_iter[i] for i in range(self.rows_written)]

