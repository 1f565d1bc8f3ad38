"""Capture a run's output: keep a capped log (head and tail), scan every line for metrics.

An experiment that prints 200 MB must not leave a 200 MB log (and a 200 MB MLflow artifact)
per run, but its metric line, printed last, must still be found: every complete line of
the whole stream is matched against the patterns; only the kept log is capped. A carriage
return ends a line too (a progress bar rewriting one line, as karpathy's train.py does), for
the patterns and for the progress watcher (loop/run/early_stop.py), which may ask for the run
to be stopped (`stop_reason`).

When the engine signals the run (the time box, an early stop), the capture is sealed first
(`Pump.seal`): what the pipe holds at that moment is read, then no later line counts for a
metric, so a SIGTERM handler that prints a better value is never read (`on_timeout: last`
scores what was printed before the signal); the log still keeps everything."""
from __future__ import annotations

import os
import re
import select
import threading
from collections import deque

MAX_SCANNED_LINE = 1 << 16   # an unfinished line longer than this is not kept for scanning


class CappedLog:
    """Writes the first cap/2 bytes to `log` as they come, holds the last cap/2 in memory,
    and on `close()` writes a line saying how much was dropped, then the tail."""

    def __init__(self, log, cap_bytes: int, patterns: dict[str, str], watch=None):
        self.log = log
        self.head_left = cap_bytes // 2
        self.tail_cap = cap_bytes - cap_bytes // 2
        self.tail: deque[bytes] = deque()
        self.tail_bytes = 0
        self.dropped = 0
        self.partial = b""
        self.patterns = {k: re.compile(p, re.M | re.I) for k, p in patterns.items() if p}
        self.last: dict[str, str] = {}
        self.where: dict[str, tuple[int, str]] = {}   # name -> (line number, line) of `last`
        self.lines = 0           # newlines scanned so far (a `\r` ends a line, not a number)
        self.watch = watch       # an early_stop.Watcher (or None): sees each progress line
        self.stop_reason = ""    # set once the watcher says the run is clearly worse
        self.sealed = False      # set when the engine signals the run: later lines not scanned

    def feed(self, chunk: bytes) -> None:
        self._scan(chunk)
        if self.head_left > 0:
            head, chunk = chunk[:self.head_left], chunk[self.head_left:]
            self.log.write(head)
            self.log.flush()
            self.head_left -= len(head)
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_bytes += len(chunk)
        while self.tail_bytes > self.tail_cap:
            over = self.tail_bytes - self.tail_cap
            first = self.tail[0]
            cut = min(over, len(first))
            self.dropped += cut
            self.tail_bytes -= cut
            if cut == len(first):
                self.tail.popleft()
            else:
                self.tail[0] = first[cut:]

    def seal(self) -> None:
        """From now on nothing is matched: the values read so far are final. A line not
        finished by now is not read either (its end, printed after the signal, could make
        `error: 0.5` read `error: 0.5e-9`)."""
        self.sealed, self.partial = True, b""

    def _scan(self, chunk: bytes) -> None:
        """Match the complete lines of this chunk as one block (the regex engine loops in C)."""
        if self.sealed:
            return
        data = self.partial + chunk         # `\r` read as `\n` below; the log keeps it
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:
            self.partial = data if len(data) <= MAX_SCANNED_LINE else b""
            return
        self.partial = data[end + 1:]
        if len(self.partial) > MAX_SCANNED_LINE:
            self.partial = b""
        self._match(data[:end].decode("utf-8", "replace"))
        self.lines += data.count(b"\n", 0, end + 1)

    def _match(self, raw: str) -> None:
        text = raw.replace("\r", "\n")    # same length: a match's offset is raw's too
        for name, pattern in self.patterns.items():
            found = deque(pattern.finditer(text), maxlen=1)   # the last match, in C
            if found:
                last = found[0]
                self.last[name] = (last.group(1) or "") if pattern.groups else last.group(0)
                start = text.rfind("\n", 0, last.start()) + 1
                stop = text.find("\n", last.end())
                self.where[name] = (self.lines + raw.count("\n", 0, last.start()) + 1,
                                    text[start:stop if stop >= 0 else len(text)])
        if self.watch is not None:
            for match in self.watch.pattern.finditer(text):
                reason = self.watch.see(match)
                if reason and not self.stop_reason:
                    self.stop_reason = reason

    def close(self) -> None:
        if self.partial and not self.sealed:
            self._match(self.partial.decode("utf-8", "replace"))
            self.partial = b""
        if self.dropped:
            self.log.write(f"\n=== log capped: {self.dropped} bytes dropped here; the first "
                           f"and last {self.tail_cap} bytes are kept; metrics were read from "
                           f"the whole output ===\n".encode())
            tail = b"".join(self.tail)
            newline = tail.find(b"\n")           # start the tail at a line boundary
            if 0 <= newline < 4096:
                tail = tail[newline + 1:]
            self.log.write(tail)
        else:
            self.log.write(b"".join(self.tail))
        self.log.flush()

    def line_of(self, name: str) -> tuple[int, str]:
        """(line number in the output, the line) where `value(name)` was printed."""
        return self.where.get(name, (0, ""))

    def value(self, name: str) -> float | None:
        """The last number pattern `name` captured in the whole stream, or None."""
        try:
            return float(self.last[name].replace(",", ""))   # `18,450`: thousands
        except (KeyError, ValueError):
            return None


class Pump(threading.Thread):
    """Drains a pipe into a CappedLog until EOF, or until `stop()` once the run is over
    (a process that escaped could hold the pipe open forever)."""

    def __init__(self, fd: int, sink: CappedLog):
        super().__init__(daemon=True)
        self.fd, self.sink = fd, sink
        self._stop_at_idle = threading.Event()
        self._reading = threading.Lock()    # one reader at a time: the pump, or `seal`
        self._eof = False

    def run(self) -> None:
        late_chunks = 0
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if self._stop_at_idle.is_set():     # the run is over: drain a little, go
                    late_chunks += 1
                    if not ready or late_chunks > 256:
                        return
                if not ready:
                    continue
                if not self._read_ready():
                    return
        finally:
            with self._reading:
                self._eof = True
                os.close(self.fd)

    def _read_ready(self) -> bool:
        """Feed one chunk if the pipe holds one now (never blocks: `seal` may have drained
        it meanwhile); False at EOF."""
        with self._reading:
            if self._eof:
                return False
            if not select.select([self.fd], [], [], 0)[0]:
                return True
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self._eof = True
                return False
            self.sink.feed(chunk)
            return True

    def seal(self, max_bytes: int = 1 << 22) -> None:
        """Call before signalling the run: feed what the pipe holds now (printed before the
        signal; up to `max_bytes`), then seal the sink, so nothing printed after counts."""
        with self._reading:
            read = 0
            while not self._eof and read < max_bytes and \
                    select.select([self.fd], [], [], 0)[0]:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    self._eof = True
                    break
                self.sink.feed(chunk)
                read += len(chunk)
            self.sink.seal()

    def stop(self, wait_s: float = 2.0) -> None:
        self.join(wait_s)
        self._stop_at_idle.set()
        self.join()
