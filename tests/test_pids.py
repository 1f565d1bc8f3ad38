"""loop/pids.py: the one liveness check every part uses (store's lock owner, check-task's
worktrees, a run's processes, a remote worker's folder)."""
import os
import subprocess
import sys
import time

from loop.pids import alive


def test_a_running_process_is_alive_and_an_exited_unreaped_one_a_zombie_is_not():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert alive(child.pid)
    finally:
        child.kill()
    deadline = time.monotonic() + 10          # killed, not yet waited for: a zombie
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    assert not alive(child.pid)               # os.kill(pid, 0) would still say it runs
    child.wait()
    assert not alive(child.pid)


def test_this_process_is_alive_and_nonsense_pids_are_not():
    assert alive(os.getpid())
    assert not alive(0) and not alive(-1)
