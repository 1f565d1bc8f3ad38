"""Faults of the machine, not of the code under test: a full disk stops the loop cleanly
(state intact, resumable) instead of being blamed on the experiment."""
from __future__ import annotations

import errno
from pathlib import Path

from loop.repo.gitsafe import NO_SPACE, DiskFull

_SIGNS = (*NO_SPACE, "database or disk is full", "ENOSPC")


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, DiskFull):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(sign in str(exc) for sign in _SIGNS)


def log_says_disk_full(log_path: Path, max_bytes: int = 20_000) -> bool:
    """A failed run whose last output reports a full disk (a write of the experiment's
    failed for lack of space)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_bytes))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return False
    return any(sign in tail for sign in _SIGNS)


def disk_full_message(exc: BaseException) -> str:
    what = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
    return (f"stopped: no space left on device ({what}); nothing was lost: free some space, "
            f"then run the same command to resume")
