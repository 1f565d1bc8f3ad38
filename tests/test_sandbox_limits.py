"""What one sandboxed run may hold (issue 37): every byte it writes to an in-memory
filesystem counts within its `memory_limit_gb`, and as root too its processes are
bounded. Real bwrap, real processes."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import git, needs_sandbox, no_sandbox, require, run_cli
from loop.run.process import REAPER, Limits, execute, experiment_env

FILL = textwrap.dedent("""
    import errno, os, subprocess
    def shmem():
        for line in open("/proc/meminfo"):
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    def fill(path, mib):
        written = 0
        try:
            with open(path, "wb") as f:
                for _ in range(mib):
                    f.write(b"x" * 2**20)
                    written += 1
                f.flush()
        except OSError as exc:
            print(f"{path}: stopped ({errno.errorcode.get(exc.errno, exc.errno)})")
        print(f"{path}: wrote {written} MiB")
        return written
    for folder in ("/tmp", "/var/tmp", "/run"):
        kind = subprocess.run(["stat", "-f", "-c", "%T", folder], capture_output=True,
                              text=True).stdout.strip()
        print(f"{folder}: {kind}")
    before = shmem()
    fill("/tmp/fill", 1024)
    print(f"RAM grew by {(shmem() - before) // 2**20} MiB after /tmp")
    os.remove("/tmp/fill")
    for path in ("/dev/fill", os.path.expanduser("~/fill")):
        try:
            open(path, "wb").write(b"x")
            print(f"{path}: WRITTEN")
        except OSError as exc:
            print(f"{path}: refused ({errno.errorcode.get(exc.errno, exc.errno)})")
    before = shmem()
    print(f"shared memory before /dev/shm: {before // 2**20} MiB", flush=True)
    with open("/dev/shm/fill", "wb") as f:   # ENOSPC at the limit, or the run's cgroup
        for mib in range(1, 1025):           # kills it first (its own pages count too)
            f.write(b"x" * 2**20)
            f.flush()
            if mib % 32 == 0:
                print(f"/dev/shm: {mib} MiB", flush=True)
""")


@needs_sandbox
def test_in_memory_folders_hold_no_more_than_the_memory_limit(tmp_path):
    """With memory_limit_gb 0.5: 1 GiB written to /tmp lands on disk (the host's shared
    memory does not grow by it), /dev/shm stops at 0.5 GiB, /dev and HOME take no file."""
    (tmp_path / "fill.py").write_text(FILL)
    ended = execute(f"{sys.executable} fill.py", tmp_path, experiment_env(), 120,
                    tmp_path / "log", limits=Limits("required", memory_limit_gb=0.5))
    said = (tmp_path / "log").read_text()
    for folder in ("/tmp", "/var/tmp", "/run"):
        assert f"{folder}: tmpfs" not in said, said       # on disk: the run's scratch
    assert "/tmp/fill: wrote 1024 MiB" in said, said
    grew_tmp = int(said.split("RAM grew by ")[1].split()[0])
    assert grew_tmp < 256, said                # other programs on the host may move it a bit
    assert "/dev/fill: refused" in said and "/fill: WRITTEN" not in said, said
    assert "/dev/shm: 512 MiB" not in said and "/dev/shm: 32 MiB" in said, said
    assert ended.returncode != 0, said         # No space left on device, or killed
    assert not list(tmp_path.glob(".scratch-*")), "the scratch (its /tmp) outlives the run"


SHARED = """
import mmap, os
fd = os.memfd_create("hold")
os.ftruncate(fd, 1 << 30)
held = [mmap.mmap(fd, 1 << 30), mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED)]
for i, region in enumerate(held):
    for at in range(0, 1 << 30, 1 << 20):
        region[at:at + (1 << 20)] = b"x" * (1 << 20)
    print(f"holding {i + 1} GiB", flush=True)
"""


def memory_bound_missing() -> str | None:
    from loop.run import cgroup
    said = cgroup.mechanism("memory")
    return said if said.startswith("none") else None


@pytest.mark.parametrize("mode", ["required", "off"])
def test_shared_memory_counts_within_the_runs_memory_limit(tmp_path, mode):
    """RLIMIT_DATA does not count memfd or MAP_SHARED memory: with memory_limit_gb 0.5 a
    run held 2 GiB that way. The run's cgroup counts them: it is killed before 1 GiB, and
    the run says out of memory."""
    require("memory bound", memory_bound_missing())
    if mode == "required":
        require("sandbox", no_sandbox())
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    (tmp_path / "hold.py").write_text(SHARED)
    result = run_experiment(RunSpec(f"{sys.executable} hold.py", tmp_path, experiment_env(),
                                    120, tmp_path / "log", r"^score:\s*([0-9.]+)",
                                    limits=Limits(mode, memory_limit_gb=0.5)))
    said = (tmp_path / "log").read_text()
    assert "holding 1 GiB" not in said, said
    assert result.status == "crash" and result.detail.startswith(
        "out of memory: the run hit memory_limit_gb=0.5"), result.detail


# -- processes ---------------------------------------------------------------------------------
SPAWN = """
import subprocess
started = []
for _ in range(500):
    try:
        started.append(subprocess.Popen(["sleep", "60"]))
    except OSError as exc:
        print(f"refused: {exc}")
        break
print(f"started {len(started)}")
for p in started:
    p.kill()
