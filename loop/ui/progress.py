"""What the loop shows on a terminal: `LiveProgress`, the engine's progress interface
(loop/engine/progress.py, whose `Progress` prints plain lines) with a live panel below the
lines, and `make_progress`, which picks one for the CLI to hand to the engine.

`LiveProgress` prints the same lines as `Progress` and keeps, below them, a live panel
redrawn by rich: one line per slot (iteration, description, run, elapsed against the
budget) and the night so far (best metric and its gain over the baseline, kept/discarded/
failed counts, runs per hour, tokens and cost)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from loop.engine.progress import Phase, Progress, run_label
from loop.words import FAILURES, gain_text, is_baseline, number_text


@dataclass
class _Slot:
    iteration: int
    description: str
    label: str
    budget_s: float
    total: int
    since: float
    phase: Phase
    grading_since: float | None = None

    def timing(self, now: float) -> str:
        """`training 12s / 70s`, `grading 3s / 300s`: the step, and the limit that applies
        to it (a run past its training limit while grading is not hung)."""
        grade_s, probe = self.phase.grade_s, self.phase.grading
        if grade_s is None:
            return f"{now - self.since:4.0f}s / {self.budget_s:g}s"
        if probe is None:
            return f"{now - self.since:4.0f}s / {self.budget_s + grade_s:g}s (train + grade)"
        if self.grading_since is None and probe():
            self.grading_since = now
        if self.grading_since is None:
            return f"training {now - self.since:4.0f}s / {self.budget_s:g}s"
        return f"grading {now - self.grading_since:4.0f}s / {grade_s:g}s"


class _Night:
    """The counters behind the live panel, fed by finished iterations."""

    def __init__(self):
        self.started = time.monotonic()
        self.metric_name = ""
        self.baseline = self.best = self.gain = None
        self.direction = "minimize"
        self.kept = self.discarded = self.failed = self.runs = 0
        self.tokens, self.cost = 0, 0.0

    def add(self, rec, metric, this_session: bool = True) -> None:
        self.metric_name = metric.name
        if this_session:        # runs per hour: the runs made since this start
            self.runs += max(1, len(rec.samples))
        usage = rec.usage
        self.tokens += int(usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        self.cost += float(rec.usage.get("cost_usd", 0.0))
        if is_baseline(rec):
            if rec.kept:
                self.baseline = rec.metric
        elif rec.kept:
            self.kept += 1
        elif rec.status in FAILURES:
            self.failed += 1
        else:
            self.discarded += 1
        if rec.best_after is not None:
            self.set_best(rec.best_after, metric.direction)

    def set_best(self, value: float, direction: str) -> None:
        """The best's value now (a keep, or a re-run of the best moving its mean). Until a
        change is kept the best is the baseline: its gain is 0, whatever re-runs drift to
        (as `status` reports it)."""
        self.best, self.direction = value, direction
        if not self.kept:
            self.baseline = value
        if self.baseline is not None:
            sign = -1.0 if direction == "minimize" else 1.0
            self.gain = sign * (self.best - self.baseline)

    def text(self) -> str:
        hours = max(time.monotonic() - self.started, 1.0) / 3600
        best = (" ".join(t for t in ("best", self.metric_name, number_text(self.best)) if t)
                + (f" ({gain_text(self.gain)} vs baseline)" if self.gain is not None else ""))
        llm = f" | {self.tokens:,} tokens, ${self.cost:.2f}" if self.tokens or self.cost else ""
        return (f"{best} | kept {self.kept}, discarded {self.discarded}, failed {self.failed} | "
                f"{self.runs / hours:.1f} runs/h{llm}")


class LiveProgress(Progress):
    """The plain lines scroll above a live panel that rich redraws in place."""

    def __init__(self, console=None):
        from rich.console import Console
        from rich.live import Live
        self.console = console or Console()
        self.slots: dict[int, _Slot] = {}
        self.asked: dict[int, float] = {}      # iteration -> since when its proposal is asked
        self.night = _Night()
        super().__init__(out=self.console.print)
        self.live = Live(self, console=self.console, refresh_per_second=2, transient=True)
        self.live.start()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def run_started(self, slot, rec, k, planned, budget_s, total, note="", phase=None) -> None:
        super().run_started(slot, rec, k, planned, budget_s, total, note, phase)
        run = "" if rec.status == "remeasure" else run_label(rec, k, planned)  # says it
        label = "; ".join(t for t in (run, note) if t)
        self.slots[slot] = _Slot(rec.iteration, rec.description, label, budget_s, total,
                                 time.monotonic(), phase or Phase())

    def run_finished(self, slot: int) -> None:
        self.slots.pop(slot, None)

    def best_measured(self, value: float) -> None:
        self.night.set_best(value, self.night.direction)

    def proposing(self, numbers: list[int]) -> None:
        now = time.monotonic()
        self.asked = {n: self.asked.get(n, now) for n in sorted(numbers)}

    def resumed(self, records, metric, best: float | None) -> None:
        """Counts from the journal (tokens and cost too); runs per hour from this start."""
        for rec in records:
            self.night.add(rec, metric, this_session=False)
        if best is not None:
            self.night.set_best(best, metric.direction)

    def iteration_done(self, rec, metric, total: int) -> None:
        self.night.add(rec, metric)
        super().iteration_done(rec, metric, total)

    def __rich__(self):
        """Called by rich at every refresh, so elapsed times tick on their own."""
        from rich.console import Group
        from rich.text import Text
        now = time.monotonic()
        lines = []
        for n, s in sorted(self.slots.items()):
            desc = s.description if len(s.description) <= 60 else s.description[:57] + "..."
            label = f" [{s.label}]" if s.label else ""
            lines.append(f"slot {n}  [{s.iteration:>3}/{s.total}] {s.timing(now)}  "
                         f"{desc}{label}")
        if self.asked:          # an LLM's answer can take minutes: not hung, waiting on it
            first = min(self.asked.values())
            which = ", ".join(map(str, self.asked))
            lines.append(f"proposing iteration{'s' if len(self.asked) > 1 else ''} {which} "
                         f"({now - first:.0f}s)")
        elif not self.slots:
            lines.append("(between runs)")
        lines.append(self.night.text())
        # one screen line each, cut with an ellipsis: a wrapped panel redraws badly
        return Group(*(Text(line, style="bold", no_wrap=True, overflow="ellipsis")
                       for line in lines))

    def close(self) -> None:
        self.live.stop()


def make_progress(stream=None) -> Progress:
    """Live on a terminal, plain lines otherwise (logs, CI, `| tee`)."""
    stream = stream or sys.stdout
    if stream.isatty():
        try:
            return LiveProgress()
        except ImportError:          # rich missing: plain lines still tell the story
            pass
    return Progress()
