"""init's half of a task's `caches:` (loop/setup/caches.py finds them in the code and
resolves them at load): the caches init declares in the plan, refused in one line when one
does not exist yet (the night could not run), and where a cache is when a variable moved it."""
from __future__ import annotations

import os
from pathlib import Path

from loop.init.plan import InitError
from loop.script.cache_paths import Found, find, home_relative, prepare_step


def declare(plan, sources) -> None:
    """plan.caches (and plan.cache_vars: the variables that moved one, passed to runs);
    refused in one line when a cache does not exist yet (the night could not run)."""
    for found in find(sources):
        path = found.path
        if found.var and os.environ.get(found.var):          # where it is on this machine
            path = home_relative(moved(found, os.environ[found.var]))
            if found.var not in plan.cache_vars:
                plan.cache_vars.append(found.var)
        step = prepare_step(plan.root, sources, found.path, plan.python)
        if not Path(os.path.expanduser(path)).is_dir():
            raise InitError(f"init: {found.file} keeps its data in {path}, which does not "
                            f"exist yet: prepare it first (`{step}`), then run init again "
                            f"(runs see it read-only: no run may fill it)")
        plan.caches.append(path)
        plan.cache_lines.append(f"{path} (found: {found.file} names it"
                                + (f", moved by ${found.var}" if found.var else "")
                                + f"; shown read-only to runs; prepare it first with {step})")


def moved(found: Found, value: str) -> Path:
    """The cache's folder when its variable is `value`: XDG_CACHE_HOME=/x holds /x/<name>;
    a variable naming a folder inside the cache (~/.cache/x/data) has the cache above it."""
    base = Path(value).expanduser()
    rest = found.path.split("/")[1:]                  # [".cache", name]
    if found.var_depth <= len(rest):
        return base.joinpath(*rest[found.var_depth:])
    return base.parents[found.var_depth - len(rest) - 1]
