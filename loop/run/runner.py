"""Run one experiment command, time-boxed and confined; parse its metric.

Knows nothing about git. The child gets a scrubbed environment: no API keys, no tokens,
no tracking credentials, only what a training script needs plus the task's own `env`.
It runs in the bwrap sandbox where that works (loop/run/sandbox.py: no network, its own PID
namespace, a read-only filesystem but for its folders), else under loop/run/reap.py; either
way no process it starts outlives its run, and nothing it starts outlives the engine.
Call `run_experiment` from a thread that lives until it returns (it waits for the run):
Linux ties PR_SET_PDEATHSIG to the thread that started the child."""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loop.run import netbridge, sandbox
from loop.run.capture import CappedLog, Pump

OK, CRASH, TIMEOUT, DIVERGED, NO_METRIC = "ok", "crash", "timeout", "diverged", "no_metric"
TERM_GRACE_S = 5.0  # after SIGTERM, how long the group gets before SIGKILL
REAPER = Path(__file__).with_name("reap.py")
OOM_SIGNS = ("MemoryError", "Cannot allocate memory", "can't allocate memory",
             "std::bad_alloc", "out of memory")

# Variables an experiment may inherit; everything else is dropped.
_PASS = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ", "SHELL",
         "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "XDG_CACHE_HOME", "HF_HOME",
         "TORCH_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "AUTORESEARCH_CACHE"}
_PASS_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "PYTORCH_", "TORCHINDUCTOR_")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)


@dataclass
class RunResult:
    status: str                  # ok | crash | timeout | diverged | no_metric
    metric: float | None
    returncode: int | None
    wall_s: float
    memory_gb: float | None
    log_path: Path
    detail: str = ""             # one line: why this status


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
    """How runs are confined (the run config's `sandbox`, `memory_limit_gb`, `log_cap_mb`)."""
    sandbox: str = "auto"                # off | auto (bwrap where it works) | required
    memory_limit_gb: float | None = None  # per process, as RLIMIT_DATA (see memory_cap)
    log_cap_mb: float = 5.0              # kept log per command: first and last half of this

    @classmethod
    def from_config(cls, config) -> Limits:
        return cls(config.sandbox, config.memory_limit_gb, config.log_cap_mb)


@dataclass
class Ended:
    returncode: int | None               # None: killed at the time box
    timed_out: bool
    wall_s: float
    output: CappedLog                    # what every line of the output matched


def run_command(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path,
                append: bool = False) -> tuple[int | None, bool, float]:
    """Run `command` confined (see `execute`). Returns (returncode or None when killed,
    timed_out, wall seconds)."""
    ended = execute(command, cwd, env, timeout_s, log_path, append=append)
    return ended.returncode, ended.timed_out, ended.wall_s


def execute(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path, *,
            append: bool = False, patterns: dict[str, str] | None = None,
            limits: Limits | None = None, writable=(), hidden=(), readonly=()) -> Ended:
    """Run `command` with `/bin/sh -c` in the sandbox (or, without one, under loop/run/reap.py),
    in a new session; kill everything it started on timeout, interrupt, or when it ends.
    Its output is scanned line by line for `patterns` and kept capped in `log_path`."""
    limits = limits or Limits()
    boxed = sandbox.active(limits.sandbox)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # next to the log, under a fixed name: what a killed engine leaves is cleared by the redo
    scratch = log_path.parent / f".scratch-{log_path.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    env = {**env, "TMPDIR": str(scratch)}
    compiled = _compile_cache(env)
    shell = ["/bin/sh", "-c", command]
    bridge = None
    if boxed and netbridge.endpoints_from(env):   # the task's declared endpoints, no others
        bridge = netbridge.Bridge(netbridge.endpoints_from(env))
        shell = bridge.argv(shell)
    if boxed:                 # bwrap --die-with-parent: it and the sandbox die with the engine
        argv = sandbox.wrap(shell, cwd, [sandbox.worktree_root(cwd), *writable, *compiled],
                            hidden, scratch,
                            readonly=[*readonly, *_paths_in(env), *_data_cache(env),
                                      *(bridge.readonly if bridge else [])],
                            hosts_file=bridge.hosts_file if bridge else None)
    else:                     # the reaper arms its own PDEATHSIG
        argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), f"{TERM_GRACE_S:g}",
                *shell]
    argv = memory_cap(limits.memory_limit_gb) + argv
    start = time.monotonic()
    read_fd, write_fd = os.pipe()
    try:
        with open(log_path, "ab" if append else "wb") as log:
            output = CappedLog(log, int(limits.log_cap_mb * 2**20), patterns or {})
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
            try:
                returncode = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_tree(proc)
                returncode, timed_out = None, True
            except BaseException:            # Ctrl-C or SIGTERM: leave no process behind
                kill_tree(proc)
                raise
            finally:
                _kill_group(proc.pid, signal.SIGKILL)  # stragglers the leader left running
                pump.stop()
                output.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if bridge:
            bridge.close()
    return Ended(returncode, timed_out, time.monotonic() - start, output)


