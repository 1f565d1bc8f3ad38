"""What finalize takes from the night itself: the task folder it ran and its time box, read
from the start event of the tag's journal (`.autoresearch/<tag>/journal.jsonl`). A night
started with `run --task .` in a repo without autoresearch.yaml is finalized with a bare
`finalize --tag T`: no config has to name the task again, and the runs get the night's time
box (its `--time-budget`), not the task's default. The night's record wins over a config's
`task`: it is what the night ran."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from loop.errors import UsageError
from loop.repo.workspace import git_toplevel
from loop.setup.config import Config
from loop.state.journal import Journal, replay


def night_config(config: Config, tag: str) -> Config:
    """`config` with the night's task (absolute) and, unless given, its time box; a tag with
    no journal in any repo finalize could mean is one line."""
    repo = _night_repo(config, tag)
    if repo is None:
        raise UsageError(f"no night for tag '{tag}' here (no journal or no branch "
                         f"autoresearch/{tag}): run `autoresearch run --tag {tag}` first")
    start = replay(Journal(repo / ".autoresearch" / tag / "journal.jsonl").events()).start \
        or {}
    changes: dict = {}
    if start.get("task") is not None:
        changes["task"] = str((repo / start["task"]).resolve())
    if config.time_budget_s is None and start.get("time_budget_s"):
        changes["time_budget_s"] = float(start["time_budget_s"])
    return dataclasses.replace(config, **changes) if changes else config


def _night_repo(config: Config, tag: str) -> Path | None:
    """The repo holding the tag's journal: the one of the config's task folder, of the
    config, or of the working directory, in that order."""
    task = config.resolve(config.task)
    for place in (task if task.is_dir() else None, config.base_dir, Path.cwd()):
        if place is None or not place.is_dir():
            continue
        repo = git_toplevel(place)
        if repo is not None and (repo / ".autoresearch" / tag / "journal.jsonl").is_file():
            return repo
    return None
