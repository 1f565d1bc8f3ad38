"""A one-node Slurm cluster for the tests: the one running (`$SLURM_CONF` answering `sinfo`),
else one started by tests/slurm/start.sh once per session, as root, under
$AUTORESEARCH_SLURM_ROOT (default /tmp/autoresearch-slurm). Skips with the reason when it
cannot be had: not root, no apt to install the packages, a daemon that does not start."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require

START = Path(__file__).parent / "slurm" / "start.sh"
ROOT = os.environ.get("AUTORESEARCH_SLURM_ROOT", "/tmp/autoresearch-slurm")


def _answers() -> bool:
    if not shutil.which("sinfo"):
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                          timeout=30)
    return done.returncode == 0 and any(s.startswith(("idle", "mix", "alloc"))
                                        for s in done.stdout.split())


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """$SLURM_CONF of a cluster with an idle node (set in os.environ for the clients)."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        require("slurm", "submitit is not installed (pip install -e '.[slurm]')")
    conf = os.environ.get("SLURM_CONF") or f"{ROOT}/etc/slurm.conf"
    if Path(conf).exists():
        os.environ["SLURM_CONF"] = conf
        if _answers():
            return conf
    if os.geteuid() != 0:
        require("slurm", "no Slurm cluster answers and starting one needs root "
                "(tests/slurm/start.sh)")
    done = subprocess.run(["bash", str(START), ROOT], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        require("slurm", f"could not start a one-node Slurm cluster (tests/slurm/start.sh): {why}")
    os.environ["SLURM_CONF"] = f"{ROOT}/etc/slurm.conf"
    if not _answers():
        require("slurm", "tests/slurm/start.sh ran but sinfo shows no idle node")
    return os.environ["SLURM_CONF"]
