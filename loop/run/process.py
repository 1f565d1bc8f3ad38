"""One confined process: spawn a command, time-box it, kill everything it started, reap it.

Knows nothing about experiments (metrics, statuses, grading order: loop/run/runner.py).
The child gets a scrubbed environment (`experiment_env`: no API keys, no tokens, no tracking
credentials), its own session and a scratch $TMPDIR. It runs in the bwrap sandbox where that
works (loop/run/sandbox.py: no network, its own PID namespace, a read-only filesystem but for
its folders), and either way under loop/run/reap.py; no process it starts outlives it, and
nothing it starts outlives the engine (or the Ray worker running it). Call `execute` from a
thread that lives until it returns: Linux ties PR_SET_PDEATHSIG to the thread that started the
child."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loop.run import cgroup, netbridge, sandbox
from loop.run.capture import CappedLog, Pump
from loop.pids import alive
from loop.run.reap import descendants

TERM_GRACE_S = 5.0  # after SIGTERM, how long the group gets before SIGKILL
MAX_PROCESSES = 16384   # a run's processes and threads at once, unless the config says
REAPER = Path(__file__).with_name("reap.py")

# Variables an experiment may inherit; everything else is dropped.
# Not the engine's VIRTUAL_ENV or CONDA_PREFIX: a run gets its own interpreter's
# (loop/run/spec.py `activated`), or none.
_PASS = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ", "SHELL",
         "LD_LIBRARY_PATH", "XDG_CACHE_HOME", "HF_HOME", "TORCH_HOME", "OMP_NUM_THREADS",
         "MKL_NUM_THREADS", "AUTORESEARCH_CACHE"}
_PASS_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "PYTORCH_", "TORCHINDUCTOR_")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)


def experiment_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict:
    """The environment an experiment sees: an allow-list of the parent's, minus secrets."""
    given = os.environ if base is None else base
    env = {k: v for k, v in given.items()
           if (k in _PASS or k.startswith(_PASS_PREFIXES)) and not _SECRET.search(k)}
    # `python` in a task's command means the interpreter running the engine (its venv).
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


@dataclass(frozen=True)
class Limits:
    """How runs are confined (the run config's `sandbox`, `memory_limit_gb`, `log_cap_mb`,
    `max_processes`)."""
    sandbox: str = "auto"                # off | auto (bwrap where it works) | required
    memory_limit_gb: float | None = None  # per run (cgroup) and per process (RLIMIT_DATA)
    log_cap_mb: float = 5.0              # kept log per command: first and last half of this
    max_processes: int | None = MAX_PROCESSES   # tasks at once, threads too (loop/run/cgroup.py)

    @classmethod
    def from_config(cls, config) -> Limits:
        return cls(config.sandbox, config.memory_limit_gb, config.log_cap_mb,
                   getattr(config, "max_processes", MAX_PROCESSES))


@dataclass
class Ended:
    returncode: int | None               # None: killed at the time box
    timed_out: bool
    wall_s: float
    output: CappedLog                    # what every line of the output matched
    stopped: str = ""                    # why the watcher had it killed early ("" if not)
    out_of_memory: bool = False          # the kernel killed a process at the run's memory limit


def execute(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path, *,
            append: bool = False, patterns: dict[str, str] | None = None,
            limits: Limits | None = None, writable=(), hidden=(), readonly=(),
            watch=None, own_compile_cache: bool = False) -> Ended:
    """Run `command` with `/bin/sh -c` in the sandbox (where there is one) under
    loop/run/reap.py, in a new session; kill everything it started on timeout, interrupt,
    or when it ends.
    Its output is scanned line by line for `patterns` and kept capped in `log_path`.
    `watch` (loop/run/early_stop.py's Watcher) sees its progress lines; once it gives a
    reason, everything the command started is killed as at the time box (`Ended.stopped`).
    `own_compile_cache` (the grader): torch.compile's and Triton's caches in its scratch, made
    for it and gone with it, never the one the training steps fill (`_compile_cache`)."""
    limits = limits or Limits()
    boxed = sandbox.active(limits.sandbox)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # next to the log, under a fixed name: what a killed engine leaves is cleared by the redo
    scratch = log_path.parent / f".scratch-{log_path.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    env = {**env, "TMPDIR": _tmpdir(scratch, boxed)}
    compiled = _own_compile_cache(env, scratch) if own_compile_cache else _compile_cache(env)
    group = cgroup.Group(limits.max_processes, int(limits.memory_limit_gb * 2**30)
                         if limits.memory_limit_gb else None)
    argv, bridge = _confined_argv(command, cwd, env, limits, boxed, scratch, compiled,
                                  writable, hidden, readonly, group)
    start = time.monotonic()
    try:
        with open(log_path, "ab" if append else "wb") as log:
            output = CappedLog(log, int(limits.log_cap_mb * 2**20), patterns or {}, watch)
            returncode, timed_out, stopped = _spawn_and_wait(argv, cwd, env, output,
                                                             start + timeout_s)
    finally:
        out_of_memory = group.out_of_memory()
        group.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if Path(env["TMPDIR"]).name.startswith("ar-") and os.path.islink(env["TMPDIR"]):
            Path(env["TMPDIR"]).unlink(missing_ok=True)   # the short link to the scratch
        if bridge:
            bridge.close()
    return Ended(returncode, timed_out, time.monotonic() - start, output, stopped,
                 out_of_memory)


