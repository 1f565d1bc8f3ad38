"""One engine per tag: the lock file in a tag's state folder (`.autoresearch/<tag>/lock`).
`TagLock` is held by the engine that runs the tag; `tag_active` lets the repo layer see,
without taking it, that another engine runs (or just ran) a tag, whose refs may then move by
its own hand (loop/repo/workspace.py). Files only; no git, no journal."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO

from loop.errors import UsageError


class TagLock:
    """One engine per tag: a second `run` of a running tag is refused, not interleaved.
    Other engines look at it too (`tag_active`): a tag whose engine runs moves its own refs."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        import fcntl
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                # another engine's look (`tag_active`) holds it for an instant: try again
                if attempt + 1 < LOCK_TRIES:
                    time.sleep(LOCK_WAIT_S)
                    continue
                f.seek(0)
                holder = f.read().strip() or "another process"
                f.close()
                raise UsageError(f"tag '{self.path.parent.name}' is already running "
                                 f"({holder}); stop it first or use another --tag") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file:
            # emptied (so its time says when the engine stopped, see `tag_active`), then
            # closing drops the lock
            self._file.truncate(0)
            self._file.close()
            self._file = None


LOCK_TRIES, LOCK_WAIT_S = 20, 0.05
CLOCK_SLACK_S = 1.0     # a file's time may trail time.time() by a clock tick


def tag_active(state_dir: Path, since: float) -> bool:
    """Whether an engine runs the tag whose state folder is `state_dir`, or started or
    stopped there since `since` (a time.time()): its refs may have moved by its own hand
    meanwhile. Looks without taking the lock from anyone (a shared lock held for an instant;
    `acquire` waits that out)."""
    import fcntl
    try:
        f = open(Path(state_dir) / "lock", "rb")
    except OSError:
        return False                 # no engine ever ran that tag in this checkout
    with f:
        if os.fstat(f.fileno()).st_mtime >= since - CLOCK_SLACK_S:
            return True              # taken or let go within the window
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True              # held: that engine is running
        fcntl.flock(f, fcntl.LOCK_UN)
    return False
