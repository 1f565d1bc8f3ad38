"""The git side of the loop: a branch per tag, a worktree to run in, kept commits on the
branch, and a ref for every attempt so that nothing tried is ever lost.

The user's own checkout is never touched: every command runs in the worktree or on refs.
Every git call is hardened (loop/repo/gitsafe.py): no repository-configured program runs, and
config, hooks and refs an experiment changed are put back. Knows nothing about metrics."""
from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from loop.errors import UsageError
from loop.edits import sourcetext
from loop.repo import pristine, staging
from loop.repo.commits import CommitFacts, numstat_and_patch
from loop.repo.exclude import exclude, exclude_path
from loop.repo.gitsafe import Git, RefSnapshot, RepoGuard, run_git
from loop.repo.refs import detached_head, head_is_branch, loose_ref
from loop.repo.taglock import tag_active
from loop.untrusted import clean

FALLBACK_AUTHOR = ("autoresearch", "autoresearch@localhost")


def git_toplevel(path: Path) -> Path | None:
    """The root of the git repository holding `path`, or None outside any."""
    out = run_git(["rev-parse", "--show-toplevel"], path, check=False)
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 else None


def worktree_path(repo_root: Path, tag: str) -> Path:
    """Where a tag's worktree lives: beside the state folders, not inside one (a tag never
    starts with '.', so `.worktrees` cannot be a tag)."""
    return Path(repo_root) / ".autoresearch" / ".worktrees" / tag


