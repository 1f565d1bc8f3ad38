"""Which device each slot of a backend owns: one GPU by CUDA_VISIBLE_DEVICES, or an equal
share of the CPU cores in the thread variables. A slot's variables join its runs'
environment (loop/run/spec.py, `run_envs`)."""
from __future__ import annotations

import os
import shutil
import subprocess

from loop.errors import ConfigError

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "AUTORESEARCH_NUM_THREADS")


def visible_gpus() -> list[str]:
    """GPU ids this process may use: $CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()] \
        if out.returncode == 0 else []


def thread_env(share: int) -> dict[str, str]:
    """A slot's share of the cores, in every thread variable the usual libraries read."""
    return {var: str(share) for var in THREAD_VARS}


def slot_envs(workers: int, devices: tuple[str, ...] | None = None,
              gpus: list[str] | None = None, cores: int | None = None) -> list[dict[str, str]]:
    """The environment each local slot adds to its runs. GPUs: one per slot (`devices` may
    list them, repeats allowed to share one); more slots than GPUs is an error. No GPU: each
    slot gets an equal share of the cores. One slot and no `devices`: nothing is set (as
    before)."""
    if devices:
        if len(devices) < workers:
            raise ConfigError(f"devices lists {len(devices)} device(s) for {workers} workers: "
                              f"list one per worker (repeat an id to share a GPU)")
        return [{"CUDA_VISIBLE_DEVICES": str(d)} for d in devices[:workers]]
    if workers == 1:
        return [{}]
    gpus = visible_gpus() if gpus is None else gpus
    if gpus:
        if workers > len(gpus):
            raise ConfigError(f"{workers} workers but {len(gpus)} visible GPU(s): use "
                              f"--workers {len(gpus)}, or list devices (repeats share a GPU)")
        return [{"CUDA_VISIBLE_DEVICES": gpus[i]} for i in range(workers)]
    return [thread_env(max(1, (cores or os.cpu_count() or 1) // workers))
            for _ in range(workers)]
