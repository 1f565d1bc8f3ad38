"""One finished iteration, as the journal keeps it and results.tsv, MLflow, `status` and the
judge's scoreboard read it. A data type only: no I/O (loop/state/journal.py writes and
replays it), nothing above loop/words.py imported."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from loop.words import ITERATION_STATUSES, Status

_STATUSES = {s.value for s in ITERATION_STATUSES}


@dataclass
class Record:
    """One finished iteration: everything results.tsv, MLflow and `status` show."""
    iteration: int
    status: Status | str         # a Status; only the engine's rows of runs in flight say
                                 # "running", and a remeasure's "remeasure" (never journalled
                                 # as an iteration's end)
    description: str
    metric: float | None = None  # the candidate's value (mean over its runs)
    samples: list[float] = field(default_factory=list)
    best_before: float | None = None
    best_after: float | None = None
    delta: float | None = None   # improvement over best_before (positive = better)
    reason: str = ""
    commit: str = ""             # the kept commit or the attempt commit ("" if nothing ran)
    attempt_ref: str = ""
    parent: str = ""
    run_id: str = ""
    memory_gb: float | None = None
    wall_s: float = 0.0
    lines_added: int = 0
    lines_removed: int = 0
    program_sha: str = ""
    seed: int = 0
    stats: dict = field(default_factory=dict)
    pairs: list = field(default_factory=list)  # [candidate, best] runs made side by side
    throughput: list = field(default_factory=list)  # per run, from task.throughput_pattern
    curves: list = field(default_factory=list)  # per run in samples, its progress_pattern
                                                # curve [[share of budget, loss], ...]
    usage: dict = field(default_factory=dict)
    time: float = 0.0
    proposer: str = ""           # who proposed it: mutate | tune | llm ("" for the baseline)

    def __post_init__(self):
        # the journal holds the word (JSON has no enum): read back, it is the Status again
        if isinstance(self.status, str) and self.status in _STATUSES:
            self.status = Status(self.status)

    @property
    def kept(self) -> bool:
        return self.status == Status.KEEP


def record_dict(rec: Record) -> dict:
    """The record as the journal's `end` event holds it (JSON: a Status is its word)."""
    return asdict(rec)
