"""Settings, one interface: a setting is a name, its value as written, a kind and the file it
lives in. Five kinds, found and rewritten as text in place (comments and layout kept), so a
candidate stays a commit whose diff shows exactly the settings it changed:

- `constant`: a module-level assignment of a Python file, any case (`LR = 3e-3`,
  `learning_rate = 6e-4`, `TOTAL_BATCH_SIZE = 2**19`);
- `dict`: a numeric value of a dict literal a Python file assigns to a name, LightGBM and
  XGBoost style, named by the variable and the key: `params = {"learning_rate": 0.05}` is
  `params.learning_rate` (nested dicts by their path; `params = dict(num_leaves=31)` too);
- `kwarg`: a literal numeric keyword argument of a call in a Python file, named by the
  called name and the keyword: `LogisticRegression(max_iter=1000, C=1.0)` is
  `LogisticRegression.max_iter` and `LogisticRegression.C`; `torch.optim.AdamW(params,
  lr=3e-4, betas=(0.9, 0.95))` is `AdamW.lr`, `AdamW.betas.0`, `AdamW.betas.1` (a tuple's
  numbers by position). A name's first call in the file is the setting; later calls of the
  same name are not settings;
- `yaml`: a key of a YAML file with a number as its value (`lr: 0.001`; a nested key is
  named by its path, `optim.lr`). The flags file a task's run command is given (task.yaml
  `flags`, the command-line flags of an argparse / click / fire script) is such a file;
- `json`: a key of a JSON file with a number as its value (nested: `optim.lr`).

mutate, tune, the hybrid and a replayed change read and write settings only through `find`
and `write`; which of them a search may move is the search space's business
(loop/setup/search_space.py). Pure: no I/O."""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T", bound=Any)

NUMBER = r"[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
# `LEARNING_RATE = 3e-3  # ..`, `learning_rate: float = 6e-4`: a module-level assignment
PY_SETTING = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?P<eq>\s*(?::\s*\w+\s*)?=\s*)"
                        rf"(?P<value>{NUMBER}|2\s*\*\*\s*\d+)(?P<rest>\s*(?:#.*)?)$", re.M)
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
KINDS = {".py": "constant", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}
PYTHON_KINDS = ("constant", "dict", "kwarg")     # written as Python number literals


@dataclass(frozen=True)
class Setting:
    path: str            # the file it lives in, relative to the task folder
    name: str            # LR, learning_rate, lr (a flag), optim.lr (a config's nested key)
    text: str            # its value as written there
    kind: str            # constant | dict | kwarg | yaml | json
    start: int           # where the value's text is in the file
    end: int


def kind_of(path: str) -> str:
    """The kind of setting a file holds ("" for a file that holds none)."""
    return next((k for ext, k in KINDS.items() if path.endswith(ext)), "")


def find(path: str, text: str) -> list[Setting]:
    """Every numeric setting of one file, in file order, each name once (the first)."""
    return list(_found(path, text))


@functools.lru_cache(maxsize=64)
def _found(path: str, text: str) -> tuple[Setting, ...]:
    """`find`, remembered: a proposal asks about the same text several times (the search
    space, its axes, mutate's names, the write), and a Python file's `ast` walk is the cost
    of an iteration's proposal. Pure, and `Setting` is frozen, so a repeat is the same."""
    kind = kind_of(path)
    found = (_python(path, text) + _literals(path, text) if kind == "constant"
             else _yaml(path, text) if kind == "yaml"
             else _json(path, text) if kind == "json" else [])
    return tuple(first_of_each(found))


def first_of_each(items: list[T]) -> list[T]:
    """`items` (each with a `name`) in order, a name's first only."""
    out, seen = [], set()
    for item in items:
        if item.name not in seen:
            seen.add(item.name)
            out.append(item)
    return out


def find_all(files: dict[str, str]) -> list[Setting]:
    """Every numeric setting of the files, by path, then in file order."""
    return [s for path in sorted(files) for s in find(path, files[path])]


def lookup(files: dict[str, str], path: str, name: str) -> Setting | None:
    return next((s for s in find(path, files.get(path, "")) if s.name == name), None)


def write(text: str, path: str, name: str, new: str, old: str | None = None) -> str | None:
    """`text` (the file `path`) with setting `name` set to `new`; None when the file has no
    such setting, or (with `old`) its value is not written `old` there. A value is written
    in a form the file's own reader takes as a number (YAML 1.1 needs `1.0e-3`, not `1e-3`:
    loop/yaml_io.py writes it; JSON has no `.5`)."""
    # a module constant is the first of its name `find` returns: its regex alone finds it,
    # without the `ast` walk of each text a proposal writes on the way
    s = next((s for s in (_python(path, text) if kind_of(path) == "constant" else [])
              if s.name == name), None) \
        or next((s for s in find(path, text) if s.name == name), None)
    if s is None or (old is not None and s.text.strip() != old.strip()):
        return None
    return text[:s.start] + written(s.kind, new) + text[s.end:]


