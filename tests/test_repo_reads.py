"""What the engine reads about its branch, HEAD and commits without a git process each time
(git's files where they are plain, what a commit never changes remembered) says exactly
what git says, and asks git whenever the files are not plain."""
import os

import pytest

from conftest import git
from loop.repo.refs import head_is_branch, loose_ref
from loop.repo.workspace import Workspace, worktree_path


@pytest.fixture
def ws(toy_repo):
    w = Workspace(toy_repo, "t", worktree_path(toy_repo, "t"))
    w.open()
    return w


def branch_ref(ws) -> str:
    return f"refs/heads/{ws.branch}"


def test_the_branch_read_from_its_ref_file_is_what_git_says(ws):
    kept = ws.recommit(ws.stage_on(ws.tip(), "task", {"train.py": "X = 1\n"}, "keep"), "keep\n")
    ws.advance(kept, ws.tip())
    assert loose_ref(ws.common_dir, branch_ref(ws)) == kept == ws.tip()
    assert ws.tip() == git(ws.repo_root, "rev-parse", branch_ref(ws))


def test_a_packed_or_odd_ref_is_asked_of_git(ws, tmp_path):
    tip = ws.tip()
    git(ws.repo_root, "pack-refs", "--all")        # no loose file: git knows where it is
    assert loose_ref(ws.common_dir, branch_ref(ws)) is None
    assert ws.tip() == tip
    # a ref file a run replaced by a link, or filled with something else: git is asked
    loose = ws.common_dir / branch_ref(ws)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(tip + "\n")
    loose.parent.mkdir(parents=True, exist_ok=True)   # pack-refs removed the empty folder
    os.symlink(elsewhere, loose)
    assert loose_ref(ws.common_dir, branch_ref(ws)) is None
    loose.unlink()
    loose.write_text(f"{tip} trailing\n")
    assert loose_ref(ws.common_dir, branch_ref(ws)) is None
    assert ws.tip() == git(ws.repo_root, "rev-parse", branch_ref(ws))
    assert loose_ref(ws.common_dir, "refs/heads/../../config") is None


def test_head_is_read_from_its_file_only_when_it_plainly_names_the_branch(ws):
    admin = ws.common_dir / "worktrees" / ws.worktree.name
    assert head_is_branch(ws.worktree, admin, branch_ref(ws))
    assert ws.reattach() is None
    git(ws.worktree, "checkout", "-q", "--detach")   # what a run's `git checkout` does
    assert not head_is_branch(ws.worktree, admin, branch_ref(ws))
    assert "switched its worktree to a detached HEAD" in ws.reattach()
    assert git(ws.worktree, "symbolic-ref", "HEAD") == branch_ref(ws)
    # a `.git` file pointing elsewhere is not read past: git decides
    dot_git = ws.worktree / ".git"
    dot_git.write_text(dot_git.read_text().replace(ws.worktree.name, "other"))
    assert not head_is_branch(ws.worktree, admin, branch_ref(ws))


def test_one_diff_call_gives_gits_patch_and_line_counts(ws):
    base = ws.tip()
    files = {"train.py": "X = 5\nY = 6\n", "data.bin": "\x00\x01"}
    attempt = ws.stage_on(ws.tip(), "task", files, "two")
    patch, added, removed = ws.diff(base, attempt)
    assert patch == git(ws.repo_root, "diff", base, attempt) + "\n"
    numstat = [line.split("\t") for line in
               git(ws.repo_root, "diff", "--numstat", base, attempt).splitlines()]
    assert (added, removed) == (sum(int(a) for a, _, _ in numstat if a != "-"),
                                sum(int(r) for _, r, _ in numstat if r != "-"))
    assert ("-\t-\ttask/data.bin" in git(ws.repo_root, "diff", "--numstat", base, attempt))
    assert ws.diff(base, base) == ("", 0, 0)


def test_a_recommit_is_the_same_change_as_the_commit_it_rewrites(ws):
    base = ws.tip()
    attempt = ws.stage_on(base, "task", {"train.py": "X = 7\n"}, "attempt")
    final = ws.recommit(attempt, "attempt\n\nverdict: keep")
    assert final != attempt
    assert git(ws.repo_root, "rev-parse", f"{final}^") == base
    assert git(ws.repo_root, "log", "-1", "--format=%B", final) == "attempt\n\nverdict: keep"
    trees = [git(ws.repo_root, "rev-parse", f"{c}^{{tree}}") for c in (attempt, final, base)]
    assert trees[0] == trees[1]
    assert ws.trees([attempt, final, base, attempt]) == [*trees, trees[0]]
    assert ws.diff(base, final) == ws.diff(base, attempt)
    assert ws.diff(base, final)[0] == git(ws.repo_root, "diff", base, final) + "\n"


def test_attempts_staged_on_one_base_each_hold_only_their_own_files(ws):
    base = ws.tip()
    first = ws.stage_on(base, "task", {"train.py": "X = 1\n"}, "first")
    second = ws.stage_on(base, "task", {"notes/ü ber.txt": "a\n", "lib/x.py": "Y = 2\n",
                                        "train.py": "X = 2\n"}, "second")
    third = ws.stage_on(first, "task", {"grade2.py": "Z = 3\n"}, "on the first")
    changed = lambda old, new: git(ws.repo_root, "-c", "core.quotePath=false", "diff",  # noqa: E731
                                   "--name-only", old, new).splitlines()
    assert changed(base, first) == ["task/train.py"]
    assert changed(base, second) == ["task/lib/x.py", "task/notes/ü ber.txt", "task/train.py"]
    assert changed(first, third) == ["task/grade2.py"]
    assert git(ws.repo_root, "show", f"{second}:task/train.py") == "X = 2"
    assert git(ws.repo_root, "show", f"{third}:task/train.py") == "X = 1"
    assert [git(ws.repo_root, "rev-parse", f"{c}^") for c in (first, second, third)] == \
        [base, base, first]
    assert ws.trees([second]) == [git(ws.repo_root, "rev-parse", f"{second}^{{tree}}")]


def test_a_path_git_refuses_is_a_git_error(ws):
    from loop.repo.gitsafe import GitError
    for files in ({"git~1/x.py": "import os\n"},
                  {"ok.py": "A = 1\n", "git~1/x.py": "import os\n"}):   # one of several too
        with pytest.raises(GitError, match="cannot add task/git~1/x.py"):
            ws.stage_on(ws.tip(), "task", files, "refused")


def test_a_slots_detached_head_is_read_from_its_file_as_git_reads_it(ws, tmp_path):
    slot = ws.add_slot_worktree(tmp_path / "slots" / "0")
    head = slot.head()
    assert head == git(slot.worktree, "rev-parse", "HEAD") == ws.tip()
    assert slot.head_or_none() == head and slot.reattach(detached_at=head) is None
    other = ws.stage_on(head, "task", {"train.py": "X = 9\n"}, "elsewhere")
    git(slot.worktree, "checkout", "-q", "--detach", other)      # a run moved it
    assert slot.head() == other
    assert "switched its worktree to a detached HEAD" in slot.reattach(detached_at=head)
    assert slot.head() == head
    git(slot.worktree, "checkout", "-q", "-b", "mine")           # or put it on a branch
    assert slot.head() == head                                   # git answered: the branch's
    assert "switched its worktree to refs/heads/mine" in slot.reattach(detached_at=head)
    assert git(slot.worktree, "rev-parse", "--symbolic-full-name", "HEAD") == "HEAD"
