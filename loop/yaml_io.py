"""The engine's one YAML reader and one YAML writer, for task.yaml, autoresearch.yaml, the
flags file (task.yaml `flags`) and the YAML settings files a search rewrites.

Read: the YAML 1.2 core schema, so a value means what it says. `5e-05` is a number, `1:00`,
`0777`-style octal (only `0o777` is octal; `0777` is 777), `yes`, `no`, `on`, `off` and dates
are what they are in YAML 1.2 (decimal 777, strings), and only `true`/`false` are booleans.
Refused, each in one line naming the key: a duplicate key (YAML's last-wins would let one
line of a diff hide another), a merge key `<<:`, nesting deeper than `MAX_DEPTH`; and, for a
file read `strict`ly (the flags file: each value becomes a word of the run's command line),
anchors, aliases and explicit tags, and any value longer than `VALUE_CHARS_MAX`.

Written: every number in a form both YAML 1.2 and PyYAML's YAML 1.1 read back as the same
number (`5.0e-05`, never `5e-05`, which YAML 1.1 reads as a string; integers without leading
zeros), every string quoted where either schema would read it as something else. Pure."""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from loop.untrusted import one_line, parse_number

MAX_DEPTH = 64               # far deeper than any config; PyYAML's composer recurses
VALUE_CHARS_MAX = 4096       # a flag's value: one word of a command line
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
STR = "tag:yaml.org,2002:str"
MERGE = "tag:yaml.org,2002:merge"
# YAML 1.2.2, 10.3.2 (the core schema's tag resolution)
CORE_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
CORE_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
CORE_NULL = re.compile(r"~|null|Null|NULL|")
DECIMAL = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
# a string written unquoted: safe characters, and read back as a string by both schemas
PLAIN = re.compile(r"[\w./~$][\w./~$-]*")


class YamlError(ValueError):
    """YAML that is not read (one line, naming the file and the key)."""


class _Core12Resolver(BaseResolver):
    pass


for _tag, _regexp, _first in (
        ("tag:yaml.org,2002:bool", CORE_BOOL, "tTfF"),
        ("tag:yaml.org,2002:null", CORE_NULL, ["~", "n", "N", ""]),
        (INT, CORE_INT, "-+0123456789"),
        (FLOAT, CORE_FLOAT, "-+.0123456789")):
    _Core12Resolver.add_implicit_resolver(_tag, re.compile(rf"^(?:{_regexp.pattern})$"),
                                          list(_first))


def _path(keys: list) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k))
                   for i, k in enumerate(keys)) or "(top)"


class _Loader(Reader, Scanner, Parser, Composer, SafeConstructor, _Core12Resolver):
    """PyYAML's safe loader on the core schema, with the checks of the module docstring."""

    def __init__(self, text: str, strict: bool):
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        _Core12Resolver.__init__(self)
        self.strict = strict
        self.keys: list = []                 # the key path of the node being composed

    def compose_node(self, parent, index):
        if isinstance(parent, MappingNode) and isinstance(index, Node):
            self.keys.append(index.value if isinstance(index, ScalarNode) else "?")
        elif isinstance(parent, SequenceNode):
            self.keys.append(index)
        else:
            self.keys.append(None)
        try:
            if len(self.keys) > MAX_DEPTH:
                raise YamlError(f"{_path([k for k in self.keys[:2] if k is not None])}: "
                                f"nested deeper than {MAX_DEPTH} levels")
            event = self.peek_event()
            if self.strict and (getattr(event, "anchor", None) is not None
                                or isinstance(event, yaml.AliasEvent)
                                or getattr(event, "tag", None) is not None):
                raise YamlError(f"{self.where()}: anchors, aliases and tags (&, *, !) are "
                                f"not read here; write the value itself")
            if self.strict and isinstance(event, yaml.ScalarEvent) \
                    and len(event.value) > VALUE_CHARS_MAX:
                raise YamlError(f"{self.where()}: the value is {len(event.value)} characters "
                                f"long, over the {VALUE_CHARS_MAX} a value may have")
            return super().compose_node(parent, index)
        finally:
            self.keys.pop()

    def where(self) -> str:
        return _path([k for k in self.keys if k is not None])

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key_node.tag == MERGE or (key == "<<" and key_node.style is None):
                raise YamlError(f"line {line}: a merge key `<<` is not read; write the keys "
                                f"themselves")
            try:
                first = seen.get(key)
                seen[key] = line
            except TypeError:
                raise YamlError(f"line {line}: a key must be a plain value, got "
                                f"{type(key).__name__}") from None
            if first is not None:
                raise YamlError(f"{one_line(key, 80)}: a duplicate key (lines {first} and "
                                f"{line}); keep one")
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        sign = -1 if text.startswith("-") else 1
        body = text.lstrip("+-")
        if body.startswith(("0o", "0x")):
            return int(body[2:], 8 if body[1] == "o" else 16)
        return sign * int(body)


