"""Run one experiment command, time-boxed, in its own process group; parse its metric.

Knows nothing about git. The child gets a scrubbed environment: no API keys, no tokens,
no tracking credentials, only what a training script needs plus the task's own `env`."""
from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

OK, CRASH, TIMEOUT, DIVERGED, NO_METRIC = "ok", "crash", "timeout", "diverged", "no_metric"
TERM_GRACE_S = 5.0  # after SIGTERM, how long the group gets before SIGKILL

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
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items()
           if (k in _PASS or k.startswith(_PASS_PREFIXES)) and not _SECRET.search(k)}
    # `python` in a task's command means the interpreter running the engine (its venv).
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def run_command(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path,
                append: bool = False) -> tuple[int | None, bool, float]:
    """Run `command` in a new session; kill the whole group on timeout or interrupt.
    Returns (returncode or None when killed, timed_out, wall seconds)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log_path, "ab" if append else "wb") as log:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
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
    return returncode, timed_out, time.monotonic() - start


def _die_with_parent() -> None:
    """Linux: if the engine itself is killed (SIGKILL, OOM), its experiment dies too."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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
        return CRASH, f"exit code {returncode}"
    if metric is None:
        return NO_METRIC, "exited 0 but printed no metric"
    return OK, ""


def grader_error(grade_log: str, fallback: str) -> str:
    """A failed grader's reason: its last `error: ...` line (else its last line), so a refused
    submission reads as the grader's word, not as `exit code 1`."""
    lines = [line.strip() for line in grade_log.splitlines() if line.strip()]
    said = [line for line in lines if line.lower().startswith("error")] or lines[-1:]
    return f"grader: {said[-1][:300]} ({fallback})" if said else fallback


def run_experiment(command: str, cwd: Path, env: dict, timeout_s: float, log_path: Path,
                   metric_pattern: str, memory_pattern: str,
                   evaluate: str = "", evaluate_cwd: Path | None = None,
                   evaluate_timeout_s: float = 0.0, evaluate_env: dict | None = None,
                   after_run=None) -> RunResult:
    """Run the training command and, when the task has one, the grading command after it.
    With a grading command, the metric comes from the grader's output only.

    `after_run()`, called once the training command has exited 0, makes the checks that
    stand between training and grading (see loop/grading.py); it returns None, or a
    (status, reason) that ends the run there. `evaluate_env`: the grader's environment."""
    returncode, timed_out, wall = run_command(command, cwd, env, timeout_s, log_path)
    metric_text = read_tail(log_path)
    if after_run is not None and returncode == 0 and not timed_out:
        stopped = after_run()
        if stopped:
            with open(log_path, "a") as log:
                log.write(f"\n=== {stopped[0]}: {stopped[1]} ===\n")
            memory = parse_metric(read_tail(log_path), memory_pattern)
            return RunResult(stopped[0], None, returncode, wall,
                             None if memory is None else memory / 1024.0, log_path, stopped[1])
    graded = bool(evaluate and returncode == 0 and not timed_out)
    if graded:
        grade_log = log_path.with_name(log_path.stem + ".grade.log")
        returncode, timed_out, grade_wall = run_command(
            evaluate, evaluate_cwd or cwd, evaluate_env or env, evaluate_timeout_s, grade_log)
        wall += grade_wall
        metric_text = read_tail(grade_log)
        with open(log_path, "a") as log:       # one log per run, the grader's part marked
            log.write(f"\n=== evaluate: {evaluate} ===\n{metric_text}")
    metric = parse_metric(metric_text, metric_pattern)
    status, detail = classify(returncode, timed_out, metric)
    if graded and status == CRASH:
        detail = grader_error(metric_text, detail)
    memory = parse_metric(read_tail(log_path), memory_pattern)
    return RunResult(status, metric if status in (OK, DIVERGED) else None, returncode, wall,
                     None if memory is None else memory / 1024.0, log_path, detail)
