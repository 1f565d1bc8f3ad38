"""What check-task says about the working folder it does not run.

check-task, as the loop, runs a checkout of HEAD: an uncommitted edit is not what runs, and a
file that exists only in the user's folder (untracked, or ignored: prepared data, a helper
module) is not there at all. Each is named in one line: the edits before the run, and after a
failed run the files it looked for that exist only in the working folder (found from the
paths its error lines name), else what the checkout left out. A file the run did not find
that exists here, where the sandbox hides it ($HOME, /tmp: data under HOME), is named too."""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from loop.repo.queries import is_ignored
from loop.run.sandbox import emptied_folders
from loop.setup.interpreter import environment, of_command, uv_environment
from loop.setup.taskfiles import COPY_SKIP

# A line that says something was not found
ERROR_LINE = re.compile(r"no such file|not found|does not exist|no module named|can't open|"
                        r"cannot open|cannot access|could not open|unable to open|"
                        r"FileNotFoundError|NotADirectoryError", re.I)
QUOTED = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"|`([^`\n]+)`")
# data/train.bin, ./x/y, /abs/path, train.bin: a path with a folder or a file name extension
BARE = re.compile(r"(?<![\w/.~-])((?:\.{1,2})?/?[\w.+-]+(?:/[\w.+-]+)+/?|[\w+-][\w.+-]*\.[A-Za-z]"
                  r"\w{0,7})(?![\w/])")
MODULE = re.compile(r"No module named '([\w.]+)'")
EDITABLE_MAPPING = re.compile(r"^MAPPING\b[^=\n]*=\s*(\{.*?\})\s*$", re.M | re.S)
SHOWN = 6                    # names in one line, then "and N more"


def dirty_line(git, task_rel: str, task) -> str | None:
    """The task folder's uncommitted edits (and untracked editable or protected files), in
    one line, or None when the folder is HEAD's."""
    named = []
    for code, path in _status(git, task_rel, "--untracked-files=all"):
        rel = _in_task(path, task_rel)
        role = "" if rel is None else "protected" if task.is_protected(rel) else \
            "editable" if task.is_editable(rel) else ""
        if code == "??" and not role:
            continue
        how = "untracked" if code == "??" else "deleted" if "D" in code else \
            "added" if "A" in code else "renamed" if "R" in code else "modified"
        named.append(f"{path} ({how}{', ' + role if role else ''})")
    if not named:
        return None
    return (f"check-task: your working folder differs from HEAD in {_some(named)}: "
            f"check-task tests HEAD, as run does; commit to test your changes")


def needed_files(log_text: str, repo_root: Path, task_rel: str,
                 committed: Callable[[str], bool], mirrors: Iterable[Path]) -> list[str]:
    """Repo-relative paths the run's error lines name that exist in the working folder but
    are not committed. `mirrors`: folders laid out as the repo (the worktree, the grader's
    copy), so that an absolute path into one names the same file in the working folder."""
    found: list[str] = []
    for text in mentioned_paths(log_text):
        for rel in _repo_paths(text, task_rel, [Path(m) for m in mirrors]):
            if rel in found:
                break
            if os.path.lexists(repo_root / rel) and not committed(rel):
                found.append(rel)
                break
    return found


def needed_line(paths: list[str], ignored: list[str] | None = None,
                who: str = "check-task") -> str:
    """`ignored`: those of `paths` git ignores (prepared data): task.yaml `inputs` links
    them into every worktree, where committing them is not the way."""
    one = len(paths) == 1
    said = (f"{who}: the run needs {_some(paths)}, which {'is' if one else 'are'} not "
            f"committed ({'it exists' if one else 'they exist'} only in your working folder)")
    if ignored:
        return (f"{said}: git ignores {'it' if len(ignored) == 1 else 'them'}; list "
                f"{_some(ignored)} under `inputs:` in task.yaml (linked, read-only, into "
                f"every worktree of the night)")
    return (f"{said}: commit {'it' if one else 'them'}, or point the task at "
            f"{'it' if one else 'them'} with an absolute path (task.yaml `env`)")


