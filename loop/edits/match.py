"""Where a SEARCH text fits a file: exact first, then tolerant, never ambiguous.

Pure lines in, a place out: trailing whitespace, blank edge lines, a uniform indentation
shift, a first line missing its leading keyword (`lr_at(progress):` for `def lr_at(progress):`)
and trailing comments left out are forgiven; a text that fits several places (and no diff
line number picks one) is a BlockFailure. Applying the edit is loop/edits/edits.py's job."""
from __future__ import annotations

import re


class BlockFailure(Exception):
    """One block does not apply; args[0] says why, worded to be sent back to the model."""


def split_lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []


def join_lines(lines: list[str], ends_with_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if ends_with_newline and lines else "")


def _exact(a: str, b: str) -> bool:
    return a == b


def _trailing_ws(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


LEVELS = (("exact", _exact), ("trailing whitespace", _trailing_ws))
TRAILING_COMMENT = re.compile(r"^(?P<code>.*?\S)(?P<tail>\s+#.*)$")


def locate(lines, search, replace, hint):
    """(start, end, new lines) for the one place `search` fits, or None if none.
    Raises BlockFailure when it fits several places and the hint does not pick one."""
    variants = [(search, replace)]
    trimmed = _trim_blank_edges(search, replace)
    if trimmed != (search, replace) and trimmed[0]:
        variants.append(trimmed)
    for _, same in LEVELS:
        for s, r in variants:
            starts = [i for i in range(len(lines) - len(s) + 1)
                      if all(same(lines[i + j], s[j]) for j in range(len(s)))]
            if starts:
                start = _unique(starts, hint, len(s))
                return start, start + len(s), r
    for s, r in variants:  # the same lines at another indentation, shifted as a whole
        found = _shifted(lines, s, r, hint)
        if found is not None:
            return found
    for s, r in variants:  # the first line lost its leading keyword ('def ', 'return ')
        hits = []
        for i in range(len(lines) - len(s) + 1):
            keyword = _missing_keyword(lines[i], s[0])
            if keyword is not None:
                fixed = _with_keyword(s, keyword)
                if _indent_shift(lines[i:i + len(s)], fixed) is not None:
                    hits.append((i, keyword))
        if hits:
            start = _unique([i for i, _ in hits], hint, len(s))
            keyword = dict(hits)[start]
            fixed_s = _with_keyword(s, keyword)
            fixed_r = _with_keyword(r, keyword) if _first_word(r) == _first_word(s) else r
            return _shifted(lines[start:start + len(s)], fixed_s, fixed_r, None, start)
    for s, r in variants:  # the lines copied without their trailing comments
        places = [i for i in range(len(lines) - len(s) + 1)
                  if all(_comment_dropped(lines[i + j], s[j]) is not None
                         for j in range(len(s)))]
        if places:
            start = _unique(places, hint, len(s))
            tails = [_comment_dropped(lines[start + j], l) or "" for j, l in enumerate(s)]
            if len(r) == len(s):            # line for line: each keeps its comment
                r = [l.rstrip() + t if t and l.strip() else l for l, t in zip(r, tails)]
            return start, start + len(s), r
    return None


def _comment_dropped(have: str, want: str) -> str | None:
    """The trailing comment `have` has and `want` lacks (with the spaces before it), when
    their code is the same ('' when the lines are the same); None otherwise. A model that
    quotes `SEQ_LEN = 128` for `SEQ_LEN = 128   # context length` means that line."""
    if have.rstrip() == want.rstrip():
        return ""
    m = TRAILING_COMMENT.match(have)
    if m and "#" not in want and m.group("code") == want.rstrip():
        return m.group("tail")
    return None


def _shifted(lines, s, r, hint, offset: int = 0):
    """(start, end, reindented replace) where `s` fits uniformly shifted, or None."""
    hits = [(i, m) for i in range(len(lines) - len(s) + 1)
            if (m := _indent_shift(lines[i:i + len(s)], s)) is not None]
    if not hits:
        return None
    start = _unique([i for i, _ in hits], hint, len(s))
    reindent = dict(hits)[start]
    return offset + start, offset + start + len(s), [reindent(l) for l in r]


def _missing_keyword(have: str, want: str) -> str | None:
    """The leading word(s) `have` has and `want` lacks ('def ' for 'lr_at(progress):'), when
    the rest is the same; None otherwise. Only whole words before a space count, so
    'max = 1' never matches 'x = 1', nor 'self.lr' 'lr'."""
    h, w = have.strip(), want.strip()
    if not w or h == w or not h.endswith(w):
        return None
    keyword = h[:len(h) - len(w)]
    words = keyword.split()
    return keyword if keyword.endswith(" ") and words and all(
        k.isidentifier() for k in words) else None


def _with_keyword(lines: list[str], keyword: str) -> list[str]:
    if not lines:
        return lines
    first = lines[0]
    return [_indent(first) + keyword + first.lstrip()] + lines[1:]


def _first_word(lines: list[str]) -> str:
    first = next((l.strip() for l in lines if l.strip()), "")
    return first.split("(")[0].split()[0] if first.split() else ""


def _unique(starts: list[int], hint: int | None, size: int) -> int:
    if len(starts) == 1:
        return starts[0]
    if hint is not None and hint in starts:   # a diff's line number picks one of them
        return hint
    where = ", ".join(str(s + 1) for s in starts[:6])
    raise BlockFailure(f"the SEARCH text matches {len(starts)} places (lines {where}); add "
                   f"unchanged lines around it so it matches exactly one place")


def _trim_blank_edges(search, replace):
    s, r = list(search), list(replace)
    while s and not s[0].strip():
        s.pop(0)
        if r and not r[0].strip():
            r.pop(0)
    while s and not s[-1].strip():
        s.pop()
        if r and not r[-1].strip():
            r.pop()
    return s, r


def _indent_shift(window: list[str], search: list[str]):
    """If `window` is `search` uniformly more (or less) indented, a function that applies
    the same shift to a REPLACE line; else None."""
    add: str | None = None     # set together with remove
    remove: str | None = None
    for have, want in zip(window, search):
        if not have.strip() and not want.strip():
            continue
        if have.strip() != want.strip():
            return None
        h, w = _indent(have), _indent(want)
        if add is None or remove is None:
            if h.endswith(w):
                add, remove = h[:len(h) - len(w)], ""
            elif w.endswith(h):
                add, remove = "", w[:len(w) - len(h)]
            else:
                return None
        if h != add + w[len(remove):] or not w.startswith(remove):
            return None
    if add is None or remove is None:
        return None

    def reindent(line: str) -> str:
        if not line.strip():
            return line
        return add + (line[len(remove):] if line.startswith(remove) else line.lstrip())
    return reindent


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def fits(text: str, search: str, replace: str) -> bool:
    """Whether `search` fits exactly one place of `text` (a block that names no file is
    that file's when it fits there and nowhere else)."""
    try:
        return locate(split_lines(text.replace("\r\n", "\n")), split_lines(search),
                      split_lines(replace), None) is not None
    except BlockFailure:
        return False
