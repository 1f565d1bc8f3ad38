"""Parse an LLM reply into edits: SEARCH/REPLACE blocks, unified diffs, whole files.

Pure text in, `Edit`s out. Models wrap edits in prose and markdown fences, forget the
file name, put it in the fence's info string, or drift from the format we asked for;
all three formats are accepted so a good idea is not lost to formatting. What cannot be
parsed safely (an unterminated block, a deleted file) becomes a `problem`, never a guess.
`loop.edits.edits` is the public face of this module; the description is
`loop.edits.describe`'s."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from loop.edits.describe import description
from loop.edits.names import (FENCE_RE, label_above, names_above, path_in_info, path_in_prose,
                             path_label)
from loop.edits.thinking import split_thinking

SEARCH_RE = re.compile(r"^\s*<{5,9}\s*SEARCH\b.*$")
DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
REPLACE_RE = re.compile(r"^\s*>{5,9}\s*REPLACE\b.*$")
HUNK_RE = re.compile(r"^@@+\s*-(\d+)(?:,\d+)?\s+\+(\d+)(?:,\d+)?\s*@@+.*$|^@@+.*$")


@dataclass(frozen=True)
class Edit:
    """One change to one file, in the order it appeared in the reply.

    kind "replace": replace `search` by `replace` (a SEARCH/REPLACE block or a diff hunk).
    kind "whole": the file's new complete text is `replace`."""
    path: str | None            # None: the block named no file; apply finds it by content
    kind: str                   # "replace" | "whole"
    search: str = ""
    replace: str = ""
    index: int = 1              # 1-based, across the reply, for error messages
    line_hint: int | None = None  # diff hunks: the old start line from "@@ -l,s"
    source: str = "search/replace"  # "search/replace" | "diff" | "whole file"
    # a fence under prose: the words above it that may name the file (path is None);
    # loop.edits.edits keeps it only if exactly one names an existing file and it holds all of it
    named: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        first = next((l.strip() for l in (self.search or self.replace).splitlines()
                      if l.strip()), "")
        where = self.path or "(no file named)"
        return f"block {self.index} ({self.source}, {where}, first line: {first[:60]!r})"


@dataclass
class ParsedReply:
    description: str | None
    edits: list[Edit] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # parts that could not be parsed


def parse_reply(text: str) -> ParsedReply:
    text = split_thinking(text)[1]
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    used = [False] * len(lines)      # lines that belong to an edit (not prose)
    found: list[tuple[int, Edit]] = []  # (line number, edit) to restore reply order
    problems: list[str] = []
    _parse_search_replace(lines, used, found, problems)
    fences = _find_fences(lines, used)
    _parse_diffs(lines, used, fences, found, problems)
    _parse_whole_files(lines, used, fences, found, problems)
    found.sort(key=lambda item: item[0])
    edits = [_renumber(e, i + 1) for i, (_, e) in enumerate(found)]
    return ParsedReply(description(_prose(lines, used, fences)), edits, problems)


def _renumber(edit: Edit, index: int) -> Edit:
    from dataclasses import replace
    return replace(edit, index=index)


# -- format 1: SEARCH/REPLACE blocks -------------------------------------------------------

def _parse_search_replace(lines, used, found, problems) -> None:
    i, previous_path = 0, None
    while i < len(lines):
        if not SEARCH_RE.match(lines[i]):
            i += 1
            continue
        # a block with no name above it, after a named one, is that file's (as aider reads
        # it: models name the file once, then write "Then:" and the next block)
        start, path = i, _path_before(lines, i, previous_path) or previous_path
        divider = _next_match(lines, i + 1, DIVIDER_RE, stop=SEARCH_RE)
        block = _block_end(lines, start, divider)
        if block is None or isinstance(block, str):
            problems.append(block or f"the SEARCH/REPLACE block starting at reply line "
                            f"{start + 1} is not terminated (missing '=======' or "
                            f"'>>>>>>> REPLACE'; was the reply cut off?)")
            stop = _next_match(lines, start + 1, SEARCH_RE, stop=re.compile(r"(?!)"))
            for k in range(start, stop or len(lines)):  # the cut-off rest is not prose
                used[k] = True
            i = stop or len(lines)
            continue
        replace_end, end = block
        assert divider is not None    # a block has an end only past its divider
        search = "\n".join(lines[start + 1:divider])
        replace = "\n".join(lines[divider + 1:replace_end])
        found.append((start, Edit(path, "replace", search, replace)))
        for k in range(start, end + 1):
            used[k] = True
        previous_path, i = path, end + 1