def failure_hint(log_text: str, repo_root: Path, task_rel: str, task, git,
                 committed: Callable[[str], bool], mirrors: Iterable[Path], sandboxed: bool,
                 who: str = "check-task") -> str | None:
    """After a failed run (check-task's, or a night's baseline): the one line that says
    why, from its log: a file it needs that is not committed (with `inputs:` when git
    ignores it), a file the sandbox hides, a package the task's environment lacks, else
    what the checkout of HEAD left out; None when nothing fits."""
    mirrors = list(mirrors)
    folder = repo_root / task_rel if task_rel not in ("", ".") else repo_root
    needed = needed_files(log_text, repo_root, task_rel, committed, mirrors)
    if needed:
        task_paths = [_in_task(p, task_rel) for p in needed]
        ignored = [rel for p, rel in zip(needed, task_paths)
                   if rel is not None and _ignored(repo_root, p)]
        return needed_line(needed, ignored, who)
    from loop.advice.home_cache import home_line     # a HOME cache: task.yaml `caches:`
    home = home_line(log_text, folder, task, sandboxed, [*mirrors, repo_root], who)
    if home:
        return home
    hidden = sandbox_hidden(log_text, mirrors) if sandboxed else []
    if hidden:
        return hidden_line(hidden, who)
    linked = [f"{task_rel}/{rel}" if task_rel not in ("", ".") else rel
              for rel, _ in getattr(task, "input_links", ())]
    return (import_line(log_text, repo_root, folder, task, sandboxed, who)
            or missing_package_line(log_text, folder, task, who)
            or left_out_line(git, task_rel, who, linked))


def _ignored(repo_root: Path, rel: str) -> bool:
    return is_ignored(repo_root, rel)


def sandbox_hidden(log_text: str, mirrors: Iterable[Path]) -> list[str]:
    """Absolute paths the run's error lines name that exist on this machine, under a folder
    the sandbox empties (HOME, /tmp, /var/tmp, /run) and outside the run's own folders
    (`mirrors`): the run did not find them because the sandbox hid them."""
    emptied = emptied_folders()
    own = [r for m in mirrors for r in {Path(m), Path(m).resolve()}]
    found = []
    for text in mentioned_paths(log_text):
        path = Path(text)
        if not path.is_absolute() or not os.path.lexists(path) or text in found:
            continue
        real = path.resolve()
        if any(e in real.parents for e in emptied) and \
                not any(r == real or r in real.parents for r in own):
            found.append(text)
    return found


def hidden_line(paths: list[str], who: str = "check-task") -> str:
    one = len(paths) == 1
    folder = os.path.dirname(paths[0].rstrip("/")) or paths[0]
    return (f"{who}: the run needs {_some(paths)}, which the sandbox hides (it empties "
            f"$HOME and /tmp but for the task's environment, the data cache and the folders "
            f"the task's `env` names): name {'its folder' if one else 'their folders'} in "
            f"task.yaml, e.g. `env: {{DATA_DIR: {folder}}}`")


def missing_package_line(log_text: str, folder: Path, task,
                         who: str = "check-task") -> str | None:
    """After a failed run whose errors name no file of the repo: a module that is not the
    task folder's own (`No module named 'torch'`) is a package its environment lacks."""
    names = [m[1].split(".")[0] for line in log_text.splitlines() for m in MODULE.finditer(line)]
    names = [n for n in dict.fromkeys(names)
             if not (folder / f"{n}.py").exists() and not (folder / n).is_dir()]
    if not names:
        return None
    exe = of_command(task.grader.python if task.grader else task.run)
    env = environment(exe) if exe else None
    where = f"the task's environment ({env or exe})" if exe else \
        "the engine's interpreter (the task runs plain `python`)"
    project = uv_environment(folder)[0]
    how = f"`uv sync` in {project}" if (project / "uv.lock").is_file() else "install it there"
    return (f"{who}: {', '.join(names)} {'is' if len(names) == 1 else 'are'} not "
            f"installed in {where}: {how} (runs use it as it is, offline)")


def import_line(log_text: str, repo_root: Path, folder: Path, task, sandboxed: bool,
                who: str = "check-task") -> str | None:
    """`No module named 'mypkg'` where mypkg is the repo's own package (a folder of the task
    folder, of the repo's root or of its src/: first on the run's PYTHONPATH), or where the
    task's environment holds an editable install of it (`pip install -e`) pointing at a
    folder the run cannot see: the fix, in one line."""
    for full in dict.fromkeys(m[1] for m in MODULE.finditer(log_text)):
        name = full.split(".")[0]
        own = [base / n for base in (folder, repo_root, repo_root / "src")
               for n in (name, f"{name}.py") if (base / n).exists()]
        if own:
            rel = own[0].relative_to(repo_root).as_posix()
            return (f"{who}: the run could not import {full}, yet {rel} is in the repository "
                    f"and the run's checkout comes first on its PYTHONPATH (the task folder, "
                    f"the repo's root, src/): is all of {rel} committed (a run has only "
                    f"committed files), and does `run` keep PYTHONPATH (no `cd` elsewhere, no "
                    f"python -I or -E)?")
        target = editable_target(name, task)
        if target is None:
            continue
        hidden = sandboxed and any(e in target.resolve().parents for e in emptied_folders())
        where = "which the sandbox hides from the run" if hidden else \
            "outside the run's checkout, and the run did not find it there"
        return (f"{who}: {name} is an editable install (pip install -e) of {target} in the "
                f"task's environment, {where}: install it there without -e, or list "
                f"{target} under `read_only` in task.yaml")
    return None


