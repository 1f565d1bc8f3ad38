"""The record sink: where a finished iteration's record goes besides the journal.
results.tsv (in iteration order: a row waits until every earlier one is written) and the
MLflow projection (queued and retried by the tracker), plus each run's log file name.

MLflow's writes for a record (a few hundred ms on SQLite) wait in `flush`'s queue until the
loop has nothing to start: they run while the next runs execute, not between one run
ending and the next starting. A kill before they are handed over loses nothing: the
journal has no `tracked` line for them, and the next start logs them."""
from __future__ import annotations

import threading
from pathlib import Path

from loop.state.journal import Journal
from loop.record import Record
from loop.proposers.base import Proposal
from loop.run.runner import read_tail
from loop.state.results import append_result, results_text, write_results
from loop.words import BASELINE, RunKey, kept_changes

# a candidate's runs are numbered below the best's runs (loop/words.py): its logs stop there
_MAX_RUNS = RunKey.best(0).number


class RecordSink:
    def __init__(self, state_dir: Path, metric_name: str, journal: Journal, tracker,
                 branch: str, params: dict, log_prompts: bool):
        self.dir = state_dir
        self.results_path = state_dir / "results.tsv"
        self.metric_name = metric_name
        self.journal = journal
        self.tracker = tracker                # MLflow, in the background (loop/state/tracking.py)
        self.records: list[Record] = []
        self.rows_written = 0                 # results.tsv holds iterations below this
        self._to_track: list[tuple] = []      # finished records MLflow has not been handed
        self._branch, self._params, self._log_prompts = branch, params, log_prompts
        # results.tsv is written by the tracker's thread too (`tracked`): the state guard
        # holds this while it compares, so the engine's own write is never "tampering"
        self.lock = threading.RLock()
        # results.tsv's text as last written, for the state guard at every run's end
        # (rebuilding it from every row grew with the night: 31 ms at 1000 rows)
        self._changes = 0                     # bumped whenever a row is written or rewritten
        self._text: tuple[tuple[int, int], str] | None = None

    def log_path(self, n: int, key: RunKey = RunKey.candidate(0)) -> Path:  # noqa: B008 (RunKey is frozen)
        return self.dir / "logs" / key.log_name(n)

    def tail(self, rec: Record) -> str:
        path = self.log_path(rec.iteration)
        return read_tail(path, 3000) if path.exists() else ""

    def rows(self) -> list[Record]:
        """The records results.tsv holds: in iteration order, up to the first gap."""
        by_iter = {r.iteration: r for r in self.records}
        return [by_iter[i] for i in range(self.rows_written)]

    def expected_results(self) -> str | None:
        """results.tsv's text as the engine last wrote it (None: not written yet)."""
        with self.lock:
            if not (self.results_path.exists() or self.records):
                return None
            key = (self.rows_written, self._changes)
            if self._text is None or self._text[0] != key:
                self._text = (key, results_text(self.metric_name, self.rows()))
            return self._text[1]

    def restore(self, records: list[Record]) -> None:
        """On resume: the journal's records, and results.tsv rewritten from them."""
        self._changes += 1
        self.records = records
        by_iter = {r.iteration: r for r in records}
        while self.rows_written in by_iter:
            self.rows_written += 1
        write_results(self.results_path, self.metric_name, self.rows())

    def add(self, rec: Record, patch: str = "", proposal: Proposal | None = None) -> None:
        """A finished record: its row (when every earlier one is in), then MLflow."""
        with self.lock:
            self.records.append(rec)
            by_iter = {r.iteration: r for r in self.records}
            while self.rows_written in by_iter:
                row = by_iter[self.rows_written]
                append_result(self.results_path, self.metric_name, row,
                              [by_iter[i] for i in range(self.rows_written + 1)])
                self.rows_written += 1
        self._to_track.append((rec, patch, proposal, kept_changes(self.records)))

    def flush(self) -> None:
        """Hand every finished record to MLflow, in the order they finished."""
        while self._to_track:
            self.track(*self._to_track.pop(0))

    def track(self, rec: Record, patch: str = "", proposal: Proposal | None = None,
              kept: int | None = None) -> None:
        """Project a finished record into MLflow, then journal that it is there. `kept`:
        kept changes when it finished (default: now)."""
        artifacts: dict[str, str | Path] = {"run.log": self.log_path(rec.iteration)}
        for k in range(1, _MAX_RUNS):       # every run, also those before a replay
            path = self.log_path(rec.iteration, RunKey.candidate(k))
            if not path.exists():
                break
            artifacts[f"run{k}.log"] = path
        if patch:
            artifacts["diff.txt"] = patch    # .txt: the MLflow UI previews it, not .patch
        if proposal and self._log_prompts:
            artifacts.update(proposal.artifacts)
        params = {"iteration": rec.iteration, "parent_commit": rec.parent,
                  "program_sha": rec.program_sha, "seed": rec.seed, **self._params}
        tags = {"git.branch": self._branch, "iteration": rec.iteration,
                "program_sha": rec.program_sha}
        if rec.proposer:
            tags["proposer"] = rec.proposer   # who proposed it (a hybrid night has two)
        if rec.description == BASELINE and rec.kept:
            tags["status"] = "baseline"   # not a kept change: `status=keep` runs = branch commits
        # queued and retried when MLflow is busy; journals `tracked` once it is in
        self.tracker.finish_iteration(rec, self.metric_name, params, tags, artifacts,
                                      kept_changes(self.records) if kept is None else kept)

    def tracked(self, n: int, run_id: str) -> None:
        """An iteration is in MLflow (called from the tracker's thread); a run created late
        replaces its pending id in the journal and results.tsv."""
        self.journal.write("tracked", iteration=n, run_id=run_id)
        with self.lock:
            for rec in self.records:
                if rec.iteration == n and rec.run_id != run_id:
                    rec.run_id = run_id
                    self._changes += 1
                    write_results(self.results_path, self.metric_name, self.rows())
