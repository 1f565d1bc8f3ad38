"""Git as the engine runs it: no program the repository configures, and a watch on what an
experiment could change in the repository outside the loop's branch.

An experiment runs as the same user, next to the repository: it can write `.git/config`
(core.fsmonitor, a filter, a pager), add hooks, move refs. The engine therefore
- runs git with options that switch off every hook-like program (fsmonitor, hooks, pager,
  credential helpers, external diff, textconv, signing) and a scrubbed environment (no API
  keys for whatever git might still start);
- snapshots the repository's config files and hooks (and the user's global git config)
  and every ref when the loop starts (the engine's own ref moves keep the snapshot
  current); while runs are on, every git call of the engine (the grader's export) first
  puts those files back (so a filter or fsmonitor added by the experiment never runs, not
  even once); as each run ends, files and refs are put back, the moved values kept under
  refs/autoresearch/<tag>/displaced/ so that nothing is lost. So while the loop runs, a
  change you make yourself to the repo's refs or git config is put back too (and blamed on
  the next run to end): make such changes while it is stopped.

Several nights may share the repository, one engine per tag: another tag's refs
(refs/autoresearch/<other>/..., its branch autoresearch/<other>) are that engine's to move
while it runs, so they are left alone whenever it is running or started or stopped since the
last look (`active`); a finished night's refs are guarded like the user's."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

NO_SPACE = ("No space left on device", "Out of diskspace", "Disk quota exceeded")
# A failed write git reports without the OS's reason ("error: unable to write file x"):
# a full disk when the disk is (nearly) full
WRITE_FAILED = re.compile(r"unable to (?:write|create)|could not write|short write|"
                          r"failed to write|Could not reset index", re.I)
LOW_SPACE_BYTES = 64 * 2**20

# Switch off everything git could run on our behalf from configuration.
HARDENING = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}",
             "-c", "core.pager=cat", "-c", "credential.helper=", "-c", "diff.external=",
             "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
             "-c", "protocol.allow=never", "-c", "core.sshCommand=false",
             "-c", "core.askPass=", "-c", "core.untrackedCache=false")
_ENV_PASS = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
             "XDG_CONFIG_HOME"}


class GitError(RuntimeError):
    """A git command failed; the message is git's own stderr, one line where possible."""

    def first_line(self) -> str:
        """The command and git's first line of complaint (a lock error goes on for six)."""
        return next((line.strip() for line in str(self).splitlines() if line.strip()),
                    "git failed")


class DiskFull(GitError):
    """The disk (or quota) is full: an infrastructure fault, not the experiment's."""


def git_env(extra: dict | None = None) -> dict:
    """The environment git runs with: no secrets, no inherited GIT_* redirections."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_PASS or k.startswith("LC_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat",
                "GIT_OPTIONAL_LOCKS": "0"})
    env.update(extra or {})
    return env


def run_git(args, cwd: Path, env_extra: dict | None = None, check: bool = True,
            binary: bool = False, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """One hardened git call; `stdin` (bytes: give binary=True) is fed to it."""
    out = subprocess.run(["git", *HARDENING, *args], cwd=cwd, env=git_env(env_extra),
                         capture_output=True, text=not binary, input=stdin,
                         # a diff of a file in another encoding (latin-1) is for reading
                         encoding=None if binary else "utf-8",
                         errors=None if binary else "replace")
    if check and out.returncode != 0:
        err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode("utf-8", "replace")
        err = err.strip()
        full = any(sign in err for sign in NO_SPACE) or \
            (WRITE_FAILED.search(err) is not None and _low_space(cwd, args))
        cls = DiskFull if full else GitError
        raise cls(f"git {' '.join(str(a) for a in args[:3])} failed: {err}")
    return out


def _low_space(cwd: Path, args) -> bool:
    """Whether the folder git ran in, or a path it was given, is on a (nearly) full disk."""
    for path in [cwd, *(Path(a) for a in map(str, args) if a.startswith("/"))]:
        folder = Path(path)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            if shutil.disk_usage(folder).free < LOW_SPACE_BYTES:
                return True
        except OSError:
            continue
    return False


class Git:
    """`git.rev_parse("HEAD")` runs `git rev-parse HEAD` (hardened) and returns its output,
    stripped. `before` runs ahead of every call (the config guard)."""

    def __init__(self, cwd: Path, env: dict | None = None, before=None):
        self.cwd, self.env, self.before = Path(cwd), env or {}, before

    def __call__(self, *args: str) -> str:
        if self.before:
            self.before()
        return run_git(args, self.cwd, self.env).stdout.rstrip("\n")

    def ok(self, *args: str) -> bool:
        if self.before:
            self.before()
        return run_git(args, self.cwd, self.env, check=False).returncode == 0

    # The subcommands the engine runs, typed: a mistyped one is the type checker's error, not
    # a git call that fails at night (a catch-all __getattr__ accepted any name).
    def branch(self, *args: str) -> str:
        return self("branch", *args)

    def diff(self, *args: str) -> str:
        return self("diff", *args)

    def log(self, *args: str) -> str:
        return self("log", *args)

    def ls_tree(self, *args: str) -> str:
        return self("ls-tree", *args)

    def rev_list(self, *args: str) -> str:
        return self("rev-list", *args)

    def rev_parse(self, *args: str) -> str:
        return self("rev-parse", *args)

    def status(self, *args: str) -> str:
        return self("status", *args)

    def worktree(self, *args: str) -> str:
        return self("worktree", *args)


@dataclass
class RefSnapshot:
    refs: dict[str, str] = field(default_factory=dict)
    since: float = 0.0          # when it was read (time.time()): see RepoGuard.restore_refs


AUTORESEARCH_REFS = ("refs/autoresearch/", "refs/heads/autoresearch/")


def tag_of(ref: str) -> str | None:
    """The tag whose night a ref belongs to (its attempts and kept refs, its branch), or
    None for the user's own refs."""
    for prefix in AUTORESEARCH_REFS:
        if ref.startswith(prefix):
            return ref[len(prefix):].split("/", 1)[0]
    return None