def written(kind: str, value: str) -> str:
    """`value` as a number literal the kind's reader parses as one."""
    v = value.strip().replace("_", "") if kind not in PYTHON_KINDS else value.strip()
    if kind == "yaml":              # read back the same by YAML 1.2 and PyYAML's 1.1 alike
        from loop.yaml_io import number
        try:
            return number(v)
        except ValueError:
            return v
    if kind == "json":
        v = v.lstrip("+")
        v = re.sub(r"^(-?)\.", r"\g<1>0.", v)
        v = re.sub(r"\.(?=$|[eE])", ".0", v)
    return v


def _python(path: str, text: str) -> list[Setting]:
    return [Setting(path, m["name"], m["value"], "constant", m.start("value"), m.end("value"))
            for m in PY_SETTING.finditer(text)]


def _literals(path: str, text: str) -> list[Setting]:
    """The `dict` and `kwarg` settings of a Python file, read with `ast` (none when it does
    not parse: a candidate with broken code has no such settings)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    offsets = _offsets(text)
    out: list[Setting] = []

    def add(name: str, kind: str, node: ast.expr) -> None:
        if _is_number(node):
            start, end = offsets(node.lineno, node.col_offset), \
                offsets(node.end_lineno or node.lineno, node.end_col_offset or 0)
            if _reads_as(text[start:end], node):     # (inside an f-string, positions drift)
                out.append(Setting(path, name, text[start:end], kind, start, end))
        elif isinstance(node, ast.Tuple):
            for i, elt in enumerate(node.elts):
                if _is_number(elt):
                    add(f"{name}.{i}", kind, elt)

    def dict_items(prefix: str, node: ast.expr) -> None:
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(node.keys, node.values)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)
                     and NAME_WORD.fullmatch(k.value)]
        elif _called(node) == "dict":
            pairs = [(k.arg, k.value) for k in node.keywords if k.arg]   # type: ignore[attr-defined]
        for key, value in pairs:
            if isinstance(value, ast.Dict) or _called(value) == "dict":
                dict_items(f"{prefix}.{key}", value)
            else:
                add(f"{prefix}.{key}", "dict", value)

    dicts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and (
                    isinstance(node.value, ast.Dict) or _called(node.value) == "dict"):
                dicts.add(id(node.value))
                dict_items(targets[0].id, node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in dicts and _called(node):
            for k in node.keywords:
                if k.arg:
                    add(f"{_called(node)}.{k.arg}", "kwarg", k.value)
    return sorted(out, key=lambda s: s.start)


NAME_WORD = re.compile(r"[A-Za-z_][\w\-]*")


def _called(node: ast.AST) -> str:
    """The called name of a call (`torch.optim.AdamW(...)`: AdamW), "" for anything else."""
    if not isinstance(node, ast.Call):
        return ""
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
        and not isinstance(node.value, bool)


def _reads_as(written: str, node: ast.expr) -> bool:
    """Whether the text at a node's position is that node's number."""
    try:
        return ast.literal_eval(written) == ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _offsets(text: str):
    """(line, UTF-8 column) as `ast` gives them -> an index into `text`."""
    starts, pos = [], 0
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)   # as `ast` counts lines
    for line in lines:
        starts.append(pos)
        pos += len(line)

    def at(line: int, col: int) -> int:
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="replace"))
    return at


def _yaml(path: str, text: str) -> list[Setting]:
    """Numbers of a YAML file's block mappings, nested keys named by their path, read by the
    one YAML reader (loop/yaml_io.py, the same that reads the flags file for the run's
    command line). Flow style (`{a: 1}`), lists, quoted numbers and aliased values are not
    settings; a file that reader refuses (a duplicate key, `<<:`) has none."""
    from loop.yaml_io import YamlError, numbers
    try:
        return [Setting(path, n.name, n.text, "yaml", n.start, n.end)
                for n in numbers(text, path)]
    except YamlError:
        return []


def _json(path: str, text: str) -> list[Setting]:
    """Numbers of a JSON file's objects, nested keys named by their path (arrays skipped)."""
    out: list[Setting] = []
    stack: list[str | None] = []     # per open object/array: its key (None: an array)
    key: str | None = None           # the key whose value comes next
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            word = text[i + 1:j]
            k = j + 1
            while k < n and text[k] in " \t\r\n":
                k += 1
            key = word if k < n and text[k] == ":" else None
            i = k + 1 if k < n and text[k] == ":" else j + 1
            continue
        if c in "{[":
            stack.append((key or "") if c == "{" else None)
            key = None
        elif c in "}]":
            if stack:
                stack.pop()
            key = None
        elif c in "-0123456789" and key is not None:
            m = JSON_NUMBER.match(text, i)
            if m and all(p is not None for p in stack):
                names = [p for p in stack[1:] if p] + [key]
                out.append(Setting(path, ".".join(names), m.group(), "json", i, m.end()))
            key = None
            i = m.end() if m else i + 1
            continue
        elif c == ",":
            key = None
        i += 1
    return out