# a Unix socket's path holds at most 107 bytes, and multiprocessing binds its listeners at
# $TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (33 more): a longer $TMPDIR fails them
SOCKET_TMPDIR_MAX = 70


def _tmpdir(scratch: Path, boxed: bool) -> str:
    """The run's $TMPDIR: its scratch, unless that path is too long for the Unix sockets
    multiprocessing makes there (a DataLoader's workers sharing tensors: `OSError: AF_UNIX
    path too long`, in a repo cloned a few folders deep); then /tmp, which the sandbox makes
    a folder of the same scratch, or unconfined a short link to the scratch in the system's
    temporary folder (named by the scratch, so a redo replaces it; removed with it, and the
    links an engine killed with -9 left to scratches now gone are swept when one is made)."""
    if len(str(scratch)) <= SOCKET_TMPDIR_MAX:
        return str(scratch)
    if boxed:
        return "/tmp"
    _sweep_stale_scratch_links()
    link = scratch_link(scratch)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(scratch, target_is_directory=True)
    return str(link)


def scratch_link(scratch: Path) -> Path:
    return Path(tempfile.gettempdir()) / ("ar-" + hashlib.sha1(str(scratch).encode())
                                          .hexdigest()[:12])


def _sweep_stale_scratch_links() -> None:
    for link in Path(tempfile.gettempdir()).glob("ar-*"):
        try:
            stale = (link.is_symlink() and not link.exists()
                     and Path(os.readlink(link)).name.startswith(".scratch-"))
            if stale:
                link.unlink(missing_ok=True)
        except OSError:                          # another user's, or gone meanwhile
            continue


def _confined_argv(command: str, cwd: Path, env: dict, limits: Limits, boxed: bool,
                   scratch: Path, compiled: list[Path], writable, hidden, readonly,
                   group: cgroup.Group | None = None
                   ) -> tuple[list[str], netbridge.Bridge | None]:
    """The argv that runs `command` in the sandbox (where there is one) under the reaper,
    and the network bridge to the task's declared endpoints (None: none), to close after."""
    shell = ["/bin/sh", "-c", command]
    bridge = None
    if boxed and netbridge.endpoints_from(env):   # the task's declared endpoints, no others
        bridge = netbridge.Bridge(netbridge.endpoints_from(env))
        shell = bridge.argv(shell)
    if boxed:
        shown = _paths_in(env, [*compiled, scratch])
        shell = sandbox.wrap(shell, cwd, [sandbox.worktree_root(cwd), *writable, *compiled],
                             hidden, scratch,
                             readonly=[*readonly, *shown, *data_cache(env),
                                       *(bridge.readonly if bridge else [])],
                             hosts_file=bridge.hosts_file if bridge else None,
                             memory_bytes=int(limits.memory_limit_gb * 2**30)
                             if limits.memory_limit_gb else None)
    # The sandbox too runs under the reaper: bwrap arms --die-with-parent only once it is
    # running and never checks that its parent still lives, so an engine (or Ray worker)
    # killed in that window left bwrap and the run alive for good. The reaper arms its
    # PDEATHSIG, then checks its parent, before it starts anything.
    argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), f"{TERM_GRACE_S:g}",
            *(group.reaper_args() if group else []), *memory_cap(limits.memory_limit_gb),
            *shell]
    return argv, bridge


