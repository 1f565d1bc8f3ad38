"""The git side, in a real temp repo: keep, restore, attempts retained, user checkout untouched."""
from pathlib import Path

import pytest

from conftest import git
from loop.errors import UsageError
from loop.workspace import Workspace, worktree_path


@pytest.fixture
def ws(toy_repo):
    w = Workspace(toy_repo, "t", worktree_path(toy_repo, "t"))
    w.open()
    return w


def test_branch_and_worktree_leave_the_user_checkout_alone(toy_repo):
    (toy_repo / "task" / "train.py").write_text("X = 99  # uncommitted user work\n")
    (toy_repo / "notes.txt").write_text("mine\n")
    head = git(toy_repo, "rev-parse", "HEAD")
    w = Workspace(toy_repo, "t", worktree_path(toy_repo, "t"))
    assert w.open() is True
    commit = w.stage("task", {"train.py": "X = 1.0\nprint('score: 0')\n"}, "try X=1")
    w.advance(w.recommit(commit, "try X=1\n\nkept"), head)
    w.restore()
    assert git(toy_repo, "rev-parse", "HEAD") == head
    assert git(toy_repo, "branch", "--show-current") == "main"
    assert (toy_repo / "task" / "train.py").read_text() == "X = 99  # uncommitted user work\n"
    assert (toy_repo / "notes.txt").read_text() == "mine\n"
    status = git(toy_repo, "status", "--porcelain")
    assert ".autoresearch" not in status           # run state is excluded from git status
    assert git(toy_repo, "log", "-1", "--format=%s", "autoresearch/t") == "try X=1"


def test_keep_moves_the_branch_and_discard_restores(ws):
    base = ws.tip()
    kept = ws.recommit(ws.stage("task", {"train.py": "X = 1\n"}, "keep me"), "keep me\n")
    ws.advance(kept, base)
    ws.restore()
    assert ws.tip() == kept
    assert (ws.worktree / "task" / "train.py").read_text() == "X = 1\n"

    attempt = ws.stage("task", {"train.py": "X = 5\n"}, "discard me")
    ref = ws.keep_ref("attempt-2", attempt)
    (ws.worktree / "task" / "grade.py").write_text("tampered at run time\n")
    (ws.worktree / "task" / "checkpoint.bin").write_text("run output")
    assert "task/grade.py" in ws.modified_paths("task")
    ws.restore()
    assert ws.tip() == kept, "a discard never moves the branch"
    assert (ws.worktree / "task" / "train.py").read_text() == "X = 1\n"
    assert (ws.worktree / "task" / "grade.py").read_text() == "# protected harness\n"
    assert not (ws.worktree / "task" / "checkpoint.bin").exists()
    # the discarded attempt is still retrievable, with its exact diff
    assert git(ws.repo_root, "show", f"{ref}:task/train.py") == "X = 5"
    patch, added, removed = ws.diff(kept, attempt)
    assert "-X = 1" in patch and "+X = 5" in patch and (added, removed) == (1, 1)


def test_advance_is_compare_and_swap(ws):
    base = ws.tip()
    first = ws.recommit(ws.stage("task", {"train.py": "X = 1\n"}, "a"), "a\n")
    ws.advance(first, base)
    stale = ws.recommit(ws.stage("task", {"train.py": "X = 2\n"}, "b"), "b\n")
    with pytest.raises(RuntimeError):
        ws.advance(stale, base)           # the tip moved since: refuse
    assert ws.tip() == first


def test_commits_without_a_git_identity(ws, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))          # no global user.name
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    w = Workspace(ws.repo_root, "t", ws.worktree)
    commit = w.stage("task", {"train.py": "X = 7\n"}, "anonymous")
    assert git(w.repo_root, "log", "-1", "--format=%an <%ae>", commit) == \
        "autoresearch <autoresearch@localhost>"


def test_materialize_and_export(ws):
    attempt = ws.stage("task", {"train.py": "X = 8\n"}, "x")
    ws.restore()
    ws.materialize(attempt)
    assert (ws.worktree / "task" / "train.py").read_text() == "X = 8\n"
    assert ws.tip() != attempt
    out = ws.export(attempt, "task", ws.worktree.parent / "grade")
    assert (out / "train.py").read_text() == "X = 8\n" and (out / "grade.py").exists()


def test_not_a_repo_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="not inside a git repository"):
        Workspace.find_repo_root(tmp_path)
