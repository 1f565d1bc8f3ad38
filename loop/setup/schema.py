"""Build typed dataclasses from YAML mappings, with one clear error per bad key."""
from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Any


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_keys(data: dict, allowed, where: str, error: type[Exception]) -> None:
    if not isinstance(data, dict):
        raise error(f"{where}: expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            raise error(f"{where}: unknown key '{key}'{did_you_mean(str(key), allowed)}; "
                        f"allowed: {', '.join(sorted(allowed))}")


def _coerce(value: Any, hint: Any, where: str, error: type[Exception]) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where, error)
    if hint is Any:
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise error(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):         # YAML's .nan/.inf: a budget that never ends
            raise error(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise error(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise error(f"{where}: expected a string, got {value!r}")
        return str(value)
    if origin in (list, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise error(f"{where}: expected a list, got {value!r}")
        return tuple(_coerce(v, args[0], f"{where}[{i}]", error) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise error(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _coerce(v, args[1], f"{where}.{k}", error) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where, error)
    return value


def build(cls, data: Any, where: str, error: type[Exception]):
    """Instantiate dataclass `cls` from `data` (YAML as read: anything but a mapping or None
    is refused), rejecting unknown keys and wrong types."""
    data = {} if data is None else data
    fields = {f.name: f for f in dataclasses.fields(cls)   # `internal`: set by code, not YAML
              if f.init and not f.metadata.get("internal")}
    check_keys(data, fields, where, error)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(value, hints[name], f"{where}.{name}" if where else name, error)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required key is missing
        missing = [n for n, f in fields.items()
                   if n not in data and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        raise error(f"{where}: missing required key '{missing[0]}'" if missing
                    else f"{where}: {exc}") from exc


def load_yaml(path, error: type[Exception]) -> object:
    """A YAML file's content (None when empty), read by loop/yaml_io.py (YAML 1.2
    core schema; duplicate and merge keys refused); YAML not read is one line of `error`."""
    from loop.yaml_io import YamlError, load
    try:
        return load(Path(path).read_text(), str(path))
    except YamlError as exc:
        raise error(str(exc)) from None
