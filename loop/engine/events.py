"""What comes back to the main thread: a run ended, or a proposal is ready. Only the data;
the scheduler and the proposal queue put them on one queue, the loop takes them off."""
from __future__ import annotations

from dataclasses import dataclass

from loop.run.runner import RunResult
from loop.run.spec import RunJob


@dataclass(frozen=True)
class RunEnded:
    """A run finished (or failed, or was killed) on its slot; `result` is the backend's."""
    job: RunJob
    result: RunResult


@dataclass(frozen=True)
class ProposalReady:
    """The proposer answered (or failed) for this iteration; the proposal queue has it."""
    iteration: int


Event = RunEnded | ProposalReady
