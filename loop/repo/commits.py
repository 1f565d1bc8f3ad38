"""What never changes about a commit, remembered so that git is asked once: its tree, and
the patch between two commits. A commit is immutable, and a recommit (the same tree and
parent, a final message) makes the same change as the commit it rewrites, so a diff asked
of either is the same diff. Pure bookkeeping: runs no git itself, knows nothing about runs."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

Diff = tuple[str, int, int]     # the patch, lines added, lines removed


class CommitFacts:
    """Trees by commit, recommits by the commit they rewrote, the last few diffs."""

    def __init__(self, diffs_kept: int = 64):
        self.trees: dict[str, str] = {}
        self._same: dict[str, str] = {}     # a recommit -> the commit first staged
        self._diffs: OrderedDict[tuple[str, str], Diff] = OrderedDict()
        self._kept = diffs_kept

    def recommitted(self, new: str, old: str) -> None:
        """`new` has `old`'s tree and parent."""
        first = self._same.get(old, old)
        if new != first:
            self._same[new] = first
        if old in self.trees:
            self.trees[new] = self.trees[old]

    def diff(self, old: str, new: str, compute: Callable[[], Diff]) -> Diff:
        """The diff between two commits: remembered, else `compute()`d and remembered."""
        key = (self._same.get(old, old), self._same.get(new, new))
        if key in self._diffs:
            self._diffs.move_to_end(key)
            return self._diffs[key]
        found = self._diffs[key] = compute()
        while len(self._diffs) > self._kept:
            self._diffs.popitem(last=False)
        return found


def numstat_and_patch(out: str) -> Diff:
    """`git diff --numstat -p`'s output (one call: the numstat lines, an empty line, the
    patch) as (the patch, lines added, lines removed); binary files count no lines."""
    stats, _, patch = out.partition("\n\n")
    added = removed = 0
    for line in stats.splitlines():
        a, r, _ = line.split("\t", 2)
        if a != "-":
            added += int(a)
            removed += int(r)
    return (patch + "\n" if patch else ""), added, removed
