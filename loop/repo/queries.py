"""The questions the rest of the package asks git outside a workspace, each a typed function
over the hardened wrapper (loop/repo/gitsafe.py): no module outside loop/repo/ writes a git
argument list, so a mistyped subcommand or flag is found here, in one place, and tested."""
from __future__ import annotations

from pathlib import Path

from loop.repo.gitsafe import run_git


def head_commit(repo: Path) -> str | None:
    """The commit HEAD names, or None (no commit yet, or not a repository)."""
    got = run_git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], repo, check=False)
    return got.stdout.strip() or None if got.returncode == 0 else None


def tracked(repo: Path, path: str) -> list[str]:
    """The tracked files at or under `path` (relative to `repo`, or absolute inside it)."""
    got = run_git(["ls-files", "-z", "--", path], repo, check=False)
    return [p for p in got.stdout.split("\0") if p] if got.returncode == 0 else []


def ignored_untracked(folder: Path) -> list[str]:
    """What under `folder` is untracked and ignored (a folder once, with its `/`): prepared
    data, caches, outputs."""
    got = run_git(["ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                   "--directory", "--", "."], folder, check=False)
    return [p for p in got.stdout.split("\0") if p] if got.returncode == 0 else []


def is_ignored(repo: Path, rel: str) -> bool:
    return run_git(["check-ignore", "-q", "--", rel], repo, check=False).returncode == 0


def archive(repo: Path, commit: str, folder: str) -> bytes:
    """`folder` of `commit` as a tar stream (the whole tree for "" or ".")."""
    return run_git(["archive", "--format=tar", commit, "--", folder or "."], repo,
                   binary=True).stdout


def origin_url(repo: Path) -> str:
    """The `origin` remote's URL, "" when there is none."""
    got = run_git(["config", "--get", "remote.origin.url"], repo, check=False)
    return got.stdout.strip() if got.returncode == 0 else ""
