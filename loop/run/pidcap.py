"""How many processes one run may have at once (`max_processes`), root included.

RLIMIT_NPROC does not bind root, and for another user counts all that user's processes, so
the bound is, in order of what this machine gives:
- `cgroup`: a cgroup of the run's own under a writable `pids` controller (cgroup v2 where
  `pids` is enabled below this process's group, else the cgroup v1 `pids` hierarchy), its
  `pids.max` the limit: binds root too; the group is emptied (SIGKILL) and removed when the
  run ends;
- `rlimit`: for a user that is not root, RLIMIT_NPROC set to the processes (threads
  included) that user has now plus the limit: the run may start that many more;
- `none`: root without a writable `pids` controller (a container without cgroup
  delegation): a fork bomb then runs until the time box. A user namespace would not help:
  bwrap maps the run back to uid 0, whose processes RLIMIT_NPROC never counts.
Both count threads, as the kernel does, and the run's supervisor and sandbox (4 tasks)."""
from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from pathlib import Path

_GROUPS = itertools.count()


@functools.lru_cache(maxsize=1)
def parent() -> tuple[Path | None, str]:
    """The folder to make the runs' groups in, or None and why there is none."""
    mounts = _mounts()
    own = _own_groups()
    why = "no cgroup pids controller is mounted"
    for point, kind, options in mounts:
        if kind == "cgroup2" and "" in own:
            base = Path(point) / own[""].lstrip("/")
            if not _enabled(base):
                why = f"cgroup v2 at {base} does not enable pids for its children"
                continue
        elif kind == "cgroup" and "pids" in options.split(",") and "pids" in own:
            base = Path(point) / own["pids"].lstrip("/")
        else:
            continue
        probe = base / f"autoresearch-probe-{os.getpid()}"
        try:
            probe.mkdir()
            (probe / "pids.max").write_text("8\n")
        except OSError as exc:
            why = f"cannot make a group under {base} ({exc.strerror or exc})"
            continue
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
        return base, ""
    return None, why


def mechanism() -> str:
    """`cgroup`, `rlimit` or `none`, and why (see the module docstring)."""
    base, why = parent()
    if base is not None:
        return f"cgroup (pids.max under {base})"
    if os.geteuid() != 0:
        return f"rlimit (RLIMIT_NPROC: this user's processes plus the limit; {why})"
    return f"none: root, and {why}"


class Group:
    """One run's process bound: `prefix` joins it (an argv prefix that execs the rest, same
    pid), `close()` kills what is left in it and removes it."""

    def __init__(self, limit: int | None):
        self.path: Path | None = None
        self.nproc: int | None = None
        if not limit:
            return
        base, _ = parent()
        if base is not None:
            path = base / f"autoresearch-{os.getpid()}-{next(_GROUPS)}"
            try:
                path.mkdir()
                (path / "pids.max").write_text(f"{limit}\n")
                self.path = path
                return
            except OSError:
                _remove(path)
        if os.geteuid() != 0:
            self.nproc = _user_tasks() + limit

    def prefix_code(self) -> str:
        """Python statements (in the launcher, before it execs the run) that bind it."""
        if self.path is not None:
            return f"open({str(self.path / 'cgroup.procs')!r}, 'w').write('0'); "
        if self.nproc is not None:
            return (f"resource.setrlimit(resource.RLIMIT_NPROC, ({self.nproc}, "
                    f"{self.nproc})); ")
        return ""

    def close(self) -> None:
        if self.path is not None:
            _remove(self.path)
            self.path = None


def _remove(path: Path, wait_s: float = 10.0) -> None:
    """SIGKILL what is left in the group, then remove it (a few tries while they die)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def _user_tasks() -> int:
    """Processes and threads of this user now (what RLIMIT_NPROC counts)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count


def _enabled(base: Path) -> bool:
    try:
        return "pids" in (base / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of each cgroup mount."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return found


def _own_groups() -> dict[str, str]:
    """This process's group per hierarchy: `pids` (v1), "" (v2)."""
    groups = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    groups[name] = path
    except (OSError, ValueError):
        pass
    return groups