def _block_end(lines, start, divider) -> tuple[int, int] | str | None:
    """(end of the REPLACE text, last line of the block), a problem, or None (cut off).

    REPLACE ends at '>>>>>>> REPLACE' or, as aider reads it, at a second '=======':
    models write SEARCH / ======= / new / ======= / >>>>>>> REPLACE, or close with the
    second divider alone, prose after. The divider is never part of the new text. Refused
    as ambiguous: text between a second divider and the end marker, and a second divider
    right under a line of its own length (a markdown/RST heading's underline?)."""
    if divider is None:
        return None
    for k in range(divider + 1, len(lines)):
        if SEARCH_RE.match(lines[k]):
            return None
        if REPLACE_RE.match(lines[k]):
            return k, k
        if DIVIDER_RE.match(lines[k]):
            if k - 1 > divider and len(lines[k - 1].strip()) == len(lines[k].strip()):
                return (f"the SEARCH/REPLACE block at reply line {start + 1} ends its "
                        f"REPLACE text with a '=======' line that may underline a heading: "
                        f"write that part of the file in a separate block")
            marker = _next_match(lines, k + 1, REPLACE_RE, stop=SEARCH_RE)
            if marker is None:
                return k, k                      # '=======' closed the block
            if any(l.strip() for l in lines[k + 1:marker]):
                return (f"the SEARCH/REPLACE block at reply line {start + 1} has a second "
                        f"'=======' with more text before '>>>>>>> REPLACE': write one "
                        f"'=======' between the SEARCH and the REPLACE text")
            return k, marker
    return None


def _next_match(lines, i, pattern, stop) -> int | None:
    for k in range(i, len(lines)):
        if pattern.match(lines[k]):
            return k
        if stop.match(lines[k]):
            return None
    return None


def _path_before(lines, i, previous_path) -> str | None:
    """The file a SEARCH block edits: the path line (or fence info string) just above it;
    consecutive blocks with nothing in between edit the same file (aider's habit). None when
    nothing above names one (the caller then takes the last named file, as aider does)."""
    for k in range(i - 1, max(-1, i - 7), -1):
        line = lines[k].strip()
        if not line:
            continue
        fence = FENCE_RE.match(line)
        if fence:
            info_path = path_in_info(fence.group(2))
            if info_path:
                return info_path
            continue
        if REPLACE_RE.match(line):
            return previous_path
        return path_label(line) or path_in_prose(line)
    return None


# -- fences --------------------------------------------------------------------------------

@dataclass
class Fence:
    open: int            # line of the opening ``` (body is open+1 .. end-1)
    close: int | None    # None: never closed (a truncated reply, or a restarted listing)
    info: str
    end: int = 0         # where the body stops: the close, a restart, or the reply's end
    restarted: bool = False  # the model opened the listing again before closing it


