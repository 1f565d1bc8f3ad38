"""The experiment's OS sandbox: bubblewrap (`bwrap`) argv for one run, and whether it works here.

Inside the sandbox a run has:
- no network: its own network namespace holding only a loopback device of its own; the
  endpoints a task declares (`network`, `grader_network`) are bridged into it, each to one
  host:port (loop/run/netbridge.py);
- its own PID namespace: the engine and every other process are invisible (a fresh /proc),
  and when the run's first process ends, or the engine dies, the kernel kills everything
  left in the namespace, double-forked daemons included (`--die-with-parent`);
- a read-only view of the filesystem, writable only in: its working folder (the worktree;
  the worktree's `.git` file stays read-only), the artifact folder, a scratch folder
  that is its $TMPDIR, and /tmp, /run and /var/tmp, which are empty (the host's hold other
  programs' sockets, such as an ssh-agent's) folders of that scratch, on disk; /dev/shm, in
  memory, sized to the run's memory limit if it has one; so the repository's `.git`, the
  engine's state folder and the user's checkout can be read (outside HOME) but not
  changed. Nothing else in memory is writable (HOME's and the hidden paths' covers and
  /dev are read-only), so a run's files hold no RAM past its limit;
- HOME empty, but for an allow-list of what a run needs, read-only unless it is one of the
  writable folders above: the engine's Python (venv, base install, user site-packages, the
  `loop` package), the task's own interpreter's environment (the caller passes its roots
  in `readonly`: loop/setup/interpreter.py), the folders on PATH, the data cache, the usual
  model caches
  (~/.cache/huggingface, ~/.cache/torch), a task's `caches` (its data cache under HOME,
  `~/.cache/<name>`, passed in `readonly`: loop/setup/caches.py), and the absolute paths
  the run's environment names (a task's `env`: its data). Credentials kept anywhere else in HOME
  (~/.config/git/credentials, ~/.npmrc, ...) are not there;
- paths hidden from it: for the training step, whatever only the grader is told about
  (the `private:` data), covered by an empty folder; for both steps, the usual places of
  credentials under HOME (`CREDENTIALS`: ~/.ssh, ~/.aws, ~/.netrc, ...), in case one lies
  in an allowed folder;
- the GPU: /dev/nvidia*, /dev/nvidia-caps and /dev/dri are bound when present.

What it does not do: it filters no system calls (no seccomp), limits neither CPU nor disk
use, and the run can still read every other file its user can read outside HOME, /tmp and
/run."""
from __future__ import annotations

import functools
import glob
import os
import sys
import shutil
import subprocess
from pathlib import Path

from loop.errors import UsageError
from loop.kinds import SANDBOX_MODES

GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")
EMPTIED = ("/tmp", "/run", "/var/tmp")     # hidden: sockets of other programs live there
PROBE_TMPFS_BYTES = 1 << 20     # an emptied folder's size where there is no scratch (probes)
# Model caches under HOME a run may read (weights fetched before the night: no network inside)
HOME_CACHES = (".cache/huggingface", ".cache/torch")
# Where tools keep credentials under HOME: hidden even inside an allowed folder
CREDENTIALS = (".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".netrc",
               ".git-credentials", ".pypirc", ".config/gcloud", ".config/gh",
               ".cache/huggingface/token", ".huggingface/token", ".databrickscfg",
               ".mlflow", ".config/openai", ".wandb", ".kaggle")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why the sandbox cannot run here, or None when a probe sandbox worked."""
    exe = bwrap_path()
    if exe is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    argv = wrap(["/bin/true"], cwd=Path("/"), writable=(), hidden=(), scratch=None)
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        return f"bwrap cannot create namespaces here ({why}); on Ubuntu 24.04+ an AppArmor " \
               f"profile for bwrap, or sysctl kernel.unprivileged_userns_clone=1, is needed"
    return None


def active(mode: str) -> bool:
    """Whether runs are sandboxed under `mode` (`required` without a sandbox raises)."""
    if mode == "off":
        return False
    reason = unavailable()
    if reason and mode == "required":
        raise UsageError(f"sandbox: required, but {reason}")
    return reason is None


def startup(mode: str, out=print) -> str:
    """Check the sandbox once at start: a one-word state for the MLflow parent run, a warning
    on `out` when `auto` falls back to no sandbox; UsageError (exit 2) when `required` fails."""
    if mode not in SANDBOX_MODES:
        raise UsageError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got '{mode}'")
    if mode == "off":
        out("warning: sandbox: off; experiments run unconfined (network, other processes, "
            "and every file this user can write are within their reach)")
        return "off"
    if active(mode):
        return "bwrap"
    out(f"warning: no sandbox: {unavailable()}. Experiments run unconfined (network, other "
        f"processes, and every file this user can write are within their reach); set "
        f"`sandbox: required` to refuse to run like this")
    return "unavailable"


def wrap(argv: list[str], cwd: Path, writable, hidden, scratch: Path | None,
         readonly=(), hosts_file: Path | None = None,
         memory_bytes: int | None = None) -> list[str]:
    """The bwrap command line running `argv` in `cwd` under the rules in the docstring.
    `writable`: folders the run may change (besides `scratch`); `hidden`: paths it must not
    see at all; `readonly`: paths under the emptied folders it may read (e.g. the grader's
    private data when that lives in /tmp); `memory_bytes`: the run's memory limit, the most
    /dev/shm may hold."""
    cmd = [bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
           "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for pattern in GPU_DEVICES:
        for dev in sorted(glob.glob(pattern)):
            cmd += ["--dev-bind", dev, dev]
    cmd += _shared_memory(memory_bytes, scratch)
    home = _home()
    for folder in EMPTIED:
        if os.path.isdir(folder) and not os.path.islink(folder):
            cmd += _emptied(folder, scratch)
    if home:                # read-only below (`--remount-ro`): no byte can be written there
        cmd += ["--tmpfs", str(home)]
    shown = [p for p in readonly if not (home and _within(home, os.path.realpath(p)))]
    for path in [*shown, *_software_in_emptied(home)]:   # no path that would show all HOME
        if Path(path).exists():
            cmd += ["--ro-bind", str(path), str(path)]
    for path in ([scratch] if scratch else []) + list(writable):
        cmd += ["--bind", str(path), str(path)]
        git_file = Path(path) / ".git"      # a worktree's pointer to the repository
        if git_file.exists():
            cmd += ["--ro-bind", str(git_file), str(git_file)]
    for path in shown:       # read-only inside a writable folder (a tokenizer in the cache)
        real = os.path.realpath(path)
        if Path(path).exists() and any(real != os.path.realpath(w) and
                                       _within(Path(real), os.path.realpath(w))
                                       for w in writable):
            cmd += ["--ro-bind", str(path), str(path)]
    needed = [Path(cwd), *map(Path, writable)]
    for path in [*hidden, *(Path(os.path.expanduser("~")) / rel for rel in CREDENTIALS)]:
        if any(n == Path(path) or Path(path) in n.parents for n in needed):
            continue                    # hiding it would hide what the run works in
        if Path(path).is_dir():       # an empty cover, read-only: no RAM to fill
            cmd += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif Path(path).exists():
            cmd += ["--ro-bind", "/dev/null", str(path)]
    if hosts_file:              # declared endpoints by host name (loop/run/netbridge.py)
        cmd += ["--ro-bind", str(hosts_file), "/etc/hosts"]
    if home and os.path.isdir(home):    # what is in it now (the allowed folders) stays
        cmd += ["--remount-ro", str(home)]   # as bound; nothing new can be written there
    # /dev's own tmpfs (device nodes, links): read-only, so no file fills RAM there; the
    # devices still open for writing, /dev/shm and /dev/pts are mounts of their own
    cmd += ["--remount-ro", "/dev", "--chdir", str(cwd), "--"]
    return cmd + list(argv)


def _emptied(folder: str, scratch: Path | None) -> list[str]:
    """`folder` (/tmp, /run, /var/tmp) shown empty and writable: a fresh folder in the run's
    scratch, on disk, so what a run writes there holds no RAM (and is gone with the
    scratch); without a scratch (the probes), an in-memory one of at most 1 MiB."""
    if scratch is None:
        return ["--size", str(PROBE_TMPFS_BYTES), "--tmpfs", folder] if sizes_tmpfs() \
            else ["--tmpfs", folder]
    disk = Path(scratch) / ".emptied" / folder.strip("/").replace("/", "-")
    disk.mkdir(parents=True, exist_ok=True)
    disk.chmod(0o1777)              # as /tmp is: writable by whatever user the run is
    return ["--bind", str(disk), folder]


def _shared_memory(memory_bytes: int | None, scratch: Path | None) -> list[str]:
    """/dev/shm (POSIX shared memory: multiprocessing's locks, PyTorch's DataLoader
    workers): a writable mount of its own, since the rest of /dev is read-only (bwrap's
    `--dev` makes it a folder of /dev, where `multiprocessing.Lock()` fails with EROFS). RAM,
    sized within the run's memory limit (no limit: as bwrap sizes a tmpfs); where this bwrap
    cannot size a tmpfs (before 0.5), a folder in the scratch on disk."""
    if sizes_tmpfs():
        size = ["--size", str(memory_bytes)] if memory_bytes else []
        return [*size, "--perms", "1777", "--tmpfs", "/dev/shm"]
    if scratch is None:
        return ["--tmpfs", "/dev/shm"]
    disk = Path(scratch) / ".emptied" / "dev-shm"
    disk.mkdir(parents=True, exist_ok=True)
    disk.chmod(0o1777)
    return ["--bind", str(disk), "/dev/shm"]


@functools.lru_cache(maxsize=1)
def sizes_tmpfs() -> bool:
    """Whether this bwrap takes `--size` (bubblewrap 0.5 and later)."""
    try:
        out = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in out.stdout + out.stderr


def emptied_folders() -> list[Path]:
    """The folders a sandboxed run sees empty but for what `wrap` shows in them."""
    home = _home()
    return [Path(e) for e in EMPTIED] + ([home] if home else [])


def _home() -> Path | None:
    """HOME, to be emptied; None where hiding it would hide the system (HOME unset or /)."""
    home = os.path.realpath(os.path.expanduser("~"))
    return Path(home) if home not in ("/", "") and os.path.isdir(home) else None


def _within(inner: Path, outer: str) -> bool:
    """Whether binding `outer` would show `inner` (it is `inner` or a folder above it)."""
    return outer == str(inner) or str(inner).startswith(outer.rstrip("/") + "/")


def _package_root() -> str:
    """The folder of the `loop` package (this file is loop/run/sandbox.py)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _software_in_emptied(home: Path | None = None) -> list[str]:
    """The engine's Python (its venv, its base install, user site-packages, the `loop`
    package), the folders on PATH and the model caches, when they live under a folder the
    sandbox empties (a clone in /tmp, as CI makes; an install under HOME): the run needs
    them, read-only."""
    import site
    hidden = [*EMPTIED, *([str(home)] if home else [])]
    candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                  _package_root(), site.getusersitepackages(),
                  *os.environ.get("PATH", "").split(os.pathsep),
                  *([str(home / rel) for rel in HOME_CACHES] if home else [])]
    found = []
    for path in candidates:
        for root in (path, os.path.realpath(path)):
            if root and os.path.exists(root) and root not in found and \
                    any(root.startswith(e.rstrip("/") + "/") for e in hidden):
                found.append(root)
    return found


def worktree_root(cwd: Path) -> Path:
    """The folder a run may write in: the git worktree holding `cwd` (found by its `.git`
    file), else `cwd` itself. Never the main checkout (a `.git` folder)."""
    for folder in (cwd, *cwd.parents):
        marker = folder / ".git"
        if marker.is_file():
            return folder
        if marker.is_dir():
            break
    return cwd
