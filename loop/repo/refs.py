"""Reading a branch's commit, or a worktree's HEAD, from git's files without running git,
where the files say it plainly: the engine asks after every run (was the branch moved, was
the worktree switched?), and a git process costs a few milliseconds on the loop's serial path.

Each reader answers only when what it read can mean one thing to git (a loose ref holding
a full object id; a `.git` file and HEAD exactly as `git worktree add` writes them), and
None otherwise (a packed ref, a symlink, a symbolic ref, another ref backend, anything odd):
the caller then asks git, as before. So an answer here is git's answer. Knows nothing about
the loop; never writes."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_OBJECT_ID = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64})\n")


def _read_plain(path: Path, limit: int = 4096) -> bytes | None:
    """A regular file's bytes (a symlink or anything else: None)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return os.read(fd, limit) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def loose_ref(common_dir: Path, ref: str) -> str | None:
    """The object id a loose ref file holds (a loose ref wins over packed-refs), or None
    when git must be asked."""
    if not ref.startswith("refs/") or ".." in ref.split("/"):
        return None
    data = _read_plain(Path(common_dir) / ref)
    found = _OBJECT_ID.fullmatch(data) if data is not None else None
    return found.group(1).decode() if found else None


def head_is_branch(worktree: Path, admin_dir: Path, ref: str) -> bool:
    """Whether `worktree`'s HEAD is plainly the symbolic ref `ref`: its `.git` file names
    `admin_dir` and that folder's HEAD says `ref: <ref>`. False means: ask git."""
    link = _read_plain(Path(worktree) / ".git")
    if link != f"gitdir: {admin_dir}\n".encode():
        return False
    return _read_plain(Path(admin_dir) / "HEAD") == f"ref: {ref}\n".encode()


def detached_head(worktree: Path, admin_dir: Path) -> str | None:
    """The commit `worktree`'s HEAD holds when it plainly holds one (detached: a slot's
    worktree), its `.git` file naming `admin_dir`; None means: ask git."""
    link = _read_plain(Path(worktree) / ".git")
    if link != f"gitdir: {admin_dir}\n".encode():
        return None
    data = _read_plain(Path(admin_dir) / "HEAD")
    found = _OBJECT_ID.fullmatch(data) if data is not None else None
    return found.group(1).decode() if found else None
