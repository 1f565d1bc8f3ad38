"""The append-only journal: one JSON line per step, the single source of truth for resume.

A step is announced (`begin`) before it happens and closed (`end`) after its git side is
final; results.tsv and MLflow are projections rebuilt from it."""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Record:
    """One finished iteration: everything results.tsv, MLflow and `status` show."""
    iteration: int
    status: str                  # keep | discard | crash | timeout | diverged | no_metric | bad_edit
    description: str
    metric: float | None = None  # the candidate's value (mean over its runs)
    samples: list = field(default_factory=list)
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
    usage: dict = field(default_factory=dict)
    time: float = 0.0

    @property
    def kept(self) -> bool:
        return self.status == "keep"


class TagLock:
    """One engine per tag: a second `run` of a running tag is refused, not interleaved."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = None

    def acquire(self) -> None:
        import fcntl
        from loop.errors import UsageError
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise UsageError(f"tag '{self.path.parent.name}' is already running ({holder}); "
                             f"stop it first or use another --tag") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file:
            self._file.close()   # closing drops the lock
            self._file = None


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def write(self, event: str, **data) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"event": event, "time": time.time(), **data}, default=str)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def events(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        with open(self.path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line torn by a crash mid-write: everything after it is suspect
        return out


@dataclass
class State:
    """What the journal says: the run's identity, finished records, a step left half-done."""
    start: dict | None = None
    records: list[Record] = field(default_factory=list)
    open_begins: dict = field(default_factory=dict)  # iteration -> its `begin` with no `end`
    untracked: list[int] = field(default_factory=list)  # ended but not yet in MLflow
    remeasures: list[dict] = field(default_factory=list)
    measured: list = field(default_factory=list)  # Records and remeasure events, in the order
                                                  # they were made (several run at once)
    dropped_cost: float = 0.0           # LLM cost of proposals made but never run

    @property
    def open_begin(self) -> dict | None:
        """The latest step left half-done, if any (one-slot view)."""
        return max(self.open_begins.values(), key=lambda b: b["iteration"], default=None)


def replay(events: list[dict]) -> State:
    state = State()
    tracked = set()
    fields = set(Record.__dataclass_fields__)
    for e in events:
        kind = e.get("event")
        if kind == "start" and state.start is None:
            state.start = e
        elif kind == "begin":
            state.open_begins[e["iteration"]] = dict(e)
        elif kind == "replay" and e["iteration"] in state.open_begins:
            state.open_begins[e["iteration"]].update(commit=e["commit"], parent=e["parent"])
        elif kind == "end":
            rec = Record(**{k: v for k, v in e.items() if k in fields})
            state.records = [r for r in state.records if r.iteration != rec.iteration] + [rec]
            state.measured = [m for m in state.measured
                              if not (isinstance(m, Record) and m.iteration == rec.iteration)]
            state.measured.append(rec)
            state.open_begins.pop(rec.iteration, None)
        elif kind == "abandon":
            state.open_begins.pop(e["iteration"], None)
        elif kind == "tracked":
            tracked.add(e["iteration"])
        elif kind == "remeasure":
            state.remeasures.append(e)
            state.measured.append(e)
        elif kind == "drop":
            state.dropped_cost += e.get("cost_usd", 0.0)
    state.untracked = [r.iteration for r in state.records if r.iteration not in tracked]
    return state


def record_dict(rec: Record) -> dict:
    return asdict(rec)
