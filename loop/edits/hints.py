"""The "did you mean" part of an edit error: the lines of the file closest to a SEARCH
text that was not found, so the model can copy them exactly. Wording only; finds nothing
that is then applied."""
from __future__ import annotations

import difflib
import keyword

from loop.edits.parse import Edit


def not_found(lines: list[str], search: list[str], edit: Edit) -> str:
    what = "the diff's context and '-' lines were" if edit.source == "diff" \
        else "the SEARCH text was"
    message = f"{what} not found in {edit.path}"
    if any(l.strip() in ("...", "…") or l.strip().startswith(("# ...", "// ...")) for l in search):
        message += " (SEARCH must copy every line exactly; do not elide lines with '...')"
    closest = closest_lines(lines, search)
    if closest:
        message += (f". The closest lines in {edit.path} are:\n```\n" + "\n".join(closest)
                    + "\n```\nCopy the lines exactly as they are in the current file "
                      "(whitespace included)")
    else:
        message += "; copy the lines exactly as they are in the current file"
    return message


def closest_lines(lines: list[str], search: list[str], limit: int = 12) -> list[str]:
    """The window of the file most similar to `search` (difflib), at most `limit` lines."""
    want = [l.strip() for l in search if l.strip()]
    if not lines or not want:
        return []
    size = min(len(want), limit)
    stripped = [l.strip() for l in lines]
    starts = range(max(1, len(lines) - size + 1))
    # a statement quoted wrong ('while True:' for 'while step < STEPS:') is nearer the file's
    # own `while` than any line that merely shares characters ('with autocast:')
    word = want[0].split()[0].rstrip(":(") if want[0].split() else ""
    if keyword.iskeyword(word):
        same = [i for i in starts if stripped[i].split()[:1] and
                stripped[i].split()[0].rstrip(":(") == word]
        found = _most_similar(stripped, want[:size], same, floor=0.25)
        if found is not None:
            return lines[found:found + size]
    found = _most_similar(stripped, want[:size], starts, floor=0.4)
    return [] if found is None else lines[found:found + size]


def _most_similar(stripped: list[str], want: list[str], starts, floor: float) -> int | None:
    """The start of the window most like `want` (difflib's ratio, at least `floor`)."""
    size = len(want)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2("\n".join(want))
    best, best_ratio = None, 0.0
    for start in starts:
        matcher.set_seq1("\n".join(stripped[start:start + size]))
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    return best if best is not None and best_ratio >= floor else None
