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


def test_the_config_and_the_command_line_offer_exactly_the_registered_kinds():
    """One list per kind (loop/kinds.py): the registries, config.py's check and the parser's
    choices all read it, so a kind added there is offered everywhere at once."""
    from loop.kinds import BACKENDS, PROPOSERS, SANDBOX_MODES, TUNE_SAMPLERS
    from loop.ui.parser import build_parser
    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]
    choices = {a.dest: list(a.choices) for a in run._actions if a.choices}
    assert choices["proposer_kind"] == PROPOSERS.names()
    assert choices["backend"] == BACKENDS.names()
    assert choices["sandbox"] == list(SANDBOX_MODES)
    assert choices["proposer_sampler"] == list(TUNE_SAMPLERS)


def test_every_registered_target_imports():
    from loop.adapters import ADAPTERS
    from loop.edits.formats import FORMATS
    from loop.init.shapes import SHAPES
    from loop.proposers.registry import PROPOSERS
    from loop.run.backends import BACKENDS
    for registry in (ADAPTERS, FORMATS, SHAPES, PROPOSERS, BACKENDS):
        for name in registry:
            if name == "ray" and registry is BACKENDS:
                continue        # imports ray, an extra
            assert registry.get(name) is not None, (registry.kind, name)
