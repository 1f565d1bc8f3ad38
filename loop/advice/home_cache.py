"""After a failed run: the HOME path it needed and could not write or see, in one line, with
the fix (task.yaml `caches:`, the repo's prepare step). Read from the run's log only.

In the sandbox a run sees HOME empty and read-only but for what the task declares
(loop/run/sandbox.py), so a repo keeping its data in `~/.cache/<name>` fails with
`OSError: [Errno 30] Read-only file system: '<HOME>/.cache/x'` (making the folder, or
filling it on first use) or `No such file or directory: '<HOME>/.cache/x/...'`. Used by
loop/advice/uncommitted.py's `failure_hint` (check-task, a night's failed baseline); it
changes nothing."""
from __future__ import annotations

import os
import re
from pathlib import Path

from loop.script.cache_paths import prepare_step, task_sources
from loop.setup.caches import folder_for, owner

READ_ONLY = re.compile(r"Read-only file system", re.I)
MISSING = re.compile(r"No such file or directory|FileNotFoundError", re.I)
QUOTED = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"")


def home_line(log_text: str, folder: Path, task, sandboxed: bool, own=(),
              who: str = "check-task") -> str | None:
    """The first HOME path the log's error lines say the run could not write (read-only)
    or find, in one line with its fix; None when no error line names one. `own`: the
    run's folders and the repo (a repo under HOME is no cache)."""
    home = os.path.realpath(os.path.expanduser("~"))
    own = [os.path.realpath(p) for p in own]
    caches = list(getattr(task, "caches", ()))
    unnamed = False          # a refused write whose line names no absolute path
    for line in log_text.splitlines():
        writing = bool(READ_ONLY.search(line))
        if not writing and not MISSING.search(line):
            continue
        quoted = [next(g for g in m.groups() if g) for m in QUOTED.finditer(line)]
        unnamed = unnamed or (writing and not any(os.path.isabs(os.path.expanduser(q))
                                                  for q in quoted))
        for m in QUOTED.finditer(line):
            text = next(g for g in m.groups() if g)
            path = Path(os.path.expanduser(text))
            real = os.path.realpath(path)
            if not path.is_absolute() or not real.startswith(home + "/") or \
                    any(real == o or real.startswith(o + "/") for o in own):
                continue
            said = _said(text, path, writing, caches, folder, sandboxed, who)
            if said:
                return said
    if sandboxed and unnamed:            # a library's error naming no path (torch.save)
        return _unnamed(caches, folder, who)
    return None


def _unnamed(caches: list[str], folder: Path, who: str) -> str:
    """A write the sandbox refused, its path unnamed (torch.save says only `open file
    failed with strerror: Read-only file system`)."""
    step = prepare_step(folder, task_sources(folder), _tilde(caches[0]) if caches else "")
    shown = ", ".join(_tilde(c) for c in caches)
    return (f"{who}: the run wrote where runs may not (Read-only file system): $HOME"
            + (f" and the task's caches ({shown}) are" if caches else " is")
            + f" read-only to runs; fill a data cache before the night ({step}) and declare "
            f"it in task.yaml (`caches:`); a run writes only its own folder, $TMPDIR and "
            f"$AUTORESEARCH_ARTIFACT_DIR")


def _said(text: str, path: Path, writing: bool, caches: list[str], folder: Path,
          sandboxed: bool, who: str) -> str | None:
    declared = owner(path, caches)
    cache = _tilde(declared) if declared else folder_for(path)
    step = prepare_step(folder, task_sources(folder), cache)
    if writing:
        if declared:
            return (f"{who}: the run writes {text}, in the cache task.yaml declares "
                    f"(caches: {cache}), which runs see read-only: fill it before the night "
                    f"({step}) so that runs only read it")
        return (f"{who}: the run writes {text}, under $HOME, which runs see read-only and "
                f"empty but for what the task declares: if it is a data cache, fill it "
                f"before the night ({step}) and declare it in task.yaml (`caches: [{cache}]`, "
                f"shown read-only to runs); a run writes only its own folder, $TMPDIR and "
                f"$AUTORESEARCH_ARTIFACT_DIR")
    if os.path.exists(path):
        if declared or not sandboxed or not cache.startswith("~/.cache/"):
            return None          # shown, no sandbox, or other data: uncommitted.hidden_line
        return (f"{who}: the run needs {text}, which the sandbox hides (runs see $HOME empty "
                f"but for what the task declares): declare its folder in task.yaml "
                f"(`caches: [{cache}]`, shown read-only to runs)")
    if declared:
        return (f"{who}: the run needs {text}, which does not exist: fill the cache {cache} "
                f"before the night ({step})")
    return (f"{who}: the run needs {text}, under $HOME, which does not exist on this "
            f"machine: make it first ({step}) and declare its folder in task.yaml "
            f"(`caches: [{cache}]`, shown read-only to runs)")


def _tilde(path: str) -> str:
    home = os.path.realpath(os.path.expanduser("~"))
    return "~" + path[len(home):] if path.startswith(home + "/") else path
