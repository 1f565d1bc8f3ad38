"""`autoresearch doctor`: what protects the experiment on this machine, one probe per line.

Every line comes from trying the thing, not from reading settings: the sandbox probes run
a real sandboxed command (a connection to a listener, a look at this process in /proc, a
write to this folder), git hardening runs the engine's own git calls against a repository
whose config and hooks try to run a program, torch is imported where experiments run.
A check marked required that fails makes the exit status 1."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from loop.repo.gitsafe import run_git
from loop.run import sandbox
from loop.run.process import experiment_env

OK, WARN, MISSING = "ok", "warn", "MISSING"
MIN_FREE_GB = 1.0          # below this a night of runs fails on writes: required
LOW_FREE_GB = 10.0         # below this: a warning
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)


@dataclass
class Check:
    name: str
    state: str       # ok | warn | MISSING
    line: str
    required: bool = False


def inside(argv: list[str], timeout: float = 120, readonly=()) -> subprocess.CompletedProcess:
    """Run `argv` as an experiment would be run: in the sandbox, scrubbed environment."""
    wrapped = sandbox.wrap(argv, Path("/"), writable=(), hidden=(), scratch=None,
                           readonly=readonly)
    return subprocess.run(wrapped, env=experiment_env(), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def check_sandbox(mode: str) -> Check:
    reason = sandbox.unavailable()
    if mode == "off":
        return Check("sandbox", WARN, "off by configuration (sandbox: off)")
    if reason:
        return Check("sandbox", MISSING if mode == "required" else WARN,
                     f"unavailable: {reason}; runs go unconfined", mode == "required")
    version = subprocess.run([sandbox.bwrap_path() or "bwrap", "--version"], capture_output=True,
                             text=True).stdout.strip()
    return Check("sandbox", OK, f"{version or 'bwrap'} works; used for every run "
                                f"(sandbox: {mode})", mode == "required")


def check_network(boxed: bool) -> Check:
    if not boxed:
        return Check("network", WARN, "open: without the sandbox experiments can reach the "
                                      "network and local services")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        probe = inside([sys.executable, "-c", "import socket; socket.create_connection("
                        f"('127.0.0.1', {port}), timeout=2)"])
    if probe.returncode == 0:
        return Check("network", MISSING, f"a sandboxed probe reached 127.0.0.1:{port}", True)
    return Check("network", OK, "blocked: a sandboxed probe could not reach a listener on "
                                "this machine's loopback")


def check_endpoints(boxed: bool, task_path: Path | None) -> Check:
    """What the config's task opens in the sandbox (loop/run/netbridge.py), each endpoint probed
    through the bridge from inside a sandbox, as a run would reach it."""
    from loop.errors import TaskError
    from loop.setup.task import load_task
    try:
        task = load_task(task_path) if task_path else None
    except TaskError as exc:
        return Check("endpoints", WARN, f"cannot read the task: {exc}")
    if task is None or not (task.network or task.grader_network):
        return Check("endpoints", OK, "none declared: the sandbox opens no address"
                     + (f" for {task.name}" if task else ""))
    if not boxed:
        return Check("endpoints", WARN, "not enforced without the sandbox: experiments reach "
                                        "every address, not only the declared ones")
    parts = []
    for value, who in [*((v, "run+grader") for v in task.network),
                       *((v, "grader only") for v in task.grader_network)]:
        parts.append(f"{value} ({who}, {_probe_endpoint(value)})")
    return Check("endpoints", OK, f"{task.name} opens {'; '.join(parts)}; every other "
                                  f"address blocked")


def _probe_endpoint(value: str) -> str:
    from loop.run import netbridge
    bridge = netbridge.Bridge([value])
    try:
        host, port = bridge.inside[value].rsplit(":", 1)
        argv = bridge.argv([sys.executable, "-I", "-S", "-c", "import socket; s = socket."
                            f"create_connection(('{host}', {port}), timeout=5); "
                            "s.settimeout(2); s.sendall(b'\\r\\n\\r\\n'); s.recv(1) or exit(3)"])
        wrapped = sandbox.wrap(argv, Path("/"), writable=(), hidden=(), scratch=None,
                               readonly=bridge.readonly, hosts_file=bridge.hosts_file)
        probe = subprocess.run(wrapped, env=experiment_env(), capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
    finally:
        bridge.close()
    return "answering" if probe.returncode == 0 else "not answering now"


def check_pid(boxed: bool) -> Check:
    if not boxed:
        return Check("PID", WARN, "shared: experiments see every process and can read "
                                  "/proc/<engine>/environ; loop/run/reap.py (a subreaper) ends "
                                  "what a run leaves unless the run kills it first")
    probe = inside(["/bin/sh", "-c", f"test -e /proc/{os.getpid()}/environ && "
                    f"grep -qa doctor /proc/{os.getpid()}/cmdline"])
    if probe.returncode == 0:
        return Check("PID", MISSING, "a sandboxed probe saw this process in /proc", True)
    return Check("PID", OK, "own namespace: the engine's /proc is invisible; everything a "
                            "run starts is killed when it ends or the engine dies")


def check_processes() -> Check:
    """A probe under a bound of 16 processes tries to start 40 sleeps (loop/run/cgroup.py);
    the memory bound is said as found."""
    from loop.run import cgroup
    group = cgroup.Group(16)
    # the probe takes the bounds itself, as a run's supervisor does (loop/run/reap.py)
    code = ("import sys\nfrom loop.run.reap import take_bounds\ntake_bounds(sys.argv[1:])\n"
            "import subprocess\nn = 0\ntry:\n    for n in range(40):\n"
            "        subprocess.Popen(['sleep', '5'])\nexcept OSError:\n    pass\nprint(n)")
    try:
        probe = subprocess.run([sys.executable, "-c", code, *group.reaper_args()],
                               capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        group.close()
    how = cgroup.mechanism()
    started = probe.stdout.strip()
    if how.startswith("none") or started == "39":
        return Check("processes", WARN, f"unbounded: {how}; a fork bomb runs until the time "
                                        f"box (max_processes cannot be held)")
    return Check("processes", OK, f"bounded by {how}: a probe held to 16 started "
                                  f"{started} of 40; memory per run: "
                                  f"{cgroup.mechanism('memory')}")


def check_filesystem(boxed: bool, repo: Path) -> Check:
    if not boxed:
        return Check("filesystem", WARN, "writable: experiments can change every file this "
                                         "user can (the repository's .git and the engine's "
                                         "state included)")
    target = repo / f".doctor-probe-{os.getpid()}"
    # The repository is shown to the probe as it is to a run that can see it (read-only),
    # even where the sandbox empties its folder (a clone under /tmp or HOME): a write that
    # lands in the sandbox's own /tmp is no write into the repository.
    probe = inside(["/bin/sh", "-c", f"test -d '{repo}/.git' && echo x > '{target}'"],
                   readonly=[repo])
    written = target.exists()
    target.unlink(missing_ok=True)
    if probe.returncode == 0 or written:
        return Check("filesystem", MISSING, f"a sandboxed probe wrote into {repo}", True)
    return Check("filesystem", OK, "read-only except the run's worktree, artifact folder, "
                                   "scratch $TMPDIR and data cache; /tmp, /run, /var/tmp "
                                   "empty folders of the scratch, on disk; /dev/shm in memory, "
                                   "sized to memory_limit_gb")


def check_git_hardening() -> Check:
    """The engine's git calls on a repository configured to run programs: do they run?"""
    from loop.repo.workspace import Workspace
    with tempfile.TemporaryDirectory(prefix="autoresearch-doctor-") as tmp:
        repo, fired = Path(tmp) / "repo", Path(tmp) / "fired"
        hooks = Path(tmp) / "hooks"
        hooks.mkdir()
        for hook in ("post-checkout", "reference-transaction", "pre-commit"):
            (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> '{fired}'\n")
            (hooks / hook).chmod(0o755)
        (Path(tmp) / "monitor").write_text(f"#!/bin/sh\necho fsmonitor >> '{fired}'\n")
        (Path(tmp) / "monitor").chmod(0o755)
        run = lambda *a: run_git(a, repo, check=False)  # noqa: E731
        repo.mkdir()
        run("init", "-q", "-b", "main")
        (repo / "f.txt").write_text("x\n")
        run("add", "f.txt")
        run("-c", "user.name=d", "-c", "user.email=d@d", "commit", "-qm", "probe")
        run("config", "core.hooksPath", str(hooks))
        run("config", "core.fsmonitor", str(Path(tmp) / "monitor"))
        try:
            ws = Workspace(repo, "doctor", repo / ".autoresearch" / "doctor" / "worktree")
            ws.open()
            ws.keep_ref("probe", ws.tip())
            ws.restore()
            ws.modified_paths(".")
        except Exception as exc:
            return Check("git hardening", WARN, f"probe failed: {type(exc).__name__}: {exc}")
        ran = sorted(set(fired.read_text().split())) if fired.exists() else []
    if ran:
        return Check("git hardening", WARN, f"the engine's git calls run programs the "
                                            f"repository configures ({', '.join(ran)}): "
                                            f"without the sandbox an experiment could plant one")
    return Check("git hardening", OK, "the engine's git calls ran no repository-configured "
                                      "program (fsmonitor, hooks)")


def check_secrets(boxed: bool) -> Check:
    held = sorted(k for k in os.environ if k not in experiment_env() and SECRET_NAME.search(k))
    names = ", ".join(held[:4]) + (" ..." if len(held) > 4 else "") if held else "none set"
    if boxed:
        return Check("secrets", OK, f"held back from experiments' environment ({names}); "
                                    f"the engine's /proc/<pid>/environ is out of their sight")
    return Check("secrets", WARN, f"held back from experiments' environment ({names}), but "
                                  f"without the sandbox /proc/<engine pid>/environ is "
                                  f"readable to them")


def check_torch(boxed: bool) -> Check:
    code = ("import torch; c = torch.cuda.is_available(); "
            "print(torch.__version__, torch.version.cuda or 'none', torch.cuda.device_count(), "
            "torch.cuda.get_device_name(0) if c else '-', sep='|')")
    argv = [sys.executable, "-c", code]
    try:
        out = inside(argv) if boxed else subprocess.run(
            argv, env=experiment_env(), capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return Check("GPU/torch", WARN, "importing torch took over 120 s")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return Check("GPU/torch", WARN, f"torch does not import for experiments: {last}")
    version, cuda, count, name = out.stdout.strip().split("|")
    where = " inside the sandbox" if boxed else ""
    if int(count):
        return Check("GPU/torch", OK, f"torch {version} (CUDA {cuda}); {count} GPU(s), "
                                      f"{name}, usable{where}")
    return Check("GPU/torch", WARN if cuda != "none" else OK,
                 f"torch {version}; " + ("CPU-only build" if cuda == "none" else
                                         f"built for CUDA {cuda} but no GPU visible{where}"))


def check_mlflow(uri: str | None) -> Check:
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):]).expanduser()
        folder = path.parent if path.parent.parts else Path(".")
        if not os.access(folder if folder.exists() else Path.cwd(), os.W_OK):
            return Check("MLflow store", MISSING, f"{uri}: {folder} is not writable", True)
        size = f"{path.stat().st_size / 2**20:.1f} MB" if path.exists() else "new"
        return Check("MLflow store", OK, f"{uri} ({size}, writable)")
    if uri.startswith(("http://", "https://", "databricks")):
        return Check("MLflow store", OK, f"{uri} (a server; not contacted by doctor)")
    path = Path(uri.removeprefix("file://")).expanduser()
    ok = os.access(path if path.exists() else path.parent, os.W_OK)
    return Check("MLflow store", OK if ok else MISSING,
                 f"{uri} ({'writable' if ok else 'not writable'})", not ok)


def check_disk(folder: Path) -> Check:
    free = shutil.disk_usage(folder).free / 2**30
    state = MISSING if free < MIN_FREE_GB else WARN if free < LOW_FREE_GB else OK
    return Check("disk", state, f"{free:.1f} GB free under {folder}", free < MIN_FREE_GB)


def run_checks(mode: str, tracking_uri: str | None, repo: Path,
               task_path: Path | None = None) -> list[Check]:
    first = check_sandbox(mode)
    boxed = mode != "off" and sandbox.unavailable() is None
    return [first, check_network(boxed), check_endpoints(boxed, task_path),
            check_pid(boxed), check_processes(), check_filesystem(boxed, repo),
            check_git_hardening(), check_secrets(boxed), check_torch(boxed),
            check_mlflow(tracking_uri), check_disk(repo)]


def report(checks: list[Check], out=print) -> int:
    for c in checks:
        out(f"{c.state:<8} {c.name:<14} {c.line}" + ("  [required]" if c.required and
                                                       c.state == MISSING else ""))
    missing = [c.name for c in checks if c.required and c.state == MISSING]
    if missing:
        out(f"doctor: required protection missing: {', '.join(missing)}")
        return 1
    return 0