def _find_fences(lines, used) -> list[Fence]:
    """Pair fences. A listing is *restarted* when, before its closing fence, a new fence
    with an info string opens (```python), or when the 'closing' fence comes right after
    the listed file's name alone on a line, or is followed by the listing's first line:
    the model stopped, wrote prose (and the file name), and began again; that fence
    opens the new listing instead of closing the old."""
    fences, k = [], 0
    while k < len(lines):
        m = FENCE_RE.match(lines[k]) if not used[k] else None
        if not m:
            k += 1
            continue
        marker, close, restart = m.group(1), None, None
        for j in range(k + 1, len(lines)):
            c = FENCE_RE.match(lines[j]) if not used[j] else None
            if not (c and c.group(1)[0] == marker[0] and len(c.group(1)) >= len(marker)):
                continue
            if c.group(2).strip():
                restart = j
            elif _restarts_listing(lines, k, j, m.group(2)):
                restart = j
            else:
                close = j
            break
        if restart is not None:
            fences.append(Fence(k, None, m.group(2).strip(), restart, restarted=True))
            k = restart
            continue
        end = close if close is not None else len(lines)
        fences.append(Fence(k, close, m.group(2).strip(), end))
        k = end + 1
    return fences


def _restarts_listing(lines, fence_open, close, info) -> bool:
    """A would-be closing fence that really opens the listing again: the line before it
    is the listed file's own name, or the code after it starts as the listing did."""
    path = path_in_info(info) or label_above(lines, fence_open)
    last = next((lines[j] for j in range(close - 1, fence_open, -1) if lines[j].strip()), "")
    name = path_label(last)
    if path and name and name.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1]:
        return True
    first = next((l for l in lines[fence_open + 1:close] if l.strip()), "")
    after = next((l for l in lines[close + 1:] if l.strip()), "")
    return len(first.strip()) >= 4 and after == first and not FENCE_RE.match(first)


def _body(lines, fence: Fence) -> list[str]:
    return lines[fence.open + 1:fence.end]


# -- format 2: unified diffs -------------------------------------------------------------

def _parse_diffs(lines, used, fences, found, problems) -> None:
    """Unified diffs anywhere in the reply; a bare run of @@ hunks inside a ```diff fence
    takes its file from the fence's label."""
    k = 0
    while k < len(lines) - 1:
        if used[k] or not (lines[k].startswith("--- ") and lines[k + 1].startswith("+++ ")):
            k += 1
            continue
        old, new = _diff_path(lines[k][4:]), _diff_path(lines[k + 1][4:])
        used[k] = used[k + 1] = True
        first_hunk = k + 2
        k = _read_hunks(lines, used, first_hunk, new or old, old is None, found, problems)
        if k == first_hunk:
            problems.append(f"the diff for {new or old} has no '@@' hunk headers: send "
                            f"SEARCH/REPLACE blocks instead")
        if new is None:
            problems.append(f"the diff deletes {old}: deleting files is not supported; "
                            f"edit the file instead")
    for fence in fences:
        body_start = fence.open + 1
        if body_start < len(lines) and not used[body_start] \
                and HUNK_RE.match(lines[body_start]):
            path = path_in_info(fence.info) or label_above(lines, fence.open)
            _read_hunks(lines, used, body_start, path, False, found, problems)


def _diff_path(header: str) -> str | None:
    path = header.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    if path[:2] in ("a/", "b/"):
        path = path[2:]
    return path


def _read_hunks(lines, used, k, path, new_file, found, problems) -> int:
    while k < len(lines) and (m := HUNK_RE.match(lines[k])):
        hint = int(m.group(1)) if m.group(1) else None
        start, body, k = k, [], k + 1
        while k < len(lines) and _is_hunk_line(lines, k):
            body.append(lines[k])
            k += 1
        old = [l[1:] for l in body if l[:1] in (" ", "-", "")]
        new = [l[1:] for l in body if l[:1] in (" ", "+", "")]
        for j in range(start, k):
            used[j] = True
        if path is None:
            problems.append(f"the diff hunk at reply line {start + 1} names no file")
            continue
        found.append((start, Edit(path, "replace", "\n".join(old), "\n".join(new),
                                  line_hint=None if new_file else hint, source="diff")))
    return k


