"""Supervise one command so that no process it starts outlives it (every run's command, the
bwrap sandbox included: bwrap arms its own --die-with-parent too late to be relied on).

    python -I -S reap.py <engine pid> <grace s> [--join FILE]... [--rlimit NAME=N]... <argv...>

Run by path, imports only the standard library. Before anything else it takes the run's
bounds (loop/run/cgroup.py, loop/run/process.py): `--join FILE` writes its pid to a cgroup's
`cgroup.procs`, `--rlimit DATA=N` / `NPROC=N` sets that resource limit, so it and all it
starts are held by them (done here, not by a launcher that then execs this: one Python start
less per run). It makes itself a *child subreaper*
(prctl PR_SET_CHILD_SUBREAPER): a process that double-forks or calls setsid is re-parented to
this process, not to init, so the whole tree stays findable through /proc. When the command
exits (any status), or when this process gets SIGTERM (the engine's time box) or its parent
dies (PR_SET_PDEATHSIG), every descendant is sent SIGTERM, then SIGKILL after the grace
period, and reaped; the exit status is the command's (128 + signal number when a signal
killed it). Both PDEATHSIGs are armed before anything starts and followed by a check that
the parent still lives, so a parent killed at any moment leaves nothing behind. What escapes
it: a process that kills this supervisor first with SIGKILL (then its orphans go to init);
in the bwrap sandbox, the default where it works, a run cannot see this process to kill it,
and the sandbox's PID namespace dies with its first process."""
import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def descendants(root):
    """All live descendants of `root` (also those that left its process group), via /proc
    (none where there is no /proc). The engine uses it too (loop/run/process.py)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def signal_all(sig):
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def reap_all(grace_s, first=signal.SIGTERM):
    """Stop every descendant: `first`, up to `grace_s` for them to go, then SIGKILL."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and descendants(os.getpid()):
        signal_all(first)                 # again each turn: a fork may have been under way
        reap_zombies()
        time.sleep(0.05)
    while descendants(os.getpid()):
        signal_all(signal.SIGKILL)
        reap_zombies()
        time.sleep(0.02)


def reap_zombies():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def take_bounds(argv):
    """Apply the leading `--join FILE` and `--rlimit NAME=N` options; the rest of argv."""
    while len(argv) > 1 and argv[0] in ("--join", "--rlimit"):
        option, value, argv = argv[0], argv[1], argv[2:]
        if option == "--join":
            with open(value, "w") as f:
                f.write("0")
        else:
            name, limit = value.split("=")
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (int(limit), int(limit)))
    return argv


def main(argv):
    engine, grace_s = int(argv[0]), float(argv[1])
    command = take_bounds(argv[2:])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != engine:          # the engine died before PDEATHSIG was armed
        return 137

    class Stop(Exception):
        pass

    def on_term(_signum, _frame):
        raise Stop
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    status = None
    supervisor = os.getpid()
    try:
        child = os.fork()
        if child == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            try:
                if os.getppid() == supervisor:   # else it died before PDEATHSIG was armed
                    os.execvp(command[0], command)
            finally:
                os._exit(127)
        while status is None:
            pid, st = os.waitpid(-1, 0)     # orphans are ours too: reap them as they end
            if pid == child:
                status = st
    except (Stop, ChildProcessError):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    reap_all(grace_s)                        # whatever the command left behind
    if status is None:                       # stopped from outside: the command too
        return 128 + signal.SIGTERM
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
