"""Whether a process runs: one answer for every part that asks (a lock's owner, a check's
worktree, a run's processes, a remote worker's folder). A zombie, exited but not yet reaped by
its parent, does not run. Imports nothing of the loop."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process `pid` runs (in this PID namespace); a zombie does not."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return False                # /proc is there and the process is not
    except (OSError, IndexError):
        pass
    try:                                # no /proc (macOS): ask the kernel, zombies included
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                     # someone else's, running
    return True