"""


def process_bound_missing() -> str | None:
    """Why no process bound works here (root without a writable pids cgroup), or None."""
    from loop.run import cgroup
    said = cgroup.mechanism()
    return said if said.startswith("none") else None


@pytest.mark.parametrize("mode", ["required", "off"])
def test_a_run_cannot_start_more_processes_than_its_limit(tmp_path, mode):
    """500 sleeps with max_processes 64 (as root here: RLIMIT_NPROC would not bind): the
    run is refused a fork before 64, sandboxed or not; its group is gone after."""
    require("process bound", process_bound_missing())
    if mode == "required":
        require("sandbox", no_sandbox())
    from loop.run import cgroup
    (tmp_path / "spawn.py").write_text(SPAWN)
    ended = execute(f"{sys.executable} spawn.py", tmp_path, experiment_env(), 120,
                    tmp_path / "log", limits=Limits(mode, max_processes=64))
    said = (tmp_path / "log").read_text()
    assert ended.returncode == 0, said
    started = int(said.split("started ")[1].split()[0])
    assert "refused: [Errno 11]" in said and 40 < started < 64, said
    base, _, _ = cgroup.parent("pids")
    if base is not None:
        assert not list(base.glob(f"autoresearch-{os.getpid()}-*")), "the run's group stays"



WHERE = """
import os, resource
print("data", resource.getrlimit(resource.RLIMIT_DATA)[0])
print("groups", open("/proc/self/cgroup").read().replace(chr(10), " "))
pid = os.getpid()
while pid > 1:
    stat = open(f"/proc/{pid}/stat").read()
    pid = int(stat.rsplit(")", 1)[1].split()[1])
    cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    print("parent", pid, cmd)
"""


def test_the_runs_supervisor_takes_its_bounds_itself_and_all_it_starts_is_held(tmp_path):
    """The run's supervisor (loop/run/reap.py), the engine's own child, takes the run's
    bounds before it starts anything: the command it runs is in the run's pids group, under
    the RLIMIT_DATA cap."""
    require("process bound", process_bound_missing())
    from loop.run import cgroup
    (tmp_path / "where.py").write_text(WHERE)
    ended = execute(f"{sys.executable} where.py", tmp_path, experiment_env(), 60,
                    tmp_path / "log", limits=Limits("off", memory_limit_gb=4))
    said = (tmp_path / "log").read_text()
    assert ended.returncode == 0, said
    assert f"data {4 * 2**30}" in said, said
    parents = [line.split(" ", 2) for line in said.splitlines() if line.startswith("parent ")]
    engine = next(i for i, (_, pid, _) in enumerate(parents) if int(pid) == os.getpid())
    supervisor = parents[engine - 1][2]
    assert supervisor.split()[1:4] == ["-I", "-S", str(REAPER)], parents
    if cgroup.parent("pids")[0] is not None:
        assert f"autoresearch-{os.getpid()}-" in said.split("groups ")[1], said

BOMB = """\
import os, time
LR = 0.5
if LR != 0.5:                      # the proposal: a fork bomb
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
print(f"val loss {LR:.4f}")
"""


@needs_sandbox
@pytest.mark.slow
def test_a_fork_bomb_as_root_ends_at_the_time_box_and_the_night_goes_on(tmp_path,
                                                                          mlflow_uri):
    """Issue 37 item 5: the mutated LR starts a fork bomb; bounded at 64 processes it is
    killed at the time box, and the next iteration runs."""
    require("process bound", process_bound_missing())
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "task.yaml").write_text(
        "name: bomb\neditable: [train.py]\nrun: python train.py\n"
        "metric: {name: val_loss, direction: minimize, pattern: 'val loss ([0-9.]+)'}\n"
        "time_budget_s: 2\ngrace_s: 0.5\nsearch_space: {LR: {range: [0.1, 0.9]}}\n")
    (root / "train.py").write_text(BOMB)
    (root / "autoresearch.yaml").write_text(
        "task: .\niterations: 2\nsandbox: required\nmax_processes: 64\n"
        "proposer:\n  kind: mutate\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "task")
    ran = run_cli("run", "--tag", "t", cwd=root)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    with open(root / ".autoresearch" / "t" / "results.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert len(rows) == 3, rows                       # baseline, then both iterations
    assert rows[0]["status"] == "keep" or rows[0]["status"] == "baseline", rows
    assert [r["status"] for r in rows[1:]] == ["timeout", "timeout"], rows


@pytest.mark.parametrize("value", ["0", "4", "1.5", "true", "lots"])
def test_a_bad_max_processes_is_refused_in_one_line(tmp_path, value):
    from loop.errors import ConfigError
    from loop.setup.config import load_config
    (tmp_path / "autoresearch.yaml").write_text(f"task: .\nmax_processes: {value}\n")
    said = r"max_processes(: expected an integer| must be a whole number >= 8)"
    with pytest.raises(ConfigError, match=said):
        load_config(tmp_path / "autoresearch.yaml")


def test_groups_an_engine_killed_outright_left_are_removed_by_the_next(tmp_path):
    """A group whose engine is gone (its pid no longer alive) is removed when groups are
    next looked for; a live engine's stays."""
    require("process bound", process_bound_missing())
    from loop.run import cgroup
    base, _, _ = cgroup.parent("pids")
    if base is None:
        pytest.skip("processes bounded by RLIMIT_NPROC here: no group to leave")
    gone = _dead_pid()
    stale, live = base / f"autoresearch-{gone}-0", base / f"autoresearch-{os.getpid()}-999999"
    stale.mkdir()
    live.mkdir()
    try:
        cgroup._sweep(base)
        assert not stale.exists() and live.exists()
    finally:
        for group in (stale, live):
            if group.exists():
                group.rmdir()


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