_Loader.yaml_constructors = {**SafeConstructor.yaml_constructors,
                             INT: _Loader.construct_yaml_int}


def load(text: str, where: str, strict: bool = False) -> object:
    """A YAML document's content (None when empty), read on the core schema; YamlError (one
    line starting with `where`) for anything not read."""
    return _read(lambda: _Loader(text, strict).get_single_data(), where)


def compose(text: str, where: str, strict: bool = False) -> Node | None:
    """The node tree of a YAML document (values with their places in `text`), with `load`'s
    checks; YamlError when it is not read."""
    def composed() -> Node | None:
        loader = _Loader(text, strict)
        node = loader.get_single_node()
        if node is not None:
            loader.construct_document(node)          # the checks on keys (duplicates, <<)
        return node
    return _read(composed, where)


def _read(reader, where: str):
    at = f"{where}: " if where else ""
    try:
        return reader()
    except YamlError as exc:
        raise YamlError(f"{at}{exc}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"{at}not valid YAML: {one_line(exc, 300)}") from None
    except (ValueError, RecursionError) as exc:      # a 5000-digit integer; a runaway
        raise YamlError(f"{at}not read: {one_line(exc, 200)}") from None


@dataclass(frozen=True)
class Number:
    """A number a YAML file's block mappings hold: its key path, its text, where it is."""
    name: str                # `lr`, or `optim.lr` for a nested key
    text: str
    start: int
    end: int


def numbers(text: str, where: str = "") -> list[Number]:
    """Every plain decimal number of a YAML file's block mappings, in file order, nested keys
    named by their path (`optim.lr`); flow style (`{a: 1}`), lists, quoted numbers and
    aliased values are not among them. YamlError when the file is not read. Remembered by
    text: a search asks for the same files' numbers several times a proposal."""
    try:
        return list(_numbers(text))
    except YamlError as exc:
        raise YamlError(f"{where}: {exc}" if where else str(exc)) from None


@functools.lru_cache(maxsize=64)
def _numbers(text: str) -> tuple[Number, ...]:
    root = compose(text, "")
    if not isinstance(root, MappingNode):
        return ()
    uses: dict[int, int] = {}
    stack: list[Node] = [root]
    while stack:                          # a node an alias repeats is written in one place
        node = stack.pop()
        uses[id(node)] = uses.get(id(node), 0) + 1
        if uses[id(node)] == 1 and isinstance(node, (MappingNode, SequenceNode)):
            stack += [n for pair in node.value for n in pair] if isinstance(
                node, MappingNode) else node.value
    out: list[Number] = []

    def walk(node: MappingNode, prefix: str) -> None:
        for key, value in node.value:
            if not (isinstance(key, ScalarNode) and key.tag == STR and key.style is None
                    and re.fullmatch(r"[A-Za-z_][\w.\-]*", key.value)) or uses[id(value)] > 1:
                continue
            name = prefix + key.value
            if isinstance(value, MappingNode) and not value.flow_style:
                walk(value, name + ".")
            elif isinstance(value, ScalarNode) and value.style is None \
                    and value.tag in (INT, FLOAT) and DECIMAL.fullmatch(value.value):
                out.append(Number(name, value.value, value.start_mark.index,
                                  value.end_mark.index))
    if not root.flow_style:
        walk(root, "")
    return tuple(out)


# -- written -------------------------------------------------------------------------------------
def number(value: object) -> str:
    """A number (an int, a float, or its source text: `3e-4`, `1_000`, `2**19`) as YAML text
    that both YAML 1.2 and YAML 1.1 read back as that number; ValueError for no number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return _float_text(repr(value))
    text = str(value).strip().replace("_", "")
    parse_number(value)                                   # ValueError: not a number
    if "**" in text:
        v = parse_number(text)
        return str(int(v)) if v == int(v) and abs(v) < 2 ** 53 else number(v)
    if re.fullmatch(r"[-+]?\d+", text):
        return str(int(text))                             # `0777` is 777: written 777
    return _float_text(text)


def _float_text(text: str) -> str:
    """`5e-05` -> `5.0e-05`, `.5` kept, `007.5` -> `7.5`: a dot before the exponent and a
    signed exponent (YAML 1.1's float), no leading zeros (YAML 1.1's octal)."""
    mant, _, exp = text.partition("e") if "e" in text else text.partition("E")
    sign = mant[:1] if mant[:1] in "+-" else ""
    mant = mant[len(sign):]
    mant = re.sub(r"^0+(?=\d)", "", mant)
    if "." not in mant:
        mant += ".0"
    if exp:
        exp = exp if exp[:1] in "+-" else "+" + exp
        return f"{sign.lstrip('+')}{mant}e{exp}"
    return f"{sign.lstrip('+')}{mant}"


def scalar(value: object) -> str:
    """One YAML scalar: a number as `number` writes it, true/false, null, or a string, plain
    where both schemas read it back as that string, else double-quoted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return number(value)
    text = str(value)
    if PLAIN.fullmatch(text) and _reads_as_text(text):
        return text
    return json.dumps(text) if text.isascii() and text.isprintable() else _quoted(text)


def _reads_as_text(text: str) -> bool:
    try:
        return (yaml.SafeLoader(text).get_single_data() == text
                and _Loader(text, strict=False).get_single_data() == text)
    except (yaml.YAMLError, ValueError):
        return False


def _quoted(text: str) -> str:
    out = yaml.dump(text, Dumper=Dumper, default_style='"', width=1 << 30, allow_unicode=True)
    return out.rstrip("\n").removesuffix("\n...").rstrip("\n")


def flow(value: object) -> str:
    """A value in flow style on one line: `[1.0e-05, 0.001]`, `{name: x, direction: max}`."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value)


class Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper writing what `load` reads back the same: numbers as `number`,
    strings quoted where YAML 1.2 (as well as 1.1) would read them as something else,
    multi-line strings as `|` blocks."""


for _tag, _regexp, _first in (
        ("tag:yaml.org,2002:bool", CORE_BOOL, "tTfF"),
        (INT, CORE_INT, "-+0123456789"),
        (FLOAT, CORE_FLOAT, "-+.0123456789")):
    Dumper.add_implicit_resolver(_tag, re.compile(rf"^(?:{_regexp.pattern})$"), list(_first))


def _represent_str(dumper: Dumper, value: str):
    if any(c in value for c in "\x85\u2028\u2029"):    # line breaks to YAML 1.1 only
        return dumper.represent_scalar(STR, value, style='"')
    # a block (`|`) in a document; the one style asked for in a single scalar (`scalar`),
    # whose trailing line breaks a block would lose once the scalar is cut from its document
    style = dumper.default_style or ("|" if "\n" in value else None)
    return dumper.represent_scalar(STR, value, style=style)


def _represent_number(dumper: Dumper, value):
    tag = FLOAT if isinstance(value, float) else INT
    return dumper.represent_scalar(tag, number(value))


Dumper.add_representer(str, _represent_str)
Dumper.add_representer(float, _represent_number)
Dumper.add_representer(int, _represent_number)


def dump(data: object) -> str:
    """Block-style YAML text for `data` (keys in their order) that `load` reads back equal."""
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)
