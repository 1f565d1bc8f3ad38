"""The git side, in a real temp repo: keep, restore, attempts retained, user checkout untouched."""

import pytest

from conftest import git
from loop.errors import UsageError
from loop.repo.workspace import Workspace, worktree_path


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
    commit = w.stage_on(w.tip(), "task", {"train.py": "X = 1.0\nprint('score: 0')\n"}, "try X=1")
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
    staged = ws.stage_on(ws.tip(), "task", {"train.py": "X = 1\n"}, "keep me")
    kept = ws.recommit(staged, "keep me\n")
    ws.advance(kept, base)
    ws.restore()
    assert ws.tip() == kept
    assert (ws.worktree / "task" / "train.py").read_text() == "X = 1\n"

    attempt = ws.stage_on(ws.tip(), "task", {"train.py": "X = 5\n"}, "discard me")
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
    first = ws.recommit(ws.stage_on(ws.tip(), "task", {"train.py": "X = 1\n"}, "a"), "a\n")
    ws.advance(first, base)
    stale = ws.recommit(ws.stage_on(ws.tip(), "task", {"train.py": "X = 2\n"}, "b"), "b\n")
    with pytest.raises(RuntimeError):
        ws.advance(stale, base)           # the tip moved since: refuse
    assert ws.tip() == first


def test_commits_without_a_git_identity(ws, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))          # no global user.name
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    w = Workspace(ws.repo_root, "t", ws.worktree)
    commit = w.stage_on(w.tip(), "task", {"train.py": "X = 7\n"}, "anonymous")
    assert git(w.repo_root, "log", "-1", "--format=%an <%ae>", commit) == \
        "autoresearch <autoresearch@localhost>"


def test_materialize_and_export(ws):
    attempt = ws.stage_on(ws.tip(), "task", {"train.py": "X = 8\n"}, "x")
    ws.restore()
    ws.materialize(attempt)
    assert (ws.worktree / "task" / "train.py").read_text() == "X = 8\n"
    assert ws.tip() != attempt
    out = ws.export(attempt, "task", ws.worktree.parent / "grade")
    assert (out / "train.py").read_text() == "X = 8\n" and (out / "grade.py").exists()


def test_not_a_repo_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="not inside a git repository"):
        Workspace.find_repo_root(tmp_path)


LATIN1_TRAIN = ("# -*- coding: latin-1 -*-\n"
                "# r\xe9glage: X is the knob\n"
                "X = 3.0\n"
                "NAME = 'caf\xe9'\n"
                "assert len(NAME) == 4\n"
                "print(f'score: {(X - 1) ** 2:.6f}')\n").encode("latin-1")


def test_a_latin1_file_round_trips_byte_for_byte(ws):
    """Valid Python declaring latin-1: read, staged, diffed and read back unchanged."""
    git(ws.repo_root, "worktree", "list")          # the repo is usable
    (ws.repo_root / "task" / "train.py").write_bytes(LATIN1_TRAIN)
    git(ws.repo_root, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "latin1")
    head = git(ws.repo_root, "rev-parse", "HEAD")
    text = ws.read_at(head, "task", ["train.py"])["train.py"]
    assert "r\xe9glage" in text and "\ufffd" not in text
    commit = ws.stage_on(head, "task", {"train.py": text.replace("X = 3.0", "X = 1.5")}, "X")
    patch, added, removed = ws.diff(head, commit)  # git's output is not UTF-8: no crash
    assert "+X = 1.5" in patch and (added, removed) == (1, 1)
    data = git_bytes(ws.repo_root, "show", f"{commit}:task/train.py")
    assert data == LATIN1_TRAIN.replace(b"X = 3.0", b"X = 1.5")       # still latin-1


def git_bytes(cwd, *args) -> bytes:
    import subprocess
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def test_a_night_on_a_latin1_file_runs_and_resumes(toy_repo, mlflow_uri):
    from conftest import run_cli
    (toy_repo / "task" / "train.py").write_bytes(LATIN1_TRAIN)
    git(toy_repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "latin1")
    for iterations in ("2", "3"):                  # the second call resumes the tag
        res = run_cli("run", "--task", "task", "--tag", "l1", "--iterations", iterations,
                      "--judge", "strict", "--time-budget", "10", cwd=toy_repo)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Traceback" not in res.stderr and "UnicodeDecodeError" not in res.stdout
    rows = (toy_repo / ".autoresearch" / "l1" / "results.tsv").read_text().splitlines()[1:]
    assert len(rows) == 4 and not [r for r in rows if "\tcrash\t" in r or "bad_edit" in r]
    tip = git_bytes(toy_repo, "show", "autoresearch/l1:task/train.py")
    assert b"r\xe9glage" in tip and b"caf\xe9" in tip                  # never re-encoded