class RepoGuard:
    """The repository's config files and hooks as trusted at start, and its refs per run."""

    def __init__(self, common_dir: Path, worktree_gitdir: Path | None, protected_branch: str,
                 tag: str, active: Callable[[str, float], bool] | None = None):
        """`active(tag, since)`: whether another tag's engine runs, or started or stopped
        since `since`: its refs then moved by its own hand (None: no other engine)."""
        self.common = Path(common_dir)
        self.active = active or (lambda tag, since: False)
        self.worktree_gitdir = worktree_gitdir
        self.branch_ref = f"refs/heads/{protected_branch}"
        self.tag = tag
        self.notes: list[str] = []           # tampering found, not yet reported
        self._trusted: dict | None = None    # set while a run is on (see `snapshot`)
        self._lock = threading.RLock()       # slots' threads run git while the main one checks

    # -- config files and hooks ------------------------------------------------------
    def _watched(self) -> list[Path]:
        paths = [self.common / "config", self.common / "info" / "attributes"]
        if self.worktree_gitdir:
            paths.append(self.worktree_gitdir / "config.worktree")
        hooks = self.common / "hooks"
        if hooks.is_dir():
            paths += [p for p in hooks.iterdir() if p.is_file()]
        home = Path(os.environ.get("HOME", "~")).expanduser()
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return paths + [home / ".gitconfig", xdg / "git" / "config"]

    def _read_files(self) -> dict[Path, tuple[bytes, int] | None]:
        out: dict[Path, tuple[bytes, int] | None] = {}
        for path in self._watched():
            try:
                out[path] = (path.read_bytes(), path.stat().st_mode & 0o7777)
            except OSError:
                out[path] = None
        return out

    def restore_files(self) -> None:
        """While a run is on: put back config files and hooks as they were before it (cheap
        enough to run before each git call)."""
        with self._lock:
            self._restore_files()

    def _restore_files(self) -> None:
        trusted = self._trusted
        if trusted is None:
            return
        now = self._read_files()
        for path in set(now) | set(trusted):
            want, have = trusted.get(path), now.get(path)
            if want == have:
                continue
            if want is None:
                path.unlink(missing_ok=True)
                self.notes.append(f"removed {self._name(path)}, added behind the engine's back")
            else:
                tmp = path.with_name(f".{path.name}.autoresearch-restore")
                tmp.write_bytes(want[0])
                os.chmod(tmp, want[1])
                os.replace(tmp, path)
                what = "deleted" if have is None else "changed"
                self.notes.append(f"restored {self._name(path)} ({what} behind the engine's back)")

    def _name(self, path: Path) -> str:
        try:
            return f".git/{path.relative_to(self.common).as_posix()}"
        except ValueError:
            return str(path).replace(str(Path.home()), "~")

    # -- refs --------------------------------------------------------------------------
    def snapshot(self, git: Git) -> RefSnapshot:
        """Before a run: the files and refs to put back after it."""
        with self._lock:
            self._trusted = None
            refs = self._refs(git)
            self._trusted = self._read_files()
            return refs

    def end_run(self) -> None:
        with self._lock:
            self._trusted = None

    def _refs(self, git: Git) -> RefSnapshot:
        since = time.time()
        out = git("for-each-ref", "--format=%(objectname) %(refname)")
        refs = dict(line.split(" ", 1)[::-1] for line in out.splitlines() if line)
        refs.pop(self.branch_ref, None)          # the loop's branch has its own check
        return RefSnapshot(refs, since)

    def restore_refs(self, git: Git, before: RefSnapshot, label: str) -> None:
        """Put back what changed since `before`: the user's refs, this tag's, and those of
        a tag no engine has run since `before` was read; another night's moves of its own
        refs are taken into `before` instead (that engine guards them)."""
        after = self._refs(git)
        displaced = f"refs/autoresearch/{self.tag}/displaced/{label}"
        others: dict[str, bool] = {}             # another tag -> its engine was active
        for ref in sorted(set(before.refs) | set(after.refs)):
            old, new = before.refs.get(ref), after.refs.get(ref)
            if old == new or ref.startswith(displaced):
                continue
            owner = tag_of(ref)
            if owner is not None and owner != self.tag:
                if owner not in others:
                    others[owner] = self.active(owner, before.since)
                if others[owner]:
                    if new is None:
                        before.refs.pop(ref, None)
                    else:
                        before.refs[ref] = new
                    continue
            if new is not None:                  # keep what the run put there, then undo
                git("update-ref", f"{displaced}/{ref.removeprefix('refs/')}", new)
            self._put_back(git, ref, old, new)
        before.since = after.since

    def _put_back(self, git: Git, ref: str, old: str | None, new: str | None) -> None:
        """`ref` back at `old` (None: deleted). Another engine guarding the same ref (the
        user's main) may have put it back first: that is not a failure."""
        if old is not None:
            git("update-ref", ref, old)
            self.notes.append(f"{ref} was {'moved' if new else 'deleted'}; put back "
                              f"at {old[:7]}")
            return
        assert new is not None                   # old == new was skipped
        if not git.ok("update-ref", "-d", ref, new) and \
                git.ok("show-ref", "--verify", "--quiet", ref):
            git("update-ref", "-d", ref)         # moved again meanwhile: still not ours
        self.notes.append(f"deleted {ref}, created by the run")

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes
