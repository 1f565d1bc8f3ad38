"""A task's `inputs:`: files the run reads that are not committed (prepared data, git-ignored:
nanoGPT's `data/shakespeare_char/train.bin`), made present in every worktree the engine runs
(the loop's, each slot's, check-task's, the grader's copy) at the same relative path.

Each is a symlink to the file in the user's checkout, never a copy (training shards are GBs).
A folder that holds committed files too (nanoGPT's data/<name>/ with its prepare.py) is not
linked whole: only its entries that hold nothing committed are. In the sandbox the targets
are shown read-only (loop/run/sandbox.py `wrap`, as the task's interpreter is); without it a
run could write through a link, so the guard (loop/run/grading.py) digests the targets when
the loop starts (files over 8 MiB by size and mtime, the rest by sha256) and checks them,
and that each link is still the same link, after every run.

Refused in one line at load: an absolute path or one leaving the task folder, a path that is
editable or protected or holds such files, one that is committed (it is in the worktree
already), one that does not exist in the checkout (named, with the committed `prepare.py`
that would make it when there is one)."""
from __future__ import annotations

import glob
import os
from pathlib import Path

from loop.errors import TaskError
from loop.setup.taskfiles import list_files

GLOB_CHARS = set("*?[")


def links(patterns, origin: Path, task, where: str) -> tuple[tuple[str, str], ...]:
    """(path relative to the task folder, absolute target in the user's checkout) for each
    entry to link, from the task's `inputs` patterns resolved in `origin`."""
    out: dict[str, str] = {}
    guarded: list[str] | None = None
    for pattern in patterns:
        rel = Path(pattern)
        if rel.is_absolute() or ".." in rel.parts or pattern.startswith("~"):
            raise TaskError(f"{where}: inputs: '{pattern}' must be a path inside the task "
                            f"folder (absolute data outside it: `env` or `read_only`)")
        found = sorted(glob.glob(pattern, root_dir=origin)) if GLOB_CHARS & set(pattern) \
            else [pattern] if os.path.lexists(origin / pattern) else []
        if not found:
            raise TaskError(f"{where}: inputs: {pattern} not found in {origin}"
                            f"{_maker(origin, pattern)}")
        for match in found:
            name = Path(os.path.normpath(match)).as_posix()
            guarded = _guarded_files(task, origin) if guarded is None else guarded
            _not_editable(task, name, guarded, where)
            entries = _uncommitted(origin, name)
            if not entries:
                raise TaskError(f"{where}: inputs: {name} is committed (it is in every "
                                f"worktree already): list only files git does not track")
            out.update({e: str((origin / e).resolve()) for e in entries})
    return tuple(out.items())


def place(folder: Path, entries) -> None:
    """Make each entry present in `folder` (a worktree's task folder, or the grader's copy):
    a symlink to its target, replacing whatever is at that path (a run may have replaced
    the link; an old worktree may hold a stale one)."""
    for rel, target in entries:
        dest = folder / rel
        if dest.is_symlink() and os.readlink(dest) == target:
            continue
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.is_dir():
            import shutil
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, dest)


def changed_link(folder: Path, entries) -> str | None:
    """The first entry whose link in `folder` is no longer the link to its target."""
    for rel, target in entries:
        dest = folder / rel
        if not dest.is_symlink() or os.readlink(dest) != target:
            return rel
    return None


def _guarded_files(task, origin: Path) -> list[str]:
    """The editable and protected files of the task folder in `origin` (listed once)."""
    return [f for f in list_files(origin) if task.is_editable(f) or task.is_protected(f)]


def _not_editable(task, name: str, files: list[str], where: str) -> None:
    inside = [f for f in files if f == name or f.startswith(name.rstrip("/") + "/")]
    if task.is_editable(name) or task.is_protected(name) or inside:
        role = "protected" if task.is_protected(inside[0] if inside else name) else "editable"
        raise TaskError(f"{where}: inputs: {name} is {role} ({inside[0] if inside else name}):"
                        f" inputs are data the run reads, never code the loop edits or guards")


def _uncommitted(origin: Path, rel: str) -> list[str]:
    """`rel` if nothing under it is committed, else its entries (recursively) that hold
    nothing committed; [] when everything there is committed."""
    tracked = _tracked(origin, rel)
    if not tracked:
        return [rel]
    path = origin / rel
    if not path.is_dir() or path.is_symlink():
        return []
    out = []
    for child in sorted(path.iterdir()):
        out += _uncommitted(origin, (Path(rel) / child.name).as_posix())
    return out


def _tracked(origin: Path, rel: str) -> list[str]:
    from loop.repo.queries import tracked
    return tracked(origin, rel)


def _maker(origin: Path, pattern: str) -> str:
    """`: make it first (`python data/x/prepare.py`)` when a committed prepare script sits
    in the path's folder or one above it (nanoGPT's data/<name>/prepare.py)."""
    folder = Path(pattern.split("*")[0].split("?")[0].split("[")[0])
    for parent in [folder, *folder.parents]:
        for name in ("prepare.py", "prepare_data.py", "download.py"):
            script = parent / name
            if (origin / script).is_file():
                return f" (make it first: `python {script.as_posix()}`)"
    return " (make it first, or remove it from inputs)"
