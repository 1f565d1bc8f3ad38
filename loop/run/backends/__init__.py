"""Where experiment runs execute: the registry of backends (`--backend`).

`local` runs on this machine (one worktree and device per slot, loop/run/backends/local.py),
`ray` on a Ray cluster (loop/run/backends/ray.py), `slurm` as Slurm jobs
(loop/run/backends/slurm.py); the two remote ones share loop/run/backends/remote.py, and each
gives its slots their devices (loop/run/backends/devices.py). The interface they implement
and `run_in_folder`, which runs a job in every one of them, are loop/run/backends/base.py;
no backend imports this module. A backend is imported only when asked for (ray and
submitit stay out of `autoresearch --help`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from loop.kinds import BACKENDS

if TYPE_CHECKING:
    from loop.run.backends.base import Backend

def make_backend(name: str, **kw) -> Backend:
    """The backend `name` with N slots; every backend takes the same keywords (workspace,
    task, task_rel, guard, workers, slot_root, devices, limits, slurm)."""
    return BACKENDS.get(name)(**kw)