def _paths_in(env: dict) -> list[str]:
    """Absolute paths the environment names (a data folder in the task's `env`, the cache):
    made visible, read-only, even under the folders the sandbox empties."""
    return [v for k, v in env.items() if k not in ("PATH", "TMPDIR") and v.startswith("/")
            and os.path.exists(v)]


def memory_cap(memory_limit_gb: float | None) -> list[str]:
    """An argv prefix that sets the memory cap, then execs the rest (same pid), or [].

    The cap is RLIMIT_DATA (private writable memory, per process, inherited): not RLIMIT_AS,
    which counts reserved address space and so breaks CUDA (it reserves far more than it
    uses), and not cgroup memory.max, which needs a delegated cgroup v2 subtree that
    containers and plain user sessions usually lack. Past the cap an allocation fails (in
    Python a MemoryError), which `run_experiment` reports as out of memory. A prefix, not
    Popen's preexec_fn: that runs Python in a forked child, unsafe when the engine runs
    experiments from several threads."""
    if not memory_limit_gb:
        return []
    cap = int(memory_limit_gb * 2**30)
    return [sys.executable, "-I", "-S", "-c",
            "import os, resource, sys; resource.setrlimit(resource.RLIMIT_DATA, "
            f"({cap}, {cap})); os.execvp(sys.argv[1], sys.argv[1:])"]


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM the process group and every descendant, wait, then SIGKILL what is left."""
    pids = _descendants(proc.pid)
    _kill_group(proc.pid, signal.SIGTERM)
    for pid in pids:
        _kill(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    _kill_group(proc.pid, signal.SIGKILL)
    for pid in pids + _descendants(proc.pid):
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(root: int) -> list[int]:
    """All live descendants of `root` (also those that left its process group), via /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
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


def parse_metric(text: str, pattern: str) -> float | None:
    """The last number the metric pattern captures in `text`, or None."""
    matches = re.findall(pattern, text, flags=re.M | re.I)
    if not matches:
        return None
    last = matches[-1]
    last = last[0] if isinstance(last, tuple) else last
    try:
        return float(last)
    except ValueError:
        return None


def read_tail(path: Path, max_bytes: int = 200_000) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - max_bytes))
        return f.read().decode("utf-8", "replace")


def classify(returncode: int | None, timed_out: bool, metric: float | None) -> tuple[str, str]:
    """Status and a one-line reason from how the command ended and what it printed."""
    if timed_out:
        return TIMEOUT, "killed at the time budget"
    if metric is not None and not math.isfinite(metric):
        return DIVERGED, f"metric is {metric}"
    if returncode != 0:
        return CRASH, describe_exit(returncode)
    if metric is None:
        return NO_METRIC, "exited 0 but printed no metric"
    return OK, ""


def grader_error(grade_log: str, fallback: str) -> str:
    """A failed grader's reason: its last `error: ...` line (else its last line), so a refused
    submission reads as the grader's word, not as `exit code 1`."""
    lines = [line.strip() for line in grade_log.splitlines() if line.strip()]
    said = [line for line in lines if line.lower().startswith("error")] or lines[-1:]
    return f"grader: {said[-1][:300]} ({fallback})" if said else fallback


def handover_error(log: str, fallback: str) -> str:
    """A training step that could not hand its model over (loop/run/graders/handover.py) says
    why in one `handover: ...` line: that line is the crash reason."""
    said = [line.strip() for line in log.splitlines() if line.startswith("handover: ")
            and not line.startswith("handover: model exported")]
    return f"{said[-1][:300]} ({fallback})" if said else fallback


