"""One factory style for the whole package: a name -> the thing it names, imported on first use.

Proposers, backends, repo shapes, edit formats and adapters are each a `Registry`: a table of
names and `"module:attribute"` targets, never inside the implementations (so no module imports
the table that imports it). The kinds a run config may name (proposers, backends) are tabled in
loop/kinds.py, which config.py and the parser read; the others where the kind is defined (the
package's `__init__`). `get` imports the target only when asked (torch, openai,
mlflow and ray stay out of `autoresearch --help`); an unknown name is a `UsageError` that lists
the names there are. This module imports no other loop module but `errors`.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from loop.errors import UsageError


class Registry:
    """`kind` names what is registered, for the error: "proposer", "backend", ..."""

    def __init__(self, kind: str, targets: dict[str, str]):
        for name, target in targets.items():
            if ":" not in target:
                raise ValueError(f"{kind} {name!r}: target {target!r} is not 'module:attribute'")
        self.kind, self._targets = kind, dict(targets)

    def names(self) -> list[str]:
        return list(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def get(self, name: str) -> Any:
        """The registered object (a class, a function, a module-level instance)."""
        if name not in self._targets:
            raise UsageError(f"unknown {self.kind} {name!r}: one of "
                             f"{', '.join(self._targets)}")
        module, _, attribute = self._targets[name].partition(":")
        return getattr(importlib.import_module(module), attribute)
