"""A task's `caches:`: the data caches a repo keeps under HOME (`~/.cache/<its name>`),
found by `autoresearch init` in the code the run executes and resolved when a task loads.

The sandbox empties HOME for runs (loop/run/sandbox.py); a repo that keeps its data in
`~/.cache/tinyshape` would find nothing there, and fail with `Read-only file system` the
moment it tries to make the folder. A declared cache is shown to both steps, read-only:
it is filled by the repo's prepare step (`python prepare.py`) before the night, never by a
run. Unlike `read_only` it is not digested before each grading: a cache can hold GBs in
thousands of files, and what the grader trusts in it is listed under `read_only` and
`held_out` already (the lm shape does so).

init reads the script and its local modules with `ast` (nothing is run) for the paths they
build from HOME: `"~/.cache/x"`, `Path.home() / ".cache" / "x"`,
`os.path.expanduser("~/.cache/x")`, `os.path.join(os.path.expanduser("~"), ".cache", "x")`,
through module-level names, and an override by an environment variable
(`os.environ.get("X_CACHE", <one of those>)`, `os.getenv(...) or ...`). The engine's own
caches (~/.cache/autoresearch, the model caches) are shown already and are not listed.
This module decides nothing about the sandbox's argv (loop/run/sandbox.py), nor reads
run logs (loop/advice/home_cache.py)."""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from loop.errors import TaskError

CACHE = ".cache"
SHOWN_ALREADY = {"autoresearch", "huggingface", "torch"}   # the engine's data cache, models
PREPARE_NAMES = ("prepare.py", "prepare_data.py", "download.py", "setup_data.py")
DEPTH = 8            # module-level names followed this deep (`DATA = CACHE / "data"`)


@dataclass
class Found:
    """A cache the code names: `~/.cache/<name>`, who names it, the variable overriding it."""
    path: str
    file: str
    var: str = ""
    var_depth: int = 0   # how many of the cache's parts the variable's value stands for


# -- what the code names -------------------------------------------------------------------------
def find(sources) -> list[Found]:
    """The HOME caches the sources (loop/setup/code_scan.Script) name, first named first."""
    out: dict[str, Found] = {}
    for src in sources:
        assigns = src.assigns()
        for node in ast.walk(src.tree):
            parts, (var, depth) = _home_parts(node, assigns, 0)
            if not parts or len(parts) < 2 or parts[0] != CACHE or parts[1] in SHOWN_ALREADY:
                continue
            path = f"~/{CACHE}/{parts[1]}"
            found = out.setdefault(path, Found(path, src.path))
            if var and not found.var:
                found.var, found.var_depth = var, depth
    return list(out.values())


NO_VAR = ("", 0)


def _home_parts(node, assigns: dict, depth: int) -> tuple[list[str] | None, tuple[str, int]]:
    """The path parts after HOME that `node` evaluates to ([] for HOME itself), and the
    environment variable that overrides it with how many of the parts its value stands
    for (XDG_CACHE_HOME: 1, a TINY_CACHE for ~/.cache/tiny: 2); (None, NO_VAR) when it is
    no HOME path (a part that is no literal ends the parts known)."""
    if depth > DEPTH:
        return None, NO_VAR
    if isinstance(node, ast.Name) and node.id in assigns:
        return _home_parts(assigns[node.id], assigns, depth + 1)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _tilde(node.value), NO_VAR
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):     # Path.home() / "x"
        base, var = _home_parts(node.left, assigns, depth + 1)
        return (None, NO_VAR) if base is None else (base + _literal_parts(node.right), var)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):     # env or default
        name = next((v for v in map(_env_name, node.values) if v), "")
        for value in node.values:
            parts, _ = _home_parts(value, assigns, depth + 1)
            if parts is not None:
                return parts, (name, len(parts)) if name else NO_VAR
        return None, NO_VAR
    if not isinstance(node, ast.Call):
        return None, NO_VAR
    name = _call_name(node.func)
    if name in ("Path.home", "pathlib.Path.home") or (name in ("os.environ.get", "os.getenv")
                                                      and _env_name(node) == "HOME"
                                                      and len(node.args) == 1):
        return [], NO_VAR
    if name in ("os.path.expanduser", "expanduser", "Path", "pathlib.Path") and node.args:
        return _home_parts(node.args[0], assigns, depth + 1)
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("expanduser", "resolve",
                                                                   "absolute"):
        return _home_parts(node.func.value, assigns, depth + 1)       # Path("~/x").expanduser()
    if name in ("os.path.join", "join") and node.args:
        base, var = _home_parts(node.args[0], assigns, depth + 1)
        if base is None:
            return None, NO_VAR
        for arg in node.args[1:]:
            more = _literal_parts(arg)
            base += more
            if not more:
                break
        return base, var
    if name in ("os.environ.get", "os.getenv") and len(node.args) == 2:    # X_CACHE, default
        parts, _ = _home_parts(node.args[1], assigns, depth + 1)
        return (parts, (_env_name(node), len(parts))) if parts is not None else (None, NO_VAR)
    return None, NO_VAR


def _tilde(text: str) -> list[str] | None:
    for home in ("~/", "$HOME/", "${HOME}/"):
        if text.startswith(home):
            return [p for p in text[len(home):].split("/") if p]
    return [] if text in ("~", "$HOME") else None


def _literal_parts(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [p for p in node.value.split("/") if p]
    return []


def _call_name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        inner = _call_name(func.value)
        return f"{inner}.{func.attr}" if inner else ""
    return ""


def _env_name(node) -> str:
    """`X` of `os.environ.get("X", ...)`, `os.getenv("X")` or `os.environ["X"]`."""
    if isinstance(node, ast.Call) and _call_name(node.func) in ("os.environ.get", "os.getenv") \
            and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    if isinstance(node, ast.Subscript) and _call_name(node.value) == "os.environ" and \
            isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return ""


def prepare_step(root: Path, sources, cache: str, python: str = "python") -> str:
    """The command that fills `cache` before the night: a file naming it that runs as a
    program (`if __name__ == "__main__"`), a prepare script of the repo, else the script
    naming it, run once."""
    naming = [s for s in sources if any(f.path == cache for f in find([s]))]
    for src in naming:
        if _has_main(src.tree):
            return f"{python} {src.path}"
    for name in PREPARE_NAMES:
        if (root / name).is_file():
            return f"{python} {name}"
    return f"{python} {naming[0].path}, once" if naming else "the repo's prepare step"


def _has_main(tree) -> bool:
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


def home_relative(path: Path) -> str:
    home = Path.home().resolve()
    path = path.resolve()
    return f"~/{path.relative_to(home).as_posix()}" if home in path.parents else str(path)


# -- task.yaml -----------------------------------------------------------------------------------
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


def task_sources(root: Path) -> list:
    """The task folder's top-level Python files, parsed (those that parse)."""
    from loop.script.source import Script
    out = []
    for path in sorted(root.glob("*.py")):
        try:
            out.append(Script(path.name, path.read_text(errors="replace")))
        except (SyntaxError, ValueError):
            continue
    return out


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
