"""The data caches a repo's code keeps under HOME (`~/.cache/<its name>`), read with `ast`
(nothing is run): what `autoresearch init` declares as task.yaml's `caches:` (loop/setup/
caches.py resolves them when a task loads), and the step that fills one.

The script and its local modules are read for the paths they build from HOME: `"~/.cache/x"`,
`Path.home() / ".cache" / "x"`, `os.path.expanduser("~/.cache/x")`,
`os.path.join(os.path.expanduser("~"), ".cache", "x")`, through module-level names, and an
override by an environment variable (`os.environ.get("X_CACHE", <one of those>)`,
`os.getenv(...) or ...`): `moved` says where the cache is when that variable is set. The
engine's own caches (~/.cache/autoresearch, the model caches) are shown to runs already and
are not listed."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from loop.script.source import Script


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
    """The HOME caches the sources (loop/script/source.py's Script) name, first named first."""
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


def task_sources(root: Path) -> list:
    """The task folder's top-level Python files, parsed (those that parse)."""
    out = []
    for path in sorted(root.glob("*.py")):
        try:
            out.append(Script(path.name, path.read_text(errors="replace")))
        except (SyntaxError, ValueError):
            continue
    return out


def moved(found: Found, value: str) -> Path:
    """The cache's folder when its variable is `value`: XDG_CACHE_HOME=/x holds /x/<name>;
    a variable naming a folder inside the cache (~/.cache/x/data) has the cache above it."""
    base = Path(value).expanduser()
    rest = found.path.split("/")[1:]                  # [".cache", name]
    if found.var_depth <= len(rest):
        return base.joinpath(*rest[found.var_depth:])
    return base.parents[found.var_depth - len(rest) - 1]
