"""A run's own cgroup: how many processes it may have at once (`max_processes`) and how much
memory all of it may hold (`memory_limit_gb`), root included.

Neither bound has a plain-process form that holds: RLIMIT_NPROC does not bind root, and for
another user counts all that user's processes; RLIMIT_DATA (loop/run/process.py) is per
process and does not count shared memory (`mmap(MAP_SHARED)`, `memfd_create`, tmpfs files).
So each run gets a group of its own under each controller this machine lets us write:
cgroup v2 where the controller is enabled for this process's group's children, else the
cgroup v1 hierarchy of that controller (as root on most machines and containers with
cgroups mounted writable). Its `pids.max` is `max_processes` (threads count, as do the
run's supervisor and sandbox: 4 tasks); its memory limit (`memory.max`, v1
`memory.limit_in_bytes`) is `memory_limit_gb` for everything the run holds (its processes,
its shared memory, its /dev/shm, the page cache of its files, which is given back first);
past it the kernel's OOM killer ends a process of the run, and the run reads `out of
memory`. The group is emptied (SIGKILL) and removed when the run ends (an engine killed
before that leaves it empty: the next engine removes it).

Where there is none (`mechanism` says why): processes, for a user that is not root,
RLIMIT_NPROC set to the processes (threads included) that user has now plus the limit;
as root, no bound (a fork bomb runs until the time box; a user namespace would not help:
bwrap maps the run back to uid 0, whose processes RLIMIT_NPROC never counts). Memory:
RLIMIT_DATA per process only."""
from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from pathlib import Path

_GROUPS = itertools.count()


@functools.cache
def parent(controller: str) -> tuple[Path | None, bool, str]:
    """(the folder to make the runs' groups in, whether it is cgroup v2, "") for
    `controller`, or (None, False, why there is none)."""
    own = _own_groups()
    why = f"no cgroup {controller} controller is mounted"
    for point, kind, options in _mounts():
        if kind == "cgroup2" and "" in own:
            base = Path(point) / own[""].lstrip("/")
            if not _enabled(base, controller):
                why = f"cgroup v2 at {base} does not enable {controller} for its children"
                continue
        elif kind == "cgroup" and controller in options.split(",") and controller in own:
            base = Path(point) / own[controller].lstrip("/")
        else:
            continue
        v2 = kind == "cgroup2"
        probe = base / f"autoresearch-probe-{os.getpid()}-{controller}"
        try:
            probe.mkdir()
            (probe / _limit_file(controller, v2)).write_text(
                "8\n" if controller == "pids" else f"{1 << 30}\n")
        except OSError as exc:
            why = f"cannot make a group under {base} ({exc.strerror or exc})"
            continue
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
        _sweep(base)
        return base, v2, ""
    return None, False, why


def _sweep(base: Path) -> None:
    """Remove the empty groups of engines that are gone (killed before their `close`)."""
    for group in base.glob("autoresearch-*-*"):
        owner = group.name.split("-")[1]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                group.rmdir()
            except OSError:
                pass


def mechanism(controller: str = "pids") -> str:
    """How a run's `controller` is bounded here, and why (see the module docstring)."""
    base, v2, why = parent(controller)
    if base is not None:
        return f"cgroup ({_limit_file(controller, v2)} under {base})"
    if controller == "memory":
        return f"none past RLIMIT_DATA per process: {why}"
    if os.geteuid() != 0:
        return f"rlimit (RLIMIT_NPROC: this user's processes plus the limit; {why})"
    return f"none: root, and {why}"


class Group:
    """One run's bounds: `reaper_args` joins them (loop/run/reap.py's options: the run's
    supervisor takes them before it starts anything), `out_of_memory` says whether the
    memory limit killed something, `close()` kills what is left in the groups and removes
    them."""

    def __init__(self, max_processes: int | None, memory_bytes: int | None = None):
        self.paths: list[Path] = []        # one per hierarchy (v2: one for both)
        self.memory: tuple[Path, bool] | None = None
        self.nproc: int | None = None
        name = f"autoresearch-{os.getpid()}-{next(_GROUPS)}"
        for controller, limit in (("pids", max_processes), ("memory", memory_bytes)):
            if not limit:
                continue
            base, v2, _ = parent(controller)
            if base is None:
                if controller == "pids" and os.geteuid() != 0:
                    self.nproc = _user_tasks() + limit
                continue
            path = base / name
            try:
                path.mkdir(exist_ok=True)
                if path not in self.paths:
                    self.paths.append(path)
                (path / _limit_file(controller, v2)).write_text(f"{limit}\n")
            except OSError:
                continue
            if controller == "memory":
                self.memory = (path, v2)
                for swap in ("memory.swap.max", "memory.memsw.limit_in_bytes"):
                    try:            # no way around the limit through swap
                        (path / swap).write_text(f"{0 if v2 else limit}\n")
                    except OSError:
                        pass

    def reaper_args(self) -> list[str]:
        """loop/run/reap.py's options that put the run's supervisor, and so all it starts,
        under these bounds."""
        args = [a for p in self.paths for a in ("--join", str(p / "cgroup.procs"))]
        if self.nproc is not None:
            args += ["--rlimit", f"NPROC={self.nproc}"]
        return args

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the run at its memory limit."""
        if self.memory is None:
            return False
        path, v2 = self.memory
        try:
            text = (path / ("memory.events" if v2 else "memory.oom_control")).read_text()
        except OSError:
            return False
        counts = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) > 1)
        return counts.get("oom_kill", "0") not in ("0", "")

    def close(self) -> None:
        for path in self.paths:
            _remove(path)
        self.paths = []


def _limit_file(controller: str, v2: bool) -> str:
    return "pids.max" if controller == "pids" else "memory.max" if v2 else \
        "memory.limit_in_bytes"


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


def _enabled(base: Path, controller: str) -> bool:
    try:
        return controller in (base / "cgroup.subtree_control").read_text().split()
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
    """This process's group per hierarchy: by controller (v1), "" (v2)."""
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