def _is_hunk_line(lines, k) -> bool:
    line = lines[k]
    if line.startswith((" ", "+", "-", "\\")):  # "\ No newline at end of file" is skipped later
        return not (line.startswith("--- ") and k + 1 < len(lines)
                    and lines[k + 1].startswith("+++ "))
    if line == "":  # a blank context line whose leading space was lost, if the hunk goes on
        return k + 1 < len(lines) and lines[k + 1][:1] in (" ", "+", "-") \
            and not FENCE_RE.match(lines[k + 1])
    return False


# -- format 3: whole files ------------------------------------------------------------------

# "..." alone, a comment starting with "...", or a comment saying code was left out
ELISION_RE = re.compile(
    r"^\s*(?:\.\.\.|…)\s*$|^\s*(?:#|//)\s*(?:\.\.\.|…)|^\s*(?:#|//).*\b(?:rest of (?:the )?"
    r"(?:file|code|function|class|script)|remains? (?:the same|unchanged)|same as before"
    r"|(?:existing|unchanged|previous) code)\b", re.IGNORECASE)


def _looks_like_diff(content: list[str]) -> bool:
    """'-old' / '+new' lines with every other line ' '-prefixed: a diff, not a file."""
    marked = [l for l in content if l.strip()]
    return bool(marked) and all(l[:1] in " +-" for l in marked) \
        and any(l.startswith("+") for l in marked) and any(l.startswith("-") for l in marked)


def _parse_whole_files(lines, used, fences, found, problems) -> None:
    """A fence labelled with a bare path (line above, or info string) is a whole file.
    A fence under a prose line naming files, or under a bare name with no extension
    ('Makefile'), *may* be one: it becomes an Edit with `named` candidates, kept only if
    it names exactly one existing file and holds all of it (see loop.edits.edits)."""
    for n, fence in enumerate(fences):
        body = range(fence.open + 1, fence.end)
        if any(used[j] for j in body):
            continue
        path = path_in_info(fence.info) or label_above(lines, fence.open)
        content = _body(lines, fence)
        if path is None:
            named, source = names_above(lines, used, fence.open)
            # no word above names a file: with one editable file it may still be that file
            named, source = named or ("",), source or "unnamed fence"
            if fence.close is not None and not _looks_like_diff(content) \
                    and not any(ELISION_RE.search(l) for l in content):
                found.append((fence.open, Edit(None, "whole", "", "\n".join(content) + "\n",
                                               source=source, named=named)))
            continue
        if fence.restarted:
            if not any((path_in_info(f.info) or label_above(lines, f.open)) == path
                       for f in fences[n + 1:]):
                problems.append(f"the listing of {path} at reply line {fence.open + 1} stops "
                                f"and starts again, and is never completed")
        elif fence.close is None:
            problems.append(f"the code block for {path} at reply line {fence.open + 1} is "
                            f"never closed (was the reply cut off?)")
        elif fence.info.split()[:1] in (["diff"], ["patch"]) or _looks_like_diff(content):
            problems.append(f"the diff for {path} at reply line {fence.open + 1} has no "
                            f"'@@' hunk headers: send SEARCH/REPLACE blocks instead")
        elif any(ELISION_RE.search(l) for l in content):
            bad = next(l.strip() for l in content if ELISION_RE.search(l))
            problems.append(f"the whole-file block for {path} elides code ({bad!r}): send "
                            f"SEARCH/REPLACE blocks instead of a partial file")
        else:
            found.append((fence.open, Edit(path, "whole", "", "\n".join(content) + "\n",
                                           source="whole file")))
        for j in range(fence.open, fence.end if fence.close is None else fence.close + 1):
            used[j] = True


def _prose(lines, used, fences) -> list[str]:
    """The reply's lines outside every edit and every fence."""
    in_fence: set[int] = set()
    for f in fences:
        in_fence.update(range(f.open, f.end + 1))
    return [l for k, l in enumerate(lines) if not used[k] and k not in in_fence]