def describe_exit(returncode: int | None) -> str:
    """"exit code 3", or the signal that killed the command: 128 + N through the shell, the
    sandbox or the reaper (which is how they report the command's death). Negative (from
    Popen) is the death of the process the engine started, the supervisor itself
    (loop/run/reap.py, or bwrap): not the command's, and not the OOM killer's doing (it picks
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


def run_experiment(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path,
                   metric_pattern: str, memory_pattern: str,
                   evaluate: str = "", evaluate_cwd: Path | None = None,
                   evaluate_timeout_s: float = 0.0, evaluate_env: dict | None = None,
                   after_run=None, limits: Limits | None = None) -> RunResult:
    """Run the training command and, when the task has one, the grading command after it.
    With a grading command, the metric comes from the grader's output only.

    `after_run()`, called once the training command has exited 0, makes the checks that
    stand between training and grading (see loop/run/grading.py); it returns None, or a
    (status, reason) that ends the run there. `evaluate_env`: the grader's environment.

    Confinement: the training step may write its folder and $AUTORESEARCH_ARTIFACT_DIR;
    every path only the grader is told about (a value of `evaluate_env` that `env` lacks,
    e.g. the private data) is hidden from it. The grader may write its own folder and the
    artifact folder, and reads those paths. The training step may also fill the data cache
    (`_data_cache`)."""
    limits = limits or Limits()
    patterns = {"metric": metric_pattern, "memory": memory_pattern}
    artifacts = [env["AUTORESEARCH_ARTIFACT_DIR"]] if env.get("AUTORESEARCH_ARTIFACT_DIR") else []
    grader_only = [v for k, v in (evaluate_env or {}).items()
                   if env.get(k) != v and v.startswith("/") and os.path.exists(v)]
    train = execute(command, cwd, env, timeout_s, log_path, patterns=patterns, limits=limits,
                    writable=[*artifacts, *_data_cache(env)], hidden=grader_only)
    returncode, timed_out, wall = train.returncode, train.timed_out, train.wall_s
    memory = train.output.value("memory")
    # With a grading step the script's own print is never the metric (not even a NaN it
    # printed, which would read as "diverged")
    metric = None if evaluate else train.output.value("metric")
    if after_run is not None and returncode == 0 and not timed_out:
        stopped = after_run()
        if stopped:
            with open(log_path, "a") as log:
                log.write(f"\n=== {stopped[0]}: {stopped[1]} ===\n")
            return RunResult(stopped[0], None, returncode, wall,
                             None if memory is None else memory / 1024.0, log_path, stopped[1])
    graded = bool(evaluate and returncode == 0 and not timed_out)
    if graded:
        grade_log = log_path.with_name(log_path.stem + ".grade.log")
        grade = execute(evaluate, evaluate_cwd or cwd, evaluate_env or env, evaluate_timeout_s,
                        grade_log, patterns=patterns, limits=limits,
                        writable=[*artifacts, evaluate_cwd or cwd], readonly=grader_only)
        returncode, timed_out = grade.returncode, grade.timed_out
        wall += grade.wall_s
        metric = grade.output.value("metric")
        memory = memory if memory is not None else grade.output.value("memory")
        with open(log_path, "a") as log:       # one log per run, the grader's part marked
            log.write(f"\n=== evaluate: {evaluate} ===\n{read_tail(grade_log, 2 * 2**20)}")
    status, detail = classify(returncode, timed_out, metric)
    if graded and status == TIMEOUT:   # training had finished: the grader ran out, not it
        detail = f"grading timed out: the grader ran past grade_timeout_s " \
                 f"({evaluate_timeout_s:g}s) after training finished in {train.wall_s:.0f}s"
    if graded and status == CRASH:
        detail = grader_error(read_tail(grade_log), detail)
    elif status == CRASH:
        detail = handover_error(read_tail(log_path), detail)
    if status == CRASH and limits.memory_limit_gb and _mentions_oom(log_path):
        detail = f"out of memory: the run hit memory_limit_gb={limits.memory_limit_gb:g} " \
                 f"({detail})"
    return RunResult(status, metric if status in (OK, DIVERGED) else None, returncode, wall,
                     None if memory is None else memory / 1024.0, log_path, detail)


def _compile_cache(env: dict) -> list[Path]:
    """torch.compile's and Triton's caches, kept across runs (a recompile costs minutes on a
    GPU) in the data cache's `compile/` folder, writable to both steps; sets the variables
    unless the task set them. Returns the folder to bind writable, if any."""
    folders = _data_cache(env)
    if not folders:
        return []
    compiled = folders[0] / "compile"
    for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        if var not in env:
            env[var] = str(compiled / sub)
            (compiled / sub).mkdir(parents=True, exist_ok=True)
    return [compiled]


def _data_cache(env: dict) -> list[Path]:
    """The data cache the training step may fill (a task generating its data on first use):
    $AUTORESEARCH_CACHE, else ~/.cache/autoresearch. It is shared by runs and read-only to
    the grader; a grader must not trust data a run could have written there (README)."""
    folder = Path(env.get("AUTORESEARCH_CACHE") or Path.home() / ".cache" / "autoresearch")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return [folder]


def _mentions_oom(log_path: Path) -> bool:
    tail = read_tail(log_path, 20_000)
    return any(sign in tail for sign in OOM_SIGNS)
