"""A worktree made exactly its commit before a run: every file git does not track is gone,
ignored ones too (a discarded attempt's `out/ckpt.pt` must not reach nanoGPT's
`init_from='resume'` in the next run, nor a re-run of the best), and so are the special
files git does not even list (FIFOs, sockets) and nested repositories.

A walk of the tree against the index's list of paths finds every topmost entry the index
does not hold, removes it (made writable first where a run took the permission away) and
checks that nothing untracked is left. (`git clean -ffdx` before it did nothing the walk does
not do, and leaves special files and unwritable folders to it: one git process less on the
loop's serial path, twice an iteration with one slot.) The task's
`inputs:` links are ignored files too: removed here, they are made again before each run
(loop/setup/inputs.py `place`). Only the worktree is touched, never what a link points to:
links are removed, not followed. Only a linked worktree (its `.git` a file) is ever swept,
never a checkout of the user's. Knows nothing about runs or the loop's branch."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from loop.repo.gitsafe import run_git


class Leftover(RuntimeError):
    """Something untracked could not be removed from a worktree: it would reach the run."""


def sweep(worktree: Path, env: dict | None = None) -> None:
    """Remove everything in `worktree` that its index does not track (call it right after
    the index and files were set to the commit). Raises Leftover naming what stays."""
    worktree = Path(worktree)
    if not (worktree / ".git").is_file():      # a user's checkout holds their .venv and data
        raise Leftover(f"{worktree} is not a linked worktree of the engine's: not swept")
    tracked, folders = _tracked(worktree, env)
    left = [p for p in _untracked(worktree, tracked, folders) if not _remove(p)]
    if left:
        raise Leftover(f"could not remove {left[0].relative_to(worktree)} from the worktree "
                       f"({len(left)} left): the next run would see it")


def _tracked(worktree: Path, env: dict | None) -> tuple[set[bytes], set[bytes]]:
    """The index's paths (as git writes them, bytes) and every folder above one."""
    out = run_git(["ls-files", "-z", "--full-name"], worktree, env, binary=True).stdout
    tracked = {p for p in out.split(b"\0") if p}
    folders = {b"/".join(p.split(b"/")[:i]) for p in tracked for i in range(1, p.count(b"/") + 1)}
    return tracked, folders


def _untracked(worktree: Path, tracked: set[bytes], folders: set[bytes]) -> list[Path]:
    """The topmost entries under `worktree` that are neither tracked nor hold tracked files
    (the worktree's own `.git` file excepted); links are not followed."""
    found: list[Path] = []
    stack = [b""]
    root = os.fsencode(worktree)
    while stack:
        rel = stack.pop()
        here = os.path.join(root, rel) if rel else root
        try:
            names = os.listdir(here)
        except OSError:
            _writable(Path(os.fsdecode(here)))
            names = os.listdir(here)
        for name in names:
            path = os.path.join(rel, name) if rel else name
            if not rel and name == b".git":
                continue
            if path in folders and os.path.isdir(os.path.join(root, path)) \
                    and not os.path.islink(os.path.join(root, path)):
                stack.append(path)
            elif path not in tracked:
                found.append(Path(os.fsdecode(os.path.join(root, path))))
    return found


def _remove(path: Path) -> bool:
    """Remove one entry (a folder with everything in it, made writable first where a run
    took the permission away); whether it is gone."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            _writable(path)
            for folder, dirs, _ in os.walk(path):   # top down: each made readable before
                for d in dirs:                        # the walk lists it
                    _writable(Path(folder) / d)
            shutil.rmtree(path)
    except OSError:
        pass
    return not os.path.lexists(path)


def _writable(folder: Path) -> None:
    """Give the owner back every right on a folder (a run's chmod 000 stops `git clean`)."""
    try:
        if not folder.is_symlink():
            folder.chmod(folder.stat().st_mode | stat.S_IRWXU)
    except OSError:
        pass
