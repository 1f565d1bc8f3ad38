"""The settings of a Hydra app, read as Hydra composes them (nothing is run, Hydra need not be
installed): `@hydra.main(config_path="config", config_name="config")` names the primary
config, `config/config.yaml`; its `defaults:` list composes a file of each config group
(`- model: small` is `config/model/small.yaml`, its keys under the group's package, `model.`;
`# @package _global_` at a file's top puts them at the root, `- model@net: small` under
`net.`) and plain configs (`- base` merged at the root); a group file's own defaults are
followed the same way. The last file to set a key decides it, as in Hydra (`_self_` places
the primary's own keys; absent, they come last).

A setting is named by its full key path, `training.batch_size`: the Hydra override that sets
it on the command line (`training.batch_size=16`), which wins over every file. Used by
`autoresearch init` to write the flags file in the `hydra` style (loop/setup/flags.py)."""
from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from loop.script import settings
from loop.script.source import Script

PACKAGE = re.compile(r"^#\s*@package\s+(\S+)", re.M)


@dataclass
class HydraApp:
    primary: str                         # the primary config file, relative to the task folder
    files: list[str] = field(default_factory=list)       # every config file composed, in order
    values: dict[str, str] = field(default_factory=dict)  # key path -> its value as written
    where: dict[str, str] = field(default_factory=dict)   # key path -> the file that set it


def app(root: Path, src: Script) -> HydraApp | None:
    """The composed config of the `@hydra.main` function of `src` (None: no Hydra app, or
    its primary config is not a file of the task folder)."""
    for node in ast.walk(src.tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and _dotted(deco.func) in ("hydra.main", "main") \
                    and _is_hydra(src, deco.func):
                kw = {k.arg: k.value for k in deco.keywords if k.arg}
                path, name = _str(kw.get("config_path")), _str(kw.get("config_name"))
                if path is None or name is None:
                    return None
                base = posixpath.normpath(posixpath.join(posixpath.dirname(src.path), path))
                return None if base.startswith("..") else _compose(root, base, name)
    return None


def _is_hydra(src: Script, func: ast.expr) -> bool:
    return _dotted(func) == "hydra.main" or src.imports_from().get("main") == "hydra"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _compose(root: Path, base: str, name: str) -> HydraApp | None:
    rel = _rel(base, name)
    if not (root / rel).is_file():
        return None
    found = HydraApp(rel)
    _merge(root, base, rel, "", found, depth=0)
    return found


def _rel(folder: str, name: str) -> str:
    name = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    return Path(folder, name).as_posix().removeprefix("./")


def _merge(root: Path, base: str, rel: str, package: str, app: HydraApp, depth: int) -> None:
    """Merge one config file (and what its defaults list composes) into `app`."""
    import yaml
    if depth > 8 or not (root / rel).is_file():
        return
    text = (root / rel).read_text(errors="replace")
    header = PACKAGE.search(text[:500])
    if header and header[1] != "_group_":
        package = "" if header[1] == "_global_" else header[1].removeprefix("_global_.")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return
    defaults = data.get("defaults", []) if isinstance(data, dict) else []
    own_done = False

    def own() -> None:
        app.files.append(rel)
        for s in settings.find(rel, text):
            if s.name.startswith(("defaults.", "hydra.")):
                continue
            key = f"{package}.{s.name}" if package else s.name
            app.values[key], app.where[key] = s.text, rel
    for entry in defaults if isinstance(defaults, list) else []:
        if entry == "_self_":
            own()
            own_done = True
        elif isinstance(entry, str):                      # a plain config, at this package
            _merge(root, base, _rel(str(Path(rel).parent), entry.removeprefix("optional ")),
                   package, app, depth + 1)
        elif isinstance(entry, dict) and len(entry) == 1:
            (group, option), = entry.items()
            group = str(group).removeprefix("optional ").strip()
            if group.startswith("override ") or option is None or not isinstance(option, str):
                continue
            group, _, at = group.partition("@")
            pkg = at or ".".join(p for p in (package, group.replace("/", ".")) if p)
            pkg = "" if pkg == "_global_" else pkg.removeprefix("_global_.")
            folder = base if group.startswith("/") or depth == 0 else str(Path(rel).parent)
            _merge(root, base, _rel(f"{folder}/{group.strip('/')}", option), pkg, app,
                   depth + 1)
    if not own_done:
        own()
