"""The append-only journal: one JSON line per step, the single source of truth for resume.

A step is announced (`begin`) before it happens and closed (`end`) after its git side is
final; results.tsv and MLflow are projections rebuilt from it."""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loop.errors import UsageError
from loop.record import Record


class JournalDamaged(UsageError):
    """A journal line that is not the engine's (a hand edit, the experiment, a disk fault)
    before the last line: replaying past it would silently drop history."""


class Journal:
    """Appends are whole lines, fsynced. The engine keeps what it wrote in memory, so a
    change made behind its back (e.g. by an experiment) is detected and undone (`verify`)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()      # the tracking thread journals too
        self._expected: bytes | None = None  # the file as the engine last left it
        self.notes: list[str] = []         # repairs made while loading, to show the user

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def write(self, event: str, **data) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps({"event": event, "time": time.time(), **data}, default=str)
                + "\n").encode()
        with self._lock:
            with open(self.path, "ab") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            if self._expected is not None:
                self._expected += line

    def load(self) -> list[dict]:
        """The events, for the engine: a torn last line (a crash mid-write) is cut off,
        with a note; damage anywhere else raises JournalDamaged. From here on the engine
        owns the file's content (see `verify`)."""
        data = self.path.read_bytes() if self.path.exists() else b""
        events, good = parse(data, str(self.path))
        if good < len(data):
            torn = data[good:].decode("utf-8", "replace").strip()
            self.notes.append(f"journal: removed a torn last line ({len(data) - good} bytes: "
                              f"{torn[:60]!r}), left by an interrupted write")
            with open(self.path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
            data = data[:good]
        if data and not data.endswith(b"\n"):   # a whole last event, cut before its newline
            with open(self.path, "ab") as f:
                f.write(b"\n")
            data += b"\n"
        self._expected = data
        return events

    def events(self) -> list[dict]:
        """The events, read-only (status, report): a torn last line is ignored, since the
        engine may be writing it right now."""
        data = self.path.read_bytes() if self.path.exists() else b""
        return parse(data, str(self.path))[0]

    def verify(self) -> str | None:
        """Put the file back as the engine wrote it if anything else changed it; says what."""
        if self._expected is None:
            return None
        with self._lock:
            try:
                now = self.path.read_bytes()
            except OSError:
                now = None
            if now == self._expected:
                return None
            tmp = self.path.with_name(f".{self.path.name}.restore")
            tmp.write_bytes(self._expected)
            os.replace(tmp, self.path)
        what = "deleted" if now is None else f"changed ({len(now)} bytes, engine wrote " \
                                              f"{len(self._expected)})"
        return f"{self.path.name} was {what}; restored"


def parse(data: bytes, where: str = "journal") -> tuple[list[dict], int]:
    """Events in `data` and how many bytes of it are whole, valid lines. Only the last line
    may be bad (torn: no newline, or cut mid-JSON); a bad line before it raises."""
    events: list[dict] = []
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        last = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
        end = offset + len(raw) + (0 if number == len(lines) else 1)
        if raw.strip():
            event = _event(raw)
            if event is None:
                if last:                       # torn by a crash mid-write
                    return events, offset
                raise JournalDamaged(
                    f"{where}: line {number} is not a journal event ({raw[:60]!r}); the "
                    f"journal was edited or damaged. Fix or remove that line by hand (a "
                    f"copy of the file first), or start a new --tag")
            events.append(event)
        offset = end
    return events, offset


def _event(raw: bytes) -> dict | None:
    try:
        event = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    ok = isinstance(event, dict) and isinstance(event.get("event"), str)
    return event if ok else None


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
    tracked, run_ids = set(), {}
    fields = set(Record.__dataclass_fields__)
    for e in events:
        kind = e.get("event")
        if kind == "start" and state.start is None:
            state.start = dict(e)
        elif kind == "start_tracking" and state.start is not None:
            state.start["parent_run_id"] = e.get("parent_run_id")
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
            if e.get("run_id"):          # created late (MLflow was unreachable at `begin`)
                run_ids[e["iteration"]] = e["run_id"]
        elif kind == "remeasure":
            state.remeasures.append(e)
            state.measured.append(e)
        elif kind == "drop":
            state.dropped_cost += e.get("cost_usd", 0.0)
    for rec in state.records:
        rec.run_id = run_ids.get(rec.iteration, rec.run_id)
    state.untracked = [r.iteration for r in state.records if r.iteration not in tracked]
    return state

