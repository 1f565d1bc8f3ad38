"""How the engine reports progress, and the plain-lines default (no terminal UI needed).

The engine (and finalize) call these methods on the `Progress` they are given; they never
import loop.ui. `Progress` prints plain lines (logs, CI, a pipe): the `running` line of an
iteration, one line per extra run (baseline repeats, confirmations: which run of how many),
the result line. loop/ui/progress.py's `LiveProgress` subclasses it with a live panel; the
CLI picks one and hands it to the engine.

    run_started(slot, rec, k, planned, budget_s, total, note=, phase=)
                                     a run of an iteration begins (k: its run on this commit;
                                     budget_s: training's limit; phase: see `Phase`)
    run_finished(slot)               that run ended
    iteration_done(rec, metric, total)   an iteration's record is final
    best_measured(value)             a re-run of the best moved the best's value
    proposing(numbers)               the iterations whose proposals are being asked for now
    resumed(records, metric, best)   the night so far, recovered from the journal
    line(text)                       any other message
    close()                          the night is over

It must not draw anything but lines: a panel is the UI's."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loop.words import is_baseline, progress_line


@dataclass
class Phase:
    """A run's two steps and the limit of each: training (its budget plus grace), then
    grading (`grade_timeout_s`). `grading()` says whether grading has begun; None where
    it cannot be seen from here (a remote backend): the run shows both limits added."""
    grade_s: float | None = None        # None: the task has no grading step
    grading: Callable[[], bool] | None = None


def run_label(rec, k: int, planned: int | None) -> str:
    if rec.status == "remeasure":
        return "re-measuring the best"
    if planned is None or planned <= 1:
        return f"run {k + 1}" if k else ""
    if is_baseline(rec):
        return f"run {k + 1} of {planned}"
    return f"run {k + 1} of up to {planned}" + (", confirming" if k else "")


class Progress:
    """Plain lines, as in a log file."""

    def __init__(self, out=None):
        self.out = out or (lambda text: print(text, flush=True))

    def line(self, text: str) -> None:
        self.out(text)

    def run_started(self, slot: int, rec, k: int, planned: int | None, budget_s: float,
                    total: int, note: str = "", phase: Phase | None = None) -> None:
        """`note`: why this run is not what it looks like (a baseline run again, a change
        replayed onto a new best, the best run beside a candidate's run)."""
        head = f"[{rec.iteration:>3}/{total}]"
        if rec.status == "remeasure":   # before a proposal: say so, the run takes a while
            self.line(f"{head} re-measuring the best ({note or 'another run of it'})")
            return
        label = run_label(rec, k, planned)
        if k == 0:
            notes = [t for t in (label if is_baseline(rec) else "", note) if t]
            self.line(f"{head} running   {rec.description}"
                      + "".join(f"  ({t})" for t in notes))
        else:   # a repeat: say so, or the console sits silent for a whole run
            self.line(f"{head} {label}" + (f" ({note})" if note else ""))

    def run_finished(self, slot: int) -> None:
        pass

    def best_measured(self, value: float) -> None:
        pass        # the engine's own line says it

    def resumed(self, records, metric, best: float | None) -> None:
        pass        # the resume line says it

    def proposing(self, numbers: list[int]) -> None:
        pass        # the `running` line follows

    def iteration_done(self, rec, metric, total: int) -> None:
        self.line(progress_line(rec, metric, total))

    def close(self) -> None:
        pass
