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


def _argv_lists(path: Path, root: Path = LOOP.parent) -> list[str]:
    """`run_git([...])` with a literal argument list: git's own words written outside the
    repo layer."""
    return [f"{path.relative_to(root)}:{node.lineno}" for node in ast.walk(ast.parse(
            path.read_text())) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "run_git" and node.args and isinstance(node.args[0], ast.List)]


def test_outside_the_repo_layer_no_module_writes_a_git_argument_list():
    outside = [hit for p in sorted(LOOP.rglob("*.py")) if "repo" not in p.relative_to(LOOP).parts
               for hit in _argv_lists(p)]
    assert outside == [], f"ask loop/repo/queries.py (typed) instead: {outside}"


def test_the_argv_scan_finds_one(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('from loop.repo.gitsafe import run_git\nrun_git(["status"], ".")\n')
    assert _argv_lists(planted, tmp_path) == ["planted.py:2"]


def test_the_typed_queries_answer_on_a_real_repository(tmp_path):
    import subprocess
    import tarfile
    import io
    from loop.repo import queries

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q", "-b", "main")
    assert queries.head_commit(tmp_path) is None and queries.origin_url(tmp_path) == ""
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "train.py").write_text("X = 1\n")
    (tmp_path / ".gitignore").write_text("data/\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.bin").write_text("0")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    git("remote", "add", "origin", "https://example.com/owner/repo.git")
    head = queries.head_commit(tmp_path)
    assert head and len(head) == 40
    assert queries.tracked(tmp_path, "task") == ["task/train.py"]
    assert queries.is_ignored(tmp_path, "data/x.bin") and not queries.is_ignored(tmp_path,
                                                                                 "task/train.py")
    assert queries.ignored_untracked(tmp_path) == ["data/"]
    names = tarfile.open(fileobj=io.BytesIO(queries.archive(tmp_path, head, "task"))).getnames()
    assert "task/train.py" in names and ".gitignore" not in names
    assert queries.origin_url(tmp_path) == "https://example.com/owner/repo.git"
