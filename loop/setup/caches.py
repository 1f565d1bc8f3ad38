"""A task's `caches:`: the data caches a repo keeps under HOME (`~/.cache/<its name>`),
resolved when a task loads (what `autoresearch init` finds in the code to declare is
loop/script/cache_paths.py).

The sandbox empties HOME for runs (loop/run/sandbox.py); a repo that keeps its data in
`~/.cache/tinyshape` would find nothing there, and fail with `Read-only file system` the
moment it tries to make the folder. A declared cache is shown to both steps, read-only:
it is filled by the repo's prepare step (`python prepare.py`) before the night, never by a
run. Unlike `read_only` it is not digested before each grading: a cache can hold GBs in
thousands of files, and what the grader trusts in it is listed under `read_only` and
`held_out` already (the lm shape does so).

This module decides nothing about the sandbox's argv (loop/run/sandbox.py), nor reads
run logs (loop/advice/home_cache.py)."""
from __future__ import annotations

import os
from pathlib import Path

from loop.errors import TaskError
from loop.script.cache_paths import CACHE, prepare_step, task_sources


def resolve(values, root: Path, where: str, expand) -> tuple[str, ...]:
    """`caches` as the run sees them: absolute, existing folders outside the task folder,
    never HOME itself. `expand`: task.yaml's $VARS expansion."""
    out = []
    root = root.resolve()
    home = Path.home().resolve()
    for value in values:
        path = Path(os.path.expanduser(expand(value, "caches", where)))
        if not path.is_absolute():
            raise TaskError(f"{where}: caches: '{value}' must be an absolute path or `~/...`: "
                            f"a cache lives outside the task folder")
        path = path.resolve()
        if path == home or path in home.parents:
            raise TaskError(f"{where}: caches: {value} would show all of HOME to runs: name "
                            f"the cache's own folder (e.g. ~/.cache/<name>)")
        if path == root or root in path.parents or path in root.parents:
            raise TaskError(f"{where}: caches: {value} overlaps the task folder: list data "
                            f"of the task folder under `inputs`")
        if not path.is_dir():
            step = prepare_step(root, task_sources(root), value)
            raise TaskError(f"{where}: caches: {value} not found: fill it first ({step}); "
                            f"runs see it read-only")
        out.append(str(path))
    return tuple(dict.fromkeys(out))


def owner(path: Path, caches) -> str | None:
    """The declared cache holding `path`, if any."""
    real = Path(os.path.realpath(path))
    return next((c for c in caches if real == Path(c) or Path(c) in real.parents), None)


def folder_for(path: Path) -> str:
    """The folder to declare for a HOME path a run needed: `~/.cache/<name>`, else the
    path's folder (the path itself when it is one)."""
    home = Path.home().resolve()
    rel = Path(os.path.abspath(path)).relative_to(home).parts
    if len(rel) >= 2 and rel[0] == CACHE:
        return f"~/{CACHE}/{rel[1]}"
    folder = Path(*rel) if Path(path).is_dir() else Path(*rel[:-1])
    return f"~/{folder.as_posix()}" if folder.parts else "~/<folder>"
