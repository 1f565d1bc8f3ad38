"""What a run on another node needs besides its commit, and how it gets there (Ray, Slurm).

A task's protected grading trusts data outside git: the `private` folder, the `held_out` and
`read_only` paths, and the targets of its `inputs` links. The guard (loop/run/grading.py)
digests them on the head when the loop starts; a run on a node is graded against those
digests, so the node must hold the same bytes. At backend start a probe (`probe`: a Ray task
on every node, one short Slurm job) digests each path where the runs will be, and `plan`
decides, per path:

- the node sees it with the head's digest (a shared file system): used in place;
- it does not: shipped with every run (one tar, at most SHIP_LIMIT in all), then
  - `private` and `inputs` (the steps find them through $AUTORESEARCH_PRIVATE_DIR and the
    links) are unpacked in the run's temporary folder and the run pointed there;
  - `held_out` and `read_only` (paths the task's code may open by name, as karpathy's
    prepare.py opens ~/.cache/autoresearch) are put at the same path on the node when it has
    nothing there, once per node (kept for later runs and nights), never over a different
    copy;
- otherwise the loop refuses to start, in one line: over the limit, a different copy of a
  held_out or read_only path at that path on the node, or a path the node cannot create.

On the node, `arrive` makes the data present before the run; the guard then checks it by
hash there before every grading, so a copy changed on the node is `tampered`, as locally."""
from __future__ import annotations

import copy
import io
import os
import shutil
import tarfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from loop.errors import UsageError
from loop.run import grading

SHIP_LIMIT = 256 * 2**20      # bytes shipped with the runs, all paths together
SAME_PATH = ("held_out", "read_only")   # put at the head's path on a node (code opens them)


@dataclass(frozen=True)
class Need:
    """One path a run needs, with the digest the guard took of it on the head."""
    kind: str                 # private | held_out | read_only | input
    path: str                 # absolute, on the head
    digest: str | None
    full_bytes: int           # files over this are digested by size and mtime
    size: int = 0             # bytes (what shipping it costs)


@dataclass(frozen=True)
class Reach:
    """The plan every run of the night carries: what it needs, what comes shipped (the
    tar's members are named by the need's index), and where the probe ran."""
    needs: tuple[Need, ...] = ()
    shipped: tuple[int, ...] = ()
    probed: str = ""


class Unreached(Exception):
    """A run's node does not hold what the run needs (a node the start probe did not see)."""


def needs_of(task, guard: grading.Guard) -> tuple[Need, ...]:
    """The paths a run of `task` needs on its node, with the guard's digests."""
    out = []
    if task.grade_command and guard.private is not None:
        out.append(Need("private", str(guard.private), guard.private_digest,
                        grading.FULL_HASH_BYTES))
    out += [Need("held_out", str(p), d, grading.FULL_HASH_BYTES)
            for p, d in zip(guard.held_out, guard.held_out_digest)]
    out += [Need("read_only", str(p), d, grading.READ_ONLY_FULL_BYTES)
            for p, d in zip(guard.read_only, guard.read_only_digest)]
    out += [Need("input", target, d, grading.READ_ONLY_FULL_BYTES)
            for (_, target), d in zip(guard.inputs, guard.inputs_digest)]
    return tuple(replace(n, size=size_of(Path(n.path))) for n in out)


def size_of(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir()
                   or p.is_symlink())
    return path.lstat().st_size if os.path.lexists(path) else 0


def probe(needs: tuple[Need, ...]) -> dict:
    """On a node: its name, each path's digest there (None: not there), and whether a
    missing path could be created there."""
    digests, creatable = [], []
    for need in needs:
        path = Path(need.path)
        digests.append(grading.digest_path(path, need.full_bytes))
        creatable.append(os.path.lexists(path) or _creatable(path))
    return {"node": os.uname().nodename, "digests": digests, "creatable": creatable}


def _creatable(path: Path) -> bool:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)


