"""What the loop shows while it runs. The engine calls four methods:

    run_started(slot, rec, k, planned, budget_s, total)  a run of an iteration begins
    run_finished(slot)                                   that run ended
    iteration_done(rec, metric, total)                   an iteration's record is final
    line(text)                                           any other message

`Progress` prints plain lines (logs, CI, a pipe): the `running` line of an iteration, one
line per extra run (baseline repeats, confirmations: which run of how many), the result
line. `LiveProgress` (a terminal) prints the same lines and keeps, below them, a live panel
redrawn by rich: one line per slot (iteration, description, run, elapsed against the
budget) and the night so far (best metric and its gain over the baseline, kept/discarded/
failed counts, runs per hour, tokens and cost)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from loop.words import FAILURES, gain_text, is_baseline, num, progress_line


def run_label(rec, k: int, planned: int | None) -> str:
    if rec.status == "remeasure":
        return "re-measuring the best"
    if planned is None or planned <= 1:
        return ""
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
                    total: int) -> None:
        if rec.status == "remeasure":   # before a proposal: say so, the run takes a while
            self.line(f"[{rec.iteration:>3}/{total}] re-measuring the best (another run of it)")
            return
        label = run_label(rec, k, planned)
        if k == 0:
            self.line(f"[{rec.iteration:>3}/{total}] running   {rec.description}"
                      + (f"  ({label})" if label and is_baseline(rec) else ""))
        else:   # a repeat: say so, or the console sits silent for a whole run
            self.line(f"[{rec.iteration:>3}/{total}] {label}")

    def run_finished(self, slot: int) -> None:
        pass

    def iteration_done(self, rec, metric, total: int) -> None:
        self.line(progress_line(rec, metric, total))

    def close(self) -> None:
        pass


@dataclass
class _Slot:
    iteration: int
    description: str
    label: str
    budget_s: float
    total: int
    since: float


class _Night:
    """The counters behind the live panel, fed by finished iterations."""

    def __init__(self):
        self.started = time.monotonic()
        self.metric_name = ""
        self.baseline = self.best = self.gain = None
        self.kept = self.discarded = self.failed = self.runs = 0
        self.tokens, self.cost = 0, 0.0

    def add(self, rec, metric) -> None:
        self.metric_name = metric.name
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
            self.best = rec.best_after
            if self.baseline is not None:
                sign = -1.0 if metric.direction == "minimize" else 1.0
                self.gain = sign * (self.best - self.baseline)

    def text(self) -> str:
        hours = max(time.monotonic() - self.started, 1.0) / 3600
        best = (f"best {self.metric_name} {num(self.best)}"
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
        self.night = _Night()
        super().__init__(out=self.console.print)
        self.live = Live(self, console=self.console, refresh_per_second=2, transient=True)
        self.live.start()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def run_started(self, slot, rec, k, planned, budget_s, total) -> None:
        super().run_started(slot, rec, k, planned, budget_s, total)
        self.slots[slot] = _Slot(rec.iteration, rec.description, run_label(rec, k, planned),
                                 budget_s, total, time.monotonic())

    def run_finished(self, slot: int) -> None:
        self.slots.pop(slot, None)

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
            lines.append(f"slot {n}  [{s.iteration:>3}/{s.total}] {now - s.since:4.0f}s / "
                         f"{s.budget_s:g}s  {desc}{label}")
        if not self.slots:
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