class Workspace:
    def __init__(self, repo_root: Path, tag: str, worktree: Path):
        self.repo_root = Path(repo_root)
        self.tag = tag
        self.branch = f"autoresearch/{tag}"
        self.worktree = Path(worktree)
        common = Path(run_git(["rev-parse", "--git-common-dir"], self.repo_root).stdout.strip())
        self.common_dir = common if common.is_absolute() else self.repo_root / common
        self.guard = RepoGuard(self.common_dir, self.common_dir / "worktrees" / self.worktree.name,
                               self.branch, tag, active=self._night_active)
        self.git = Git(self.repo_root, before=self.guard.restore_files)
        self._env = self._author_env()
        self.watched: RefSnapshot | None = None   # see `watch`
        self._wtgit = Git(self.worktree, self._env, before=self.guard.restore_files)
        self.facts = CommitFacts()   # trees and diffs of commits: git is asked once each
        self._base_index = staging.BaseIndex()    # stage_on's last base, its index in memory

    # -- set-up ------------------------------------------------------------------
    @staticmethod
    def find_repo_root(path: Path) -> Path:
        root = git_toplevel(path)
        if root is None:
            raise UsageError(f"{path} is not inside a git repository (run `git init` and commit "
                             f"the task first)")
        return root

    def open(self) -> bool:
        """Create the branch (from HEAD) and its worktree if needed. True if the branch is new."""
        created = False
        if not self.branch_exists():
            try:
                self.git.rev_parse("--verify", "HEAD^{commit}")
            except Exception:
                raise UsageError(
                    f"{self.repo_root} has no commits yet: commit the task first") from None
            self.git.branch(self.branch, "HEAD")
            created = True
        self.ignore(".autoresearch/")
        self._drop_other_worktrees()
        if not (self.worktree / ".git").exists():
            if self.worktree.exists():
                shutil.rmtree(self.worktree)
            self.git.worktree("prune")
            self.worktree.parent.mkdir(parents=True, exist_ok=True)
            self.git.worktree("add", "--quiet", str(self.worktree), self.branch)
        self.drop_stale_locks()
        self.restore()
        return created

    def drop_stale_locks(self) -> list[str]:
        """The lock files git leaves in this worktree's own git folder when it is killed
        mid-command (a kill -9 of the engine while a run's code was being checked out), which
        would fail every later command there. The caller holds the tag's lock (one engine per
        tag), and the worktree is the engine's own: no git command of anyone's runs there, so
        any such file is stale. Removed; their names returned."""
        gone = []
        for name in ("index.lock", "HEAD.lock"):
            path = self._admin_dir() / name
            if path.is_file():
                path.unlink(missing_ok=True)
                gone.append(name)
        return gone

    def open_detached(self, commit: str) -> None:
        """This workspace's worktree, detached at `commit`, made without a branch (check-task's
        throwaway checkout of HEAD, where the night's first run would run)."""
        self.worktree.parent.mkdir(parents=True, exist_ok=True)
        self.git.worktree("add", "--quiet", "--detach", str(self.worktree), commit)

    def remove_worktree(self) -> None:
        """Remove this workspace's worktree: its files and git's record of it (nothing is
        left for `git worktree prune`), and the folders above it that this leaves empty."""
        gone = run_git(["worktree", "remove", "--force", "--force", str(self.worktree)],
                       self.repo_root, check=False)
        if gone.returncode != 0 or self.worktree.exists():
            shutil.rmtree(self.worktree, ignore_errors=True)
            run_git(["worktree", "prune"], self.repo_root, check=False)
        for folder in (self.worktree.parent, self.worktree.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                break

    def _drop_other_worktrees(self) -> None:
        """A worktree of our branch somewhere else (the layout of older versions put it
        inside the state folder, in the experiment's reach) is removed: ours is recreated."""
        current = None
        for line in self.git.worktree("list", "--porcelain").splitlines():
            if line.startswith("worktree "):
                current = Path(line[len("worktree "):])
            elif line == f"branch refs/heads/{self.branch}" and current is not None \
                    and current.resolve() != self.worktree.resolve():
                self.git.worktree("remove", "--force", str(current))

    # -- tampering by a run ----------------------------------------------------------
    def _night_active(self, tag: str, since: float) -> bool:
        """Whether another tag's engine runs, or started or stopped since `since` (its lock,
        loop/state/journal.py): then it moved its refs itself. Looked for in this checkout
        and in the repository's other checkouts (a night may run from a linked worktree)."""
        return any(tag_active(root / ".autoresearch" / tag, since) for root in self._checkouts())

    def _checkouts(self) -> list[Path]:
        """This checkout, then the repository's other worktrees but the engines' own."""
        roots = [self.repo_root]
        for line in self.git.worktree("list", "--porcelain").splitlines():
            path = Path(line[len("worktree "):]) if line.startswith("worktree ") else None
            if path is not None and path != self.repo_root and ".autoresearch" not in path.parts:
                roots.append(path)
        return roots

    def snapshot(self) -> RefSnapshot:
        """Before a run: git config files, hooks and every ref but the loop's branch."""
        return self.guard.snapshot(self.git)

    def watch(self) -> RefSnapshot:
        """While several runs are in flight (the loop): one snapshot, kept current with the
        engine's own ref moves (`keep_ref`), checked as each run ends (`check_tamper(...,
        keep_watching=True)`); config and hooks stay guarded the whole time."""
        self.watched = self.guard.snapshot(self.git)
        return self.watched

    def check_tamper(self, before: RefSnapshot, label: str,
                     keep_watching: bool = False) -> list[str]:
        """After a run: put back config, hooks and refs it changed; what was undone."""
        if keep_watching:
            self.guard.restore_files()
            self.guard.restore_refs(self.git, before, label)
            displaced = f"refs/autoresearch/{self.tag}/displaced/"
            for line in self.git("for-each-ref", "--format=%(objectname) %(refname)",
                                 displaced).splitlines():
                sha, ref = line.split(" ", 1)
                before.refs[ref] = sha           # kept aside on purpose: not the next run's
            return self.guard.take_notes()
        try:
            self.guard.restore_files()
            self.guard.end_run()
            self.guard.restore_refs(self.git, before, label)
        finally:
            self.guard.end_run()
        return self.guard.take_notes()

    def committed(self, path: str, ref: str = "HEAD") -> bool:
        """Whether `path` (relative to the repo root) exists in commit `ref`."""
        return self.git.ok("cat-file", "-e", f"{ref}:{path}")

    def branch_exists(self) -> bool:
        return self.git.ok("show-ref", "--verify", "--quiet", f"refs/heads/{self.branch}")

    def ignore(self, pattern: str) -> None:
        """Keep run state out of `git status` without editing any tracked file."""
        exclude(self.common_dir, pattern)

    def ignore_path(self, path: Path) -> None:
        """Exclude one file or folder of ours (e.g. the MLflow store) if it is in the repo."""
        exclude_path(self.common_dir, self.repo_root, path)

    def _author_env(self) -> dict:
        """Commit as the user when git knows who that is, else as `autoresearch`."""
        env = {}
        name = self._config("user.name")
        email = self._config("user.email")
        if not name or not email:
            env = {"GIT_AUTHOR_NAME": name or FALLBACK_AUTHOR[0],
                   "GIT_AUTHOR_EMAIL": email or FALLBACK_AUTHOR[1],
                   "GIT_COMMITTER_NAME": name or FALLBACK_AUTHOR[0],
                   "GIT_COMMITTER_EMAIL": email or FALLBACK_AUTHOR[1]}
        return env

    def _config(self, key: str) -> str:
        return run_git(["config", "--get", key], self.repo_root, check=False).stdout.strip()

    def _admin_dir(self) -> Path:     # where git keeps this worktree's HEAD and index
        return self.common_dir / "worktrees" / self.worktree.name

    def _wt(self, *args) -> str:
        """Run git in the worktree."""
        return self._wtgit(*args)

    # -- reading -----------------------------------------------------------------
    def tip(self) -> str:
        """The branch's commit (its plain ref file read without git: checked after each run)."""
        ref = f"refs/heads/{self.branch}"
        return loose_ref(self.common_dir, ref) or self.git.rev_parse(ref)

    def message(self, commit: str) -> str:
        return self.git.log("-1", "--format=%B", commit)

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.git.ok("merge-base", "--is-ancestor", older, newer)

    def kept_commits(self, since: str) -> list[str]:
        out = self.git.rev_list(f"{since}..refs/heads/{self.branch}")
        return out.split() if out else []

    # -- the loop's moves ---------------------------------------------------------
    def diff(self, old: str, new: str) -> tuple[str, int, int]:
        """The patch between two commits and its (lines added, lines removed)."""
        return self.facts.diff(old, new, lambda: numstat_and_patch(self.git.diff(
            "--no-ext-diff", "--no-textconv", "--numstat", "-p", old, new)))

    def recommit(self, commit: str, message: str) -> str:
        """The same tree and parent as `commit`, with a final message (trailers)."""
        tree = self.facts.trees.get(commit, f"{commit}^{{tree}}")
        new = self._wt("commit-tree", tree, "-p", f"{commit}^", "-m", _message(message)).strip()
        self.facts.recommitted(new, commit)
        return new

    def advance(self, commit: str, expected_tip: str) -> None:
        """Move the branch to `commit` (atomic: only if it still points at expected_tip)."""
        self._wt("update-ref", f"refs/heads/{self.branch}", commit, expected_tip)

    def keep_ref(self, name: str, commit: str) -> str:
        ref = f"refs/autoresearch/{self.tag}/{name}"
        self._wt("update-ref", ref, commit)
        if self.watched is not None:       # the engine's own move: not tampering
            self.watched.refs[ref] = commit
        return ref

    def restore(self) -> None:
        """Make the worktree exactly the branch tip again (edits and run outputs dropped,
        ignored files and FIFOs too, as `materialize`)."""
        self._wt("reset", "--hard", "--quiet", f"refs/heads/{self.branch}")
        try:
            self._sweep()
        except pristine.Leftover:    # checked again before the next run, which it costs
            pass

    def materialize(self, commit: str) -> None:
        """Make the worktree's files exactly `commit`'s tree (the branch does not move):
        what a run left, ignored or special files included, is gone (loop/repo/pristine.py);
        the task's `inputs:` links are made again by the run (loop/run/backends)."""
        self._wt("read-tree", "--reset", "-u", commit)
        self._sweep()

    def _sweep(self) -> None:
        self.guard.restore_files()
        pristine.sweep(self.worktree, self._env)

    def modified_paths(self, folder: str) -> list[str]:
        """Tracked files under `folder` the experiment changed or deleted at run time."""
        out = self._wt("status", "--porcelain", "--untracked-files=no", "--", folder or ".")
        return [line[3:] for line in out.splitlines() if line.strip()]

    def export(self, commit: str, folder: str, dest: Path) -> Path:
        """A pristine copy of `folder` as of `commit` (for grading); returns its path."""
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        self.guard.restore_files()
        data = run_git(["archive", "--format=tar", commit, "--", folder or "."],
                       self.repo_root, binary=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") \
                else tar.extractall(dest)
        return dest / folder if folder not in ("", ".") else dest

    # -- several candidates at once (loop/engine/scheduler.py) ---------------------------
    def stage_on(self, base: str, folder: str, files: dict[str, str], message: str) -> str:
        """An attempt commit of exactly `files` (paths relative to `folder`) on top of `base`,
        the branch not moved and no worktree touched (a private index): a proposal made
        against an older tip is staged against what it saw."""
        paths = {(f"{folder}/{rel}" if folder not in ("", ".") else rel):
                 sourcetext.encode(rel, text) for rel, text in files.items()}
        return staging.commit_on(self.repo_root, self._env, base, paths, _message(message),
                                 self.facts, self._base_index)

    def read_at(self, commit: str, folder: str, paths) -> dict[str, str]:
        """Files of `folder` as of `commit` (paths relative to the folder; absent ones skipped)."""
        out = {}
        for rel in paths:
            path = f"{folder}/{rel}" if folder not in ("", ".") else rel
            got = run_git(["show", f"{commit}:{path}"], self.repo_root, check=False, binary=True)
            if got.returncode == 0:
                out[rel] = sourcetext.decode(rel, got.stdout)
        return out

    def changed_paths(self, old: str, new: str, folder: str) -> list[str]:
        """Files under `folder` that differ between two commits, relative to the folder."""
        out = self.git.diff("--no-ext-diff", "--name-only", "--no-renames", old, new, "--",
                            folder or ".")
        prefix = f"{folder}/" if folder not in ("", ".") else ""
        return [p[len(prefix):] for p in out.splitlines() if p.startswith(prefix)]

    def trees(self, commits: list[str]) -> list[str]:
        """The tree of each commit (two commits with one parent and one tree make the
        same change)."""
        unknown = [c for c in dict.fromkeys(commits) if c not in self.facts.trees]
        if unknown:
            out = self.git.rev_parse(*[f"{c}^{{tree}}" for c in unknown])
            self.facts.trees.update(zip(unknown, out.split()))
        return [self.facts.trees[c] for c in commits]

    def head(self) -> str:
        """The commit this worktree's HEAD points at."""
        return self._detached() or self._wt("rev-parse", "HEAD").strip()

    def _detached(self) -> str | None:     # HEAD's file, where it plainly holds a commit
        return detached_head(self.worktree, self._admin_dir())

    def head_or_none(self) -> str | None:
        """Like `head`, but None when HEAD names a branch that does not exist."""
        self.guard.restore_files()
        if found := self._detached():
            return found
        out = run_git(["rev-parse", "-q", "--verify", "HEAD"], self.worktree, self._env,
                      check=False)
        return out.stdout.strip() or None if out.returncode == 0 else None

    def reattach(self, detached_at: str | None = None) -> str | None:
        """After a run: HEAD back where the engine keeps it, on the loop's branch (the
        loop's worktree) or detached at `detached_at` (a slot's); what it was, or None.
        A run's `git checkout` left in place would make the engine's next reset move the
        branch it switched to, found (and blamed) at the next run's end."""
        self.guard.restore_files()
        if detached_at is None and head_is_branch(self.worktree, self._admin_dir(),
                                                  f"refs/heads/{self.branch}"):
            return None          # read from HEAD's file: it names the branch, plainly
        if detached_at is not None and self._detached() == detached_at:
            return None          # or holds the slot's commit, plainly
        on = run_git(["symbolic-ref", "-q", "HEAD"], self.worktree, self._env, check=False)
        branch = on.stdout.strip() if on.returncode == 0 else ""
        if detached_at is None:
            want = f"refs/heads/{self.branch}"
            if branch == want:
                return None
            self._wt("symbolic-ref", "HEAD", want)
        else:
            if not branch and self.head_or_none() == detached_at:
                return None
            self._wt("update-ref", "--no-deref", "HEAD", detached_at)
        return f"the run switched its worktree to {branch or 'a detached HEAD'}; put back"

    def list_at(self, commit: str, folder: str) -> list[str]:
        """Files under `folder` in `commit`, relative to the folder."""
        out = self.git.ls_tree("-r", "--name-only", commit, "--", folder or ".")
        prefix = f"{folder}/" if folder not in ("", ".") else ""
        return [p[len(prefix):] for p in out.splitlines() if p.startswith(prefix)]

    def add_slot_worktree(self, path: Path) -> Workspace:
        """A detached worktree for one run slot (same branch and refs; the branch is not
        checked out there, so the slot never moves it)."""
        path = Path(path)
        if not (path / ".git").exists():
            if path.exists():
                shutil.rmtree(path)
            self.git.worktree("prune")
            path.parent.mkdir(parents=True, exist_ok=True)
            self.git.worktree("add", "--quiet", "--detach", str(path), self.tip())
        slot = Workspace.__new__(Workspace)
        slot.__dict__.update(self.__dict__)
        slot.worktree = path
        slot._wtgit = Git(path, self._env, before=self.guard.restore_files)   # its own tree
        slot.drop_stale_locks()
        return slot


def _message(text: str) -> str:
    """A commit message git takes as an argument: no NUL, no control character, no lone
    surrogate (loop/untrusted.py), whatever a record kept from an older journal."""
    return clean(text, 20_000)
