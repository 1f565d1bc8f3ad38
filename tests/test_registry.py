"""loop/registry.py: the one factory style (proposers, backends, shapes, edit formats, adapters)."""
import sys

import pytest

from loop.errors import UsageError
from loop.registry import Registry


def test_a_name_gives_its_target_imported_only_when_asked():
    sys.modules.pop("json.tool", None)
    reg = Registry("thing", {"tool": "json.tool:main", "dumps": "json:dumps"})
    assert "json.tool" not in sys.modules          # nothing imported by building the table
    import json
    assert reg.get("dumps") is json.dumps
    assert reg.names() == ["tool", "dumps"] and "tool" in reg and list(reg) == ["tool", "dumps"]


def test_an_unknown_name_is_one_line_listing_the_names():
    reg = Registry("backend", {"local": "json:dumps", "ray": "json:loads"})
    with pytest.raises(UsageError, match=r"^unknown backend 'slurmm': one of local, ray$"):
        reg.get("slurmm")


def test_a_target_without_its_attribute_is_refused_when_the_table_is_built():
    with pytest.raises(ValueError, match="not 'module:attribute'"):
        Registry("thing", {"x": "json.dumps"})