def _spawn_and_wait(argv: list[str], cwd: Path, env: dict, output: CappedLog,
                    deadline: float) -> tuple[int | None, bool, str]:
    """Start `argv` in a new session, its output pumped into `output`, and wait: (exit
    status or None when killed, whether the time box killed it, why the watcher did)."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=write_fd,
                                stderr=write_fd, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    pump = Pump(read_fd, output)
    pump.start()
    stopped = ""
    try:
        returncode, timed_out = _wait(proc, deadline, output), False
        if returncode is None:       # the watcher asked for it: killed as at the box
            stopped = output.stop_reason
            pump.seal()
            kill_tree(proc)
    except subprocess.TimeoutExpired:
        pump.seal()                  # what it prints once signalled is read for no metric
        kill_tree(proc)
        returncode, timed_out = None, True
    except BaseException:            # Ctrl-C or SIGTERM: leave no process behind
        kill_tree(proc)
        raise
    finally:
        _kill_group(proc.pid, signal.SIGKILL)  # stragglers the leader left running
        pump.stop()
        output.close()
    return returncode, timed_out, stopped


def _wait(proc: subprocess.Popen, deadline: float, output: CappedLog) -> int | None:
    """The command's exit status; None once its output's watcher asks for a stop; raises
    TimeoutExpired at the deadline. Without a watcher, one plain wait."""
    if output.watch is None:
        return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    while True:
        left = deadline - time.monotonic()
        try:
            return proc.wait(timeout=max(0.0, min(0.2, left)))
        except subprocess.TimeoutExpired:
            if output.stop_reason:
                return None
            if left <= 0.2:
                raise


def _paths_in(env: dict, compiled: list[Path]) -> list[str]:
    """Absolute paths the environment names (a data folder in the task's `env`, the cache):
    made visible, read-only, even under the folders the sandbox empties. Not the compile
    caches the engine placed in `compiled` (read-only there, they would be no cache)."""
    ours = [str(c) for c in compiled]
    return [v for k, v in env.items() if k not in ("PATH", "TMPDIR") and v.startswith("/")
            and os.path.exists(v)
            and not (k in dict(COMPILE_VARS) and any(v.startswith(o + "/") for o in ours))]


def memory_cap(memory_limit_gb: float | None) -> list[str]:
    """loop/run/reap.py's option that sets the memory cap on the run's supervisor (so on all
    it starts), or [].

    The cap is RLIMIT_DATA (private writable memory, per process, inherited): not RLIMIT_AS,
    which counts reserved address space and so breaks CUDA (it reserves far more than it
    uses). It does not count shared memory: the run's cgroup does, where this machine
    gives one (loop/run/cgroup.py). Past the cap an allocation fails (in
    Python a MemoryError), which loop/run/runner.py reports as out of memory. Set by the
    supervisor before it starts anything, not by Popen's preexec_fn: that runs Python in a
    forked child, unsafe when the engine runs experiments from several threads."""
    if not memory_limit_gb:
        return []
    return ["--rlimit", f"DATA={int(memory_limit_gb * 2**30)}"]


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the process group and every descendant, wait, then SIGKILL what is left."""
    pids = descendants(proc.pid)
    _kill_group(proc.pid, signal.SIGTERM)
    for pid in pids:
        _kill(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    _kill_group(proc.pid, signal.SIGKILL)
    for pid in pids + descendants(proc.pid):
        _kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_marked(marker: str) -> int:
    """Kill every process whose environment holds `marker` (a `NAME=value` string).
    Used on resume: experiments of an engine that was killed outright carry its run's marker."""
    needle = marker.encode()
    killed = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        _kill(int(entry), signal.SIGKILL)
        killed += 1
    return killed


def describe_exit(returncode: int | None) -> str:
    """"exit code 3", or the signal that killed the command: 128 + N through the shell, the
    sandbox or the reaper (which is how they report the command's death). Negative (from
    Popen) is the death of the process the engine started, the supervisor itself
    (loop/run/reap.py): not the command's, and not the OOM killer's doing (it picks
    the biggest process, the training); most likely the run killed its supervisor."""
    if returncode is None:
        return "killed"
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        name = signal.Signals(number).name if number else ""
    except ValueError:
        name = ""
    if not name:
        return f"exit code {returncode}"
    if returncode < 0:
        return (f"its supervisor was killed by {name} (exit status {returncode}): the run "
                f"killed the process watching it, or something outside did; what it started "
                f"may have escaped")
    if number == signal.SIGKILL:
        return f"killed by SIGKILL, likely out of memory (the kernel's OOM killer; exit " \
               f"status {returncode})"
    return f"killed by {name} (exit status {returncode})"


COMPILE_VARS = (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"))


def _compile_cache(env: dict) -> list[Path]:
    """The training step's torch.compile and Triton caches, kept across runs (a recompile
    costs minutes on a GPU) in the data cache's `compile/` folder; sets the variables unless
    the task set them. Returns the folder to bind writable, if any. Never the grader's: what
    a training step writes there is code (`_own_compile_cache`)."""
    folders = data_cache(env)
    if not folders:
        return []
    compiled = folders[0] / "compile"
    for var, sub in COMPILE_VARS:
        if var not in env:
            env[var] = str(compiled / sub)
            (compiled / sub).mkdir(parents=True, exist_ok=True)
    return [compiled]


def _own_compile_cache(env: dict, scratch: Path) -> list[Path]:
    """The grader's torch.compile and Triton caches: empty, in its own scratch (writable to
    it alone, removed when it ends), whatever the task or the environment named: a cache a
    training step could write (the data cache, any folder the task names) would let the
    edit's code load in the grader as compiled kernels. Nothing more to bind."""
    for var, sub in COMPILE_VARS:
        env[var] = str(scratch / "compile" / sub)
        (scratch / "compile" / sub).mkdir(parents=True, exist_ok=True)
    return []


def data_cache(env: dict) -> list[Path]:
    """The data cache the training step may fill (a task generating its data on first use):
    $AUTORESEARCH_CACHE, else ~/.cache/autoresearch. It is shared by runs and read-only to
    the grader; a grader must not trust data a run could have written there (README)."""
    folder = Path(env.get("AUTORESEARCH_CACHE") or Path.home() / ".cache" / "autoresearch")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return [folder]

