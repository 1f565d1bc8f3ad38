"""Keep or restore, then record: a candidate whose status is final gets its mean and gain,
its attempt commit's message and the journal's `end`; a keep moves the branch, the main
worktree is restored to the tip, a discard's checkpoints are removed; its row, MLflow run
and result line follow. And what the baseline's runs tell the night: a noise floor when
they agree exactly, a hint when it failed. Decides nothing: the status is the state
machine's (loop/engine/lifecycle.py), and the order is resume-safe (journal, then branch)."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from loop.engine.budget import Stop
from loop.engine.lifecycle import Candidate
from loop.engine.parts import LoopParts
from loop.judge import judge as judging
from loop.setup.config import Config
from loop.record import Record, record_dict
from loop.words import commit_message, number_text


class Keeper:
    def __init__(self, parts: LoopParts):
        self.parts = parts

    def conclude(self, cand: Candidate) -> None:
        """Its mean, gain and the best after it; its commit message; the journal's `end`."""
        parts, rec, metric = self.parts, cand.rec, self.parts.task.metric
        if rec.samples:
            rec.metric = sum(rec.samples) / len(rec.samples)
        if rec.metric is not None and rec.best_before is not None:
            rec.delta = judging.improvement(rec.metric, rec.best_before, metric.direction)
        parts.score.add(rec)
        rec.best_after = parts.score.best_value()
        rec.run_id = parts.tracker.resolve(rec.run_id, rec.iteration)
        workspace = parts.setup.workspace
        if rec.attempt_ref:
            rec.commit = workspace.recommit(rec.commit, commit_message(rec, metric))
            rec.attempt_ref = workspace.keep_ref(f"attempt-{rec.iteration}", rec.commit)
        parts.setup.journal.write("end", **record_dict(rec))

    def keep_or_restore(self, rec: Record, tip: str) -> str:
        """A keep moves the branch to it; the main worktree shows the tip again. The tip."""
        setup = self.parts.setup
        config, workspace = setup.config, setup.workspace
        if rec.kept and rec.commit != tip:
            workspace.advance(rec.commit, tip)
            tip = rec.commit
        if rec.kept or config.workers == 1 or config.backend != "local":
            workspace.restore()     # the main worktree shows the tip (with one slot,
                                    # it is also where the run happened)
        if not rec.kept:   # a discarded attempt's checkpoints are not worth the disk
            for run_dir in (setup.dir / "runs").glob(f"{rec.iteration:04d}-*"):
                shutil.rmtree(run_dir, ignore_errors=True)
        return tip

    def record(self, cand: Candidate) -> None:
        """Its row in results.tsv, its MLflow run, its result line."""
        parts = self.parts
        parts.sink.add(cand.rec, cand.patch, cand.proposal)
        parts.setup.progress.iteration_done(cand.rec, parts.task.metric,
                                           parts.setup.config.iterations)

    def baseline_failed(self, rec: Record) -> Stop:
        log = self.parts.sink.log_path(rec.iteration)
        hint = self._failure_hint(log)
        return Stop("baseline", f"stopped: the baseline failed ({rec.status}: "
                                f"{rec.reason}); see {log}" + (f"\n{hint}" if hint else ""), 1)

    def _failure_hint(self, log: Path) -> str | None:
        """What check-task would say about the failed baseline: a file not committed (or
        ignored: `inputs:`), one the sandbox hides, a package the environment lacks."""
        from loop.advice import uncommitted
        from loop.run.spec import grade_log
        logs = "\n".join(p.read_text(errors="replace") for p in (log, grade_log(log))
                         if p.exists())
        setup, workspace = self.parts.setup, self.parts.setup.workspace
        try:
            return uncommitted.failure_hint(
                logs, setup.repo_root, setup.task_rel, self.parts.task, workspace.git,
                workspace.committed, [workspace.worktree], setup.sandbox == "bwrap",
                who="run")
        except Exception:     # a hint is a courtesy: never the reason a stop goes wrong
            return None

    def exact_note(self, values: list[float], quantum: float) -> str:
        """Runs of one version that all gave the same number: the judge sees no noise. What
        that means is said once, after the baseline, with the ways out."""
        task, setup = self.parts.task, self.parts.setup
        metric = task.metric.name
        seeded = task.flags and "$AUTORESEARCH_SEED" in (
            setup.workspace.worktree / setup.task_rel / task.flags).read_text(errors="replace")
        cause = (f"{metric} is printed to {number_text(quantum)}, coarser than its run-to-run noise"
                 if seeded else "the runs are deterministic (a fixed seed)")
        return (f"note: the baseline's {len(values)} runs all gave {metric} "
                f"{number_text(values[0])}: "
                f"{cause}, so the judge sees no noise; a gain must exceed one printed unit "
                f"({number_text(quantum)}: judge.min_delta for this night) to be kept; "
                + ("print more digits" if seeded else
                   "seed the script from $AUTORESEARCH_SEED (a seed flag in the flags file: "
                   "`seed: $AUTORESEARCH_SEED`)")
                + ", or set judge.min_delta to the smallest gain worth keeping")


def exact_runs(samples: list) -> tuple[list[float], float] | None:
    """(the runs, one printed unit) when every baseline run gave the same value: where the
    number is printed coarsely (`4.28`), a difference of one printed unit is no evidence."""
    values = [v for v in samples if isinstance(v, (int, float))]
    if len(values) < 2 or len(set(values)) > 1:
        return None
    return values, printed_unit(values[0])


def with_floor(config: Config, quantum: float) -> Config:
    """The night's judge with min_delta raised to one printed unit (never lowered)."""
    judge = config.judge
    if judge.min_delta < quantum:
        return replace(config, judge=replace(judge, min_delta=quantum))
    return config


def printed_unit(value: float) -> float:
    """One unit of the last digit `value` was printed with: 4.28 -> 0.01, 3 -> 1."""
    for k in range(0, 10):
        if abs(round(value, k) - value) <= 1e-12 * max(1.0, abs(value)):
            return 10.0 ** -k
    return 1e-10
