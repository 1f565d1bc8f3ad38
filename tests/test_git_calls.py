"""Every git call in loop/ goes through the hardened wrapper (loop/repo/gitsafe.py): no repo's
hooks, fsmonitor, pager or credential helper runs, and no secret reaches git's environment."""
import ast
from pathlib import Path

import pytest

from loop.repo.gitsafe import Git

LOOP = Path(__file__).resolve().parent.parent / "loop"
SPAWNERS = {"run", "Popen", "call", "check_call", "check_output"}


def _raw_git_calls(path: Path, root: Path = LOOP.parent) -> list[str]:
    """`subprocess.run(["git", ...])` and the like: a list literal starting with "git"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SPAWNERS and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.List) and first.elts and \
                isinstance(first.elts[0], ast.Constant) and first.elts[0].value == "git":
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_module_but_the_wrapper_spawns_git():
    raw = [hit for p in sorted(LOOP.rglob("*.py")) if p.name != "gitsafe.py"
           for hit in _raw_git_calls(p)]
    assert raw == [], f"git run around loop/repo/gitsafe.run_git: {raw}"


def test_the_scan_finds_a_raw_call(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('import subprocess\nsubprocess.run(["git", "status"], cwd=".")\n')
    assert _raw_git_calls(planted, tmp_path) == ["planted.py:2"]


def test_git_subcommands_are_typed_methods(tmp_path):
    git = Git(tmp_path)
    assert callable(git.rev_parse) and callable(git.worktree)
    with pytest.raises(AttributeError):
        git.rev_prase("HEAD")   # a typo is an AttributeError (and mypy's error), not a git call
