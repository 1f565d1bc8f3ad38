"""An attempt commit made from file contents without touching any worktree: git's plumbing
on a private index (read-tree, hash-object, update-index, write-tree, commit-tree), each call
hardened (loop/repo/gitsafe.py). The staging happens on the loop's serial path, between one
run and the next, so each step is one git process whatever the number of files, and the
index of the last base is kept in memory (never a file a run could reach) instead of being
read from its tree again. Knows nothing about runs or the loop."""
from __future__ import annotations

import tempfile
from pathlib import Path

from loop.repo.commits import CommitFacts
from loop.repo.gitsafe import run_git


class BaseIndex:
    """The index of one base commit, as git wrote it: a new attempt on the same base starts
    from these bytes (most attempts are staged on the same best)."""

    def __init__(self):
        self.base: str | None = None
        self.data = b""


def commit_on(repo_root: Path, env: dict, base: str, files: dict[str, bytes], message: str,
              facts: CommitFacts, kept: BaseIndex) -> str:
    """A commit of `base`'s tree with `files` (path from the repository root -> content)
    written over it, parent `base`; its tree goes into `facts`."""
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        env = {**env, "GIT_INDEX_FILE": str(index)}

        def git(*args: str, stdin: bytes | None = None) -> str:
            out = run_git(list(args), repo_root, env, binary=True, stdin=stdin).stdout
            return out.decode("utf-8", "replace").strip()
        if kept.base == base:
            index.write_bytes(kept.data)
        else:
            git("read-tree", base)
            kept.base, kept.data = base, index.read_bytes()
        blobs = _blobs(git, Path(tmp), list(files.values()))
        # --cacheinfo, never --index-info: that one skips a path git refuses and exits 0
        git("update-index", "--add", *(arg for blob, path in zip(blobs, files)
                                        for arg in ("--cacheinfo", f"100644,{blob},{path}")))
        tree = git("write-tree")
        commit = git("commit-tree", tree, "-p", base, "-m", message)
    facts.trees[commit] = tree
    return commit


def _blobs(git, tmp: Path, contents: list[bytes]) -> list[str]:
    """Each content written as a blob (as is: no filter or end-of-line conversion, which a
    path's attributes could ask for), in one git call; their ids in order."""
    if len(contents) == 1:
        return [git("hash-object", "-w", "--stdin", stdin=contents[0])]
    names = []
    for i, data in enumerate(contents):
        (tmp / f"blob-{i}").write_bytes(data)
        names.append(str(tmp / f"blob-{i}"))
    out = git("hash-object", "-w", "--no-filters", "--stdin-paths",
              stdin="".join(f"{name}\n" for name in names).encode())
    return out.split()