def editable_target(name: str, task) -> Path | None:
    """Where an editable install (setuptools' finder, or a `.pth`/`.egg-link` path) in the
    task's environment says package `name` lives; None if it holds none of it."""
    exe = of_command(task.grader.python if task.grader else task.run)
    env = environment(exe) if exe else None
    for site in env.glob("lib/python*/site-packages") if env else []:
        for finder in site.glob("__editable___*finder.py"):
            found = EDITABLE_MAPPING.search(finder.read_text(errors="replace"))
            try:
                mapping = ast.literal_eval(found[1]) if found else {}
            except (ValueError, SyntaxError):
                mapping = {}
            if isinstance(mapping, dict) and name in mapping:
                return Path(mapping[name])
        for link in [*site.glob("__editable__*.pth"), *site.glob("easy-install.pth"),
                     *site.glob("*.egg-link")]:
            for line in link.read_text(errors="replace").splitlines():
                line = line.strip()
                if line.startswith("/") and os.path.exists(os.path.join(line, name)):
                    return Path(line) / name
    return None


def left_out_line(git, task_rel: str, who: str = "check-task",
                  linked: Iterable[str] = ()) -> str | None:
    """After a failed run whose errors name no file: what the checkout of HEAD lacks that
    the working folder has (untracked or ignored; environments and caches not counted, nor
    the task's `inputs`, which the run had: `linked`, repo-relative)."""
    linked = [p.rstrip("/") for p in linked]
    names = [path for code, path in _status(git, task_rel, "--untracked-files=normal",
                                            "--ignored")
             if code in ("??", "!!") and not _noise(path) and not any(
                 path.rstrip("/") == p or path.startswith(p + "/") for p in linked)]
    if not names:
        return None
    return (f"{who}: not in the run's checkout of HEAD (only in your working folder): "
            f"{_some(names)}; if the run needs one, commit it, or point the task at it with an "
            f"absolute path (task.yaml `env`)")


def mentioned_paths(log_text: str) -> list[str]:
    """Paths (as written) that the log's not-found lines name, first seen first."""
    out: dict[str, None] = {}
    for line in log_text.splitlines():
        if not ERROR_LINE.search(line):
            continue
        for m in MODULE.finditer(line):          # a helper module left uncommitted
            parts = m[1].split(".")
            for i in range(len(parts), 0, -1):
                out.update({"/".join(parts[:i]) + ".py": None, "/".join(parts[:i]): None})
        for m in QUOTED.finditer(line):
            out[next(g for g in m.groups() if g)] = None
        for m in BARE.finditer(line):
            out[m[1]] = None
    return list(out)


def _repo_paths(text: str, task_rel: str, mirrors: list[Path]) -> Iterator[str]:
    """Where `text`, as the run wrote it, is in the repo: relative to the run's folder (the
    task folder) or the repo root, or an absolute path into a folder that mirrors the repo."""
    path = Path(text)
    if path.is_absolute():
        for mirror in mirrors:
            for root in {mirror, mirror.resolve()}:
                if root in path.parents:
                    yield from _inside(path.relative_to(root).as_posix())
        return
    if task_rel not in ("", "."):
        yield from _inside(f"{task_rel}/{text}")
    yield from _inside(text)


def _inside(rel: str) -> Iterator[str]:
    norm = os.path.normpath(rel)
    if norm != "." and not norm.startswith("..") and not os.path.isabs(norm):
        yield Path(norm).as_posix()


def _status(git, task_rel: str, *flags: str) -> list[tuple[str, str]]:
    """(XY code, repo-relative path) of what `git status` lists under the task folder."""
    text = git("status", "--porcelain=v1", "-z", *flags, "--", task_rel or ".")
    fields = text.split("\0")
    entries, i = [], 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            i += 1                      # the old name follows a rename
        entries.append((code, path))
    return entries


def _in_task(path: str, task_rel: str) -> str | None:
    if task_rel in ("", "."):
        return path
    prefix = task_rel.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else None


def _noise(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    return bool(set(COPY_SKIP).intersection(parts)) or path.endswith((".pyc", ".egg-info/"))


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
