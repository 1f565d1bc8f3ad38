"""The night's budgets: when the loop starts nothing new (wall clock, failures in a row, a
proposer failing the same way twice, LLM cost, a STOP file; the iterations are counted by
the loop), and the `Stop` that says why. What is in flight still finishes; this changes
nothing but the STOP file it consumes."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from loop.engine.scheduler import PROPOSER_BUG
from loop.setup.config import Config
from loop.record import Record
from loop.words import FAILURES, plural


@dataclass
class Stop:
    # iterations | wall_clock | failures | cost | stop_file | proposer | baseline |
    # disk_full | git | interrupted
    reason: str
    message: str
    exit_code: int = 0


def should_stop(config: Config, records: list[Record], cost: float, state: Path,
                started: float) -> Stop | None:
    """A budget spent (`started`: the loop's start, monotonic), or None."""
    if config.max_wall_s and time.monotonic() - started >= config.max_wall_s:
        return Stop("wall_clock", f"stopped: wall-clock budget of {config.max_wall_s:g}s spent")
    streak = 0
    for rec in reversed(records):
        if rec.status not in FAILURES:
            break
        streak += 1
    raised = [r.reason for r in records[-2:] if r.reason.startswith(PROPOSER_BUG)]
    if len(raised) == 2 and raised[0] == raised[1]:
        return Stop("proposer", f"stopped: the proposer failed twice in a row the same way "
                                f"({raised[-1]}): a bug, not a bad idea; nothing more can "
                                f"be proposed", 1)
    if streak >= config.max_consecutive_failures:
        return Stop("failures", f"stopped: {plural(streak, 'failure')} in a row "
                                f"(see {state / 'logs'})", 1)
    if config.max_cost_usd is not None and cost >= config.max_cost_usd:
        return Stop("cost", f"stopped: LLM cost ${cost:.2f} reached the budget "
                            f"${config.max_cost_usd:.2f}")
    stop_file = state / "STOP"
    if stop_file.exists():
        stop_file.unlink()
        return Stop("stop_file", f"stopped: {stop_file} was present")
    return None


def iterations_done(config: Config) -> Stop:
    return Stop("iterations", f"done: {plural(config.iterations, 'iteration')} after the baseline")
