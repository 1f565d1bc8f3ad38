"""The words every part of the loop shares: an iteration's status, the failures, the kind of
a run and its key, and how numbers are written for people. Imports nothing of the loop, so
the engine, the views and the commands all use one definition.

One story everywhere:
  * kept: changes kept after the baseline. The baseline row keeps status `keep` in
    results.tsv (karpathy/autoresearch's convention) but is never counted as a kept change,
    and its MLflow child run is tagged `status=baseline`. So commits on the branch after its
    start = `keep` rows after the baseline = child runs tagged `status=keep` = `kept`.
  * gain: how much better than the best before, in the metric's units, positive = better,
    whatever the metric's direction. The console, judge reasons, report, commit messages,
    results.tsv and MLflow all show this one number under this one name.
  * numbers: 6 significant digits for metric values, 4 for gains."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

BASELINE = "baseline (unmodified code)"     # the baseline's description
# Said wherever the metric is shown when no protected grader computes it (no `evaluate`, no
# `grader`): the number is whatever the edited script printed.
UNPROTECTED = "unprotected metric"


class _Word(str, Enum):
    """A word that is also its string: compares, hashes, formats and serialises as its value,
    so results.tsv, the journal and MLflow hold the same text as before it had a type."""

    def __str__(self) -> str:
        return self.value


class Status(_Word):
    """How an iteration or one run ended: one vocabulary. An iteration's status (results.tsv's
    `status` column, the journal, MLflow) is one of ITERATION_STATUSES; a run's (RunResult) is
    OK, STOPPED or a failure, whose words an iteration that failed takes as its own."""
    KEEP = "keep"
    DISCARD = "discard"
    CRASH = "crash"             # the run failed (exit code, killed, tampering)
    TIMEOUT = "timeout"         # killed at the time budget
    DIVERGED = "diverged"       # the metric is NaN or infinite
    NO_METRIC = "no_metric"     # exited 0 but printed no metric
    BAD_EDIT = "bad_edit"       # the proposal could not be applied: nothing ran
    # a run's, never an iteration's:
    OK = "ok"                   # the run ended and its metric was read
    STOPPED = "stopped"         # a candidate's run ended early by the stop rule
                                # (loop/run/early_stop.py): its record is a discard saying so


ITERATION_STATUSES = frozenset(Status) - {Status.OK, Status.STOPPED}

FAILURES = frozenset({Status.CRASH, Status.TIMEOUT, Status.DIVERGED, Status.NO_METRIC,
                      Status.BAD_EDIT})


class RunKind(_Word):
    CANDIDATE = "candidate"     # a run of an iteration's own commit (the baseline's too)
    REMEASURE = "remeasure"     # a re-run of the best between proposals
    PAIR = "pair"               # a run of the best beside one run of a candidate (paired judge)


# On disk a run is a number (seeds, log names, job ids): a candidate's run k is k, the best's
# re-runs count from 100, its runs beside a candidate from 150. Older journals and logs use
# the same numbers, so resume and `report` read them unchanged.
_BEST_FROM, _PAIR_FROM = 100, 150


@dataclass(frozen=True)
class RunKey:
    """One run of an iteration: its kind and its index among the runs of that kind.
    A pair's `beside` is the candidate's run it is measured next to."""
    kind: RunKind
    index: int
    beside: int = -1

    @classmethod
    def candidate(cls, k: int) -> RunKey:
        return cls(RunKind.CANDIDATE, k)

    @classmethod
    def best(cls, i: int) -> RunKey:
        return cls(RunKind.REMEASURE, i)

    @classmethod
    def pair(cls, i: int, beside: int) -> RunKey:
        return cls(RunKind.PAIR, i, beside)

    @property
    def number(self) -> int:
        """The run's number on disk: its seed offset and its log's name."""
        if self.kind is RunKind.CANDIDATE:
            return self.index
        return (_BEST_FROM if self.kind is RunKind.REMEASURE else _PAIR_FROM) + self.index

    def log_name(self, iteration: int) -> str:
        """iter-NNNN.log, iter-NNNN-runK.log, iter-NNNN-bestM.log (pairs: M from 50)."""
        if self.kind is RunKind.CANDIDATE:
            return f"iter-{iteration:04d}.log" if self.index == 0 else \
                f"iter-{iteration:04d}-run{self.index}.log"
        return f"iter-{iteration:04d}-best{self.number - _BEST_FROM}.log"

    def priority(self, iteration: int) -> tuple:
        """Lower runs first: the best's re-runs, then older iterations' runs in order, a
        pair's run of the best right before the candidate's run it is beside."""
        if self.kind is RunKind.REMEASURE:
            return (0, iteration, self.index, 0)
        if self.kind is RunKind.PAIR:
            return (1, iteration, self.beside, 0)
        return (1, iteration, self.index, 1)


# -- numbers and lines for people -------------------------------------------------------
def number_text(x: float | None, sig: int = 6) -> str:
    """A metric value, rounded for people (results.tsv keeps full precision)."""
    return "n/a" if x is None else f"{x:.{sig}g}"


def gain_text(x: float | None) -> str:
    return "" if x is None else f"gain {x + 0.0:+.4g}"     # + 0.0: no "-0" for a tie


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def is_baseline(rec) -> bool:
    return rec.description == BASELINE


def shown_status(rec) -> str:
    """What people are shown: the measured baseline is `baseline`, not a `keep`."""
    return "baseline" if is_baseline(rec) and rec.kept else rec.status


def kept_changes(records) -> int:
    """The one definition of `kept`: changes kept after the baseline."""
    return sum(1 for r in records if r.kept and not is_baseline(r))


def resume_line(tag: str, records, metric_name: str, best: float | None) -> str:
    changes = sum(1 for r in records if not is_baseline(r))
    failed = failed_baseline(records)
    if failed is not None:      # nothing to go on from: the baseline is what runs next
        return f"resume: tag {tag}, the baseline failed ({baseline_retry(failed)}); " \
               f"running it again"
    return (f"resume: tag {tag}, baseline and {plural(changes, 'iteration')} done, "
            f"{kept_changes(records)} kept, best {metric_name} = {number_text(best)}")


def failed_baseline(records):
    """The last try of the baseline when none succeeded (the loop then runs it again)."""
    if any(is_baseline(r) and r.kept for r in records):
        return None
    tries = [r for r in records if is_baseline(r)]
    return max(tries, key=lambda r: r.iteration) if tries else None


def baseline_retry(failed) -> str:
    return f"iteration {failed.iteration} failed, {failed.status}: {failed.reason}"


def commit_message(rec, metric) -> str:
    """An attempt's commit message: the description as subject, the numbers, then trailers."""
    before = "n/a" if rec.best_before is None else f"{rec.best_before:.6f}"
    after = "n/a" if rec.metric is None else f"{rec.metric:.6f}"
    gain = f", {gain_text(rec.delta)}" if rec.delta is not None else ""
    body = f"{metric.name} {before} -> {after}{gain} ({rec.status}: {rec.reason})"
    trailers = [f"Autoresearch-Iteration: {rec.iteration}",
                f"Autoresearch-Status: {rec.status}",
                f"Autoresearch-Metric: {metric.name} ({metric.direction})",
                f"Autoresearch-Before: {before}", f"Autoresearch-After: {after}",
                f"Autoresearch-Gain: {'n/a' if rec.delta is None else f'{rec.delta:+.6f}'}",
                f"Autoresearch-Runs: {len(rec.samples)}",
                f"Autoresearch-MLflow-Run: {rec.run_id}"]
    return f"{rec.description}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def progress_line(rec, metric, total: int) -> str:
    """One line per finished iteration on the console, the change shown as its gain."""
    value = "" if rec.metric is None else f"{metric.name} {number_text(rec.metric)}"
    change = f" ({gain_text(rec.delta)})" if rec.delta is not None else ""
    runs = f", {len(rec.samples)} runs" if len(rec.samples) > 1 else ""
    why = f", {rec.reason}" if rec.reason and rec.reason != "baseline" else ""
    proposed = (rec.usage or {}).get("proposal_s") or 0.0
    asked = f", proposal {proposed:.0f}s" if proposed >= 1 else ""  # an LLM's, mostly
    return (f"[{rec.iteration:>3}/{total}] {shown_status(rec):<9} {value}{change}  "
            f"{rec.description}  ({rec.wall_s:.1f}s{runs}{asked}{why})")
