"""The difference between two texts of a file as SEARCH/REPLACE edits, each with just enough
unchanged lines around it to match one place of the old text, so that the same change can be
made again on a later version of the file with the edit applier (loop/edits/edits.py).

Pure text. A line-based 3-way merge refuses two changes on adjacent lines (its hunks carry
three lines of context); these edits carry none unless they need it to be unambiguous."""
from __future__ import annotations

import difflib

from loop.edits.parse import Edit

MAX_CONTEXT = 8        # lines of context tried either side before giving up on uniqueness


def hunks(before: dict[str, str], after: dict[str, str]) -> list[Edit]:
    """Edits that turn each file of `before` into its text in `after` (a file missing from
    `before` is created: an empty SEARCH). Files in `before` only are left alone."""
    edits: list[Edit] = []
    for path in sorted(after):
        old, new = before.get(path), after[path]
        if old == new:
            continue
        if old is None or not old.strip():
            edits.append(Edit(path, "replace", "", new, source="diff"))
            continue
        edits += _file_hunks(path, old, new)
    return [Edit(e.path, e.kind, e.search, e.replace, i + 1, source=e.source)
            for i, e in enumerate(edits)]


def _file_hunks(path: str, old: str, new: str) -> list[Edit]:
    a, b = _lines(old), _lines(new)
    if a == b:             # only the line ending at the end differs: the file as a whole
        return [Edit(path, "replace", old, new, source="diff")]
    out: list[Edit] = []
    done = 0               # old lines before this are changed by an earlier edit
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for context in range(MAX_CONTEXT + 1):
            lo = max(done, i1 - context)
            hi = min(len(a), i2 + context)
            # an insertion needs one line to anchor it; more only to make it unique
            if i1 == i2 and lo == i1 and hi == i2:
                continue
            search = a[lo:hi]
            if _count(a, search) == 1:
                replace = a[lo:i1] + b[j1:j2] + a[i2:hi]
                out.append(Edit(path, "replace", "\n".join(search), "\n".join(replace),
                                source="diff"))
                done = i2
                break
        else:      # no unique anchor nearby: the whole file, as a last resort
            return [Edit(path, "replace", old, new, source="diff")]
    return out


def _lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _count(lines: list[str], window: list[str]) -> int:
    n = len(window)
    return sum(1 for i in range(len(lines) - n + 1) if lines[i:i + n] == window)
