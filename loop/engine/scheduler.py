"""Queues: the runs waiting for a backend's slot, and the proposals requested ahead of time.
Decides no keep; runs nothing itself and gives no slot its device (a backend does both, see
loop/run/backends/).

Runs are served in priority order: re-runs of the best state first, then the runs of
candidates already in flight (oldest iteration first: their confirmation runs and the
baseline's repeats), and only then a new candidate's first run."""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from loop.engine.context import received
from loop.engine.events import Event, ProposalReady, RunEnded
from loop.proposers.base import Proposal, ProposerFatal
from loop.run.spec import RunJob

PROPOSER_BUG = "proposer raised "    # a proposer's exception, not a bad edit (engine.py stops
                                     # a night on two alike in a row)


class Scheduler:
    """Runs waiting for a slot, handed to the backend as slots free up; finished runs come
    back as events on one queue, which also carries the proposal queue's events."""

    def __init__(self, backend):
        self.backend = backend
        self.pending: list[RunJob] = []     # by the run key's priority (loop/words.py)
        self.running: dict[str, RunJob] = {}
        self.events: queue.Queue = queue.Queue()
        self.on_start = None            # called with each job as it gets a slot

    def add(self, job: RunJob) -> None:
        self.pending.append(job)
        self.pending.sort(key=lambda j: j.priority)

    def dispatch(self) -> None:
        while self.pending and self.backend.free() > 0:
            job = self.pending.pop(0)
            lanes = {j.lane for j in self.running.values()}
            job.lane = next(i for i in range(len(lanes) + 1) if i not in lanes)
            self.running[job.job_id] = job
            if self.on_start:
                self.on_start(job)
            self.backend.submit(job, lambda j, r: self.events.put(RunEnded(j, r)))

    def free(self) -> int:
        """Slots that nothing running or waiting will take."""
        return self.backend.free() - len(self.pending)

    def busy(self) -> bool:
        return bool(self.pending or self.running)

    def finished(self, job: RunJob) -> None:
        self.running.pop(job.job_id, None)

    def drop_where(self, match: Callable[[RunJob], bool]) -> list[RunJob]:
        """Forget the waiting runs that `match`; returns them."""
        dropped = [j for j in self.pending if match(j)]
        self.pending = [j for j in self.pending if not match(j)]
        return dropped

    def drop_all(self) -> list[RunJob]:
        """Forget every waiting run; returns them."""
        dropped, self.pending = self.pending, []
        return dropped

    def cancel(self, match: Callable[[RunJob], bool]) -> None:
        """Kill the running runs that `match` (each comes back as a RunEnded)."""
        for job in list(self.running.values()):
            if match(job):
                self.backend.cancel(job.job_id)

    def cancel_all(self) -> None:
        self.cancel(lambda job: True)

    def next_event(self, timeout: float = 0.5) -> Event | None:
        """The next event, or None after `timeout` (so Ctrl-C is seen promptly)."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None


class ProposalQueue:
    """Proposals requested ahead, `concurrency` at a time, each against the best at request
    time (its base). A proposal whose base has moved when it starts is replayed onto the
    new best (see docs/design.md). A proposer bug costs that proposal (an error Proposal);
    ProposerFatal stops the loop when the proposal is taken.

    Each request runs on a daemon thread of its own (not a ThreadPoolExecutor, whose
    workers the interpreter joins at exit: Ctrl-C then waited for an LLM request to time
    out). `drop_all(wait=False)` cancels the requests in flight (the proposer shuts their
    connections); `when_idle` runs a callback once no request runs any more: the engine
    releases the tag's lock there, so a second engine never starts beside a request."""

    def __init__(self, proposer, concurrency: int, events: queue.Queue):
        self.proposer = proposer
        self.slots = threading.Semaphore(max(1, concurrency))
        self.events = events
        self._items: dict[int, tuple] = {}  # iteration -> (base, program_sha, future)
        self._lock = threading.Lock()
        self._live = 0                      # threads not yet ended
        self._idle: list = []               # callbacks for when none is live

    def request(self, n: int, base: str, program_sha: str, context) -> None:
        future: Future = Future()
        self._items[n] = (base, program_sha, future)
        future.add_done_callback(lambda f: self.events.put(ProposalReady(n)))
        with self._lock:
            self._live += 1
        threading.Thread(target=self._run, args=(future, context), daemon=True,
                         name=f"propose-{n}").start()

    def _run(self, future: Future, context) -> None:
        try:
            with self.slots:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(self._call(context))
                    except BaseException as exc:   # ProposerFatal, re-raised by take()
                        future.set_exception(exc)
        finally:
            with self._lock:
                self._live -= 1
                ready = self._idle if self._live == 0 else []
                if ready:
                    self._idle = []
            for callback in ready:
                callback()

    def when_idle(self, callback) -> None:
        """Call `callback` once no request runs (now, if none does)."""
        with self._lock:
            if self._live:
                self._idle.append(callback)
                return
        callback()

    def _call(self, context) -> Proposal:
        started = time.monotonic()
        try:
            proposal = self.proposer.propose(context)
        except ProposerFatal:
            raise
        except Exception as exc:     # a proposer bug costs an iteration, not the night
            proposal = Proposal("proposer error",
                                error=f"{PROPOSER_BUG}{type(exc).__name__}: {exc}")
        proposal.usage.proposal_s += time.monotonic() - started   # results.tsv, MLflow
        return received(proposal)      # nothing downstream sees the proposer's raw text

    def __len__(self) -> int:
        """Proposals requested and not started yet, answered or not."""
        return len(self._items)

    def numbers(self) -> set[int]:
        return set(self._items)

    def first(self) -> int:
        """The lowest iteration with a proposal not started (candidates start in order)."""
        return min(self._items)

    def being_answered(self) -> list[int]:
        """The iterations whose requests are still being answered."""
        return [n for n, (_, _, f) in self._items.items() if not f.done()]

    def waiting(self) -> int:
        """Requests still being answered."""
        return len(self.being_answered())

    def answered(self) -> list[tuple[int, Proposal]]:
        """Proposals answered but not started yet (a proposal asked for next is told)."""
        out = []
        for n, (_, _, future) in sorted(self._items.items()):
            if future.done() and not future.cancelled() and future.exception() is None:
                out.append((n, future.result()))
        return out

    def ready(self) -> int:
        return sum(1 for _, _, f in self._items.values() if f.done())

    def take(self, n: int):
        """(base, program_sha, Proposal) for iteration n once answered, else None."""
        item = self._items.get(n)
        if item is None or not item[2].done():
            return None
        del self._items[n]
        base, sha, future = item
        return base, sha, future.result()      # re-raises ProposerFatal

    def drop_all(self, wait: bool) -> list[tuple[int, Proposal | None]]:
        """Forget every proposal not started; with `wait`, wait for answers (their cost)."""
        out: list[tuple[int, Proposal | None]] = []
        for n, (_, _, future) in sorted(self._items.items()):
            if not wait and not future.done():
                future.cancel()
                out.append((n, None))
                continue
            try:
                out.append((n, future.result()))
            except Exception:
                out.append((n, None))
        self._items.clear()
        return out

    def cancel_all(self) -> None:
        """End every request in flight now (the loop stops): a proposer that can, shuts
        its connections; threads that still run end with the process (daemons)."""
        cancel = getattr(self.proposer, "cancel", None)
        if cancel is not None:
            cancel()