def plan(needs: tuple[Need, ...], answers: list[dict], limit: int = SHIP_LIMIT) -> Reach:
    """What to ship, from the probes' answers; UsageError (one line) when a node cannot be
    given what it lacks."""
    shipped: dict[int, str] = {}            # index -> the first node lacking it
    for answer in answers:
        node = answer["node"]
        for i, need in enumerate(needs):
            seen = answer["digests"][i]
            if seen == need.digest or i in shipped:
                continue
            if need.kind in SAME_PATH and seen is not None:
                raise UsageError(f"node {node} has another {need.path} than this machine "
                                 f"(the {need.kind.replace('_', '-')} data differ); make them "
                                 f"the same, or remove it there to have it copied")
            if need.kind in SAME_PATH and not answer["creatable"][i]:
                raise UsageError(f"node {node} cannot see {need.path} and cannot create it "
                                 f"(no write access); put it on a filesystem the nodes share")
            shipped[i] = node
    total = sum(needs[i].size for i in shipped)
    if total > limit:
        i = max(shipped, key=lambda k: needs[k].size)
        more = "" if human(total) == human(needs[i].size) else \
            f"; {human(total)} with the rest it lacks"
        raise UsageError(f"node {shipped[i]} cannot see {needs[i].path} ({human(needs[i].size)}"
                         f"{more}, over the {human(limit)} shipped to a node); put it on a "
                         f"filesystem the nodes share")
    return Reach(needs, tuple(sorted(shipped)), answers[0]["node"] if answers else "")


def human(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} bytes"


def notes(reach: Reach) -> list[str]:
    """One line per shipped path, for the start of the night."""
    return [f"node {reach.probed} does not see {reach.needs[i].path}: shipped with each run "
            f"({human(reach.needs[i].size)})" for i in reach.shipped]


# -- the tar ------------------------------------------------------------------------------
def pack(reach: Reach) -> bytes:
    """The shipped paths in one tar, each under `<index>/<its name>`, mtimes to the
    nanosecond (big files are digested by size and mtime)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in reach.shipped:
            path = Path(reach.needs[i].path)
            _add(tar, path, f"{i}/{path.name}")
            if path.is_dir() and not path.is_symlink():
                for sub in sorted(path.rglob("*")):
                    _add(tar, sub, f"{i}/{path.name}/{sub.relative_to(path).as_posix()}")
    return buf.getvalue()


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(path), arcname=arcname)
    ns = path.lstat().st_mtime_ns
    info.pax_headers = {**info.pax_headers, "mtime": f"{ns // 10**9}.{ns % 10**9:09d}"}
    if info.isfile():
        with open(path, "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


def unpack(data: bytes | str, dest: Path, indexes) -> Path:
    """The members of `indexes` from `data` (the tar, or a file holding it) under `dest`."""
    wanted = {str(i) for i in indexes}
    fileobj = io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb")
    with fileobj, tarfile.open(fileobj=fileobj) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/", 1)[0] in wanted]
        tar.extractall(dest, members, filter="data")
        for member in reversed(members):      # contents first, then their folders
            stamp = member.pax_headers.get("mtime", "")
            if "." in stamp:
                sec, frac = stamp.split(".")
                ns = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
                os.utime(dest / member.name, ns=(ns, ns), follow_symlinks=False)
    return dest


# -- on the node --------------------------------------------------------------------------
def arrive(reach: Reach | None, data, tmp: Path, task, guard):
    """(task, guard) for a run on this node, the shipped data made present: unpacked in
    `tmp` (private, inputs: the task and guard pointed there) or put at its own path
    (held_out, read_only). Unreached when a path used in place is not here."""
    if reach is None or not reach.needs:
        return task, guard
    node = os.uname().nodename
    for i, need in enumerate(reach.needs):
        if i not in reach.shipped and not os.path.lexists(need.path):
            raise Unreached(f"node {node} cannot see {need.path} (node {reach.probed} saw it "
                            f"at start); put it on a filesystem all the nodes share")
    wanted = [i for i in reach.shipped if reach.needs[i].kind not in SAME_PATH
              or not os.path.lexists(reach.needs[i].path)]
    if not wanted:
        return task, guard
    where = unpack(data, tmp / "shipped", wanted)
    guard = copy.copy(guard)
    for i in wanted:
        need = reach.needs[i]
        copy_at = where / str(i) / Path(need.path).name
        if need.kind in SAME_PATH:
            _put(copy_at, Path(need.path), node)
        elif need.kind == "private":
            task = replace(task, private=str(copy_at))
            guard.private = copy_at
        else:
            links = tuple((rel, str(copy_at) if target == need.path else target)
                          for rel, target in task.input_links)
            task = replace(task, input_links=links)
            guard.inputs = links
    guard.task = task
    return task, guard


def _put(copy_at: Path, path: Path, node: str) -> None:
    """`copy_at` moved to `path` in one step (a run racing us on this node puts the same)."""
    partial = path.with_name(f".{path.name}.autoresearch-{uuid.uuid4().hex[:8]}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(copy_at), str(partial))
        os.rename(partial, path)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True) if partial.is_dir() else \
            partial.unlink(missing_ok=True)
        if not os.path.lexists(path):
            raise Unreached(f"node {node} cannot put {path} in place ({exc.strerror or exc}); "
                            f"put it on a filesystem the nodes share") from None
