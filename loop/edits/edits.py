"""Parse an LLM reply into edits and apply them to file texts, with precise errors.

Pure: texts in, texts out; no git, no files. The contract the engine relies on:
  * a block that does not apply is an error, never silently skipped;
  * a match is exact first, then tolerant (trailing whitespace, edge blank lines, a uniform
    indentation shift, a first line missing its leading keyword: `lr_at(progress):` for
    `def lr_at(progress):`), but never ambiguous: a SEARCH that fits two places is refused;
  * a block that changes nothing (REPLACE equals SEARCH, a whole file as it is) is named
    as such, so the model learns its edit was a no-op, not that it was lost;
  * errors name the block and show the closest lines, worded to be sent back to the model.

    parsed = parse_reply(reply_text)                 # description + edits (+ problems)
    changed = apply_edits(files, parsed, task)       # {path: new text} of changed files
"""
from __future__ import annotations

import difflib
import keyword
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from loop.edits.parse import Edit, ParsedReply, one_line, parse_reply
from loop.edits.thinking import split_thinking
from loop.untrusted import canonical_path

__all__ = ["Edit", "ParsedReply", "EditError", "EditOutcome", "parse_reply", "apply_edits",
           "try_edits", "apply_reply", "one_line", "settle_named", "split_thinking"]

PathCheck = Callable[[str], "str | None"]  # rel path -> why it may not be written, or None
NO_EDITS = ("no edit found in the reply: write each change as a SEARCH/REPLACE block under "
            "the file's path (see the format in the instructions)")
NOTHING_CHANGED = ("the edit changes nothing: every block leaves the files as they are; "
                   "propose a change that alters the code")
NO_OP_BLOCK = ("this block changes nothing: its REPLACE text is the same as its SEARCH text. "
               "Write the changed lines in REPLACE")
NO_OP_WHOLE = ("this listing of {path} is the file as it is, unchanged: make the change in "
               "it (or send a SEARCH/REPLACE block)")
MIN_WHOLE_FILE_SHARE = 1 / 3   # a "whole file" far shorter than the file is a fragment
# a fence under prose ("Here is the updated `train.py`:") is taken for the whole file only
# if it is about as long as the file, keeps most of its lines and its first or last line
NAMED_MIN_LENGTH, NAMED_MIN_KEPT = 2 / 3, 0.5


class EditError(Exception):
    """The reply's edits do not apply. `message` is written to be sent back to the model."""

    def __init__(self, message: str, failures: Iterable[str] = (),
                 partial: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.failures = list(failures)
        self.partial = dict(partial or {})   # changed files after the blocks that did apply


@dataclass
class EditOutcome:
    changed: dict[str, str] = field(default_factory=dict)  # only files whose text changed
    failures: list[str] = field(default_factory=list)      # one message per failed block
    applied: int = 0
    # the blocks that changed a file, in order, each naming its file: made again on other
    # files when the change is replayed (loop/proposers/change.py)
    done: list[Edit] = field(default_factory=list)


class _Failure(Exception):
    pass


def apply_reply(files: dict[str, str], text: str, check_path=None) -> tuple[str | None, dict]:
    """parse_reply + apply_edits: (description, changed files), or EditError."""
    parsed = parse_reply(text)
    return parsed.description, apply_edits(files, parsed, check_path)


def apply_edits(files: dict[str, str], edits: ParsedReply | list[Edit],
                check_path=None) -> dict[str, str]:
    """Apply every edit, or raise EditError listing every failure (and parse problem).

    `files`: path -> current text. `check_path`: a Task, or a callable returning why a
    path may not be written (None: only the given files may be edited, none created).
    Returns the new texts of the files that changed."""
    problems = edits.problems if isinstance(edits, ParsedReply) else []
    edit_list = settle_named(files, edits.edits if isinstance(edits, ParsedReply) else edits)
    if not edit_list and not problems:
        raise EditError(NO_EDITS, [NO_EDITS])
    outcome = try_edits(files, edit_list, check_path)
    failures = problems + outcome.failures
    if failures:
        raise EditError(describe_failures(failures, len(edit_list) + len(problems)),
                        failures, outcome.changed)
    if not outcome.changed:
        raise EditError(NOTHING_CHANGED, [NOTHING_CHANGED])
    return outcome.changed


def describe_failures(failures: list[str], total: int) -> str:
    head = (f"{len(failures)} of {total} edit blocks could not be applied:"
            if total > 1 else "the edit could not be applied:")
    return head + "\n\n" + "\n\n".join(f"- {f}" for f in failures)


def try_edits(files: dict[str, str], edits: list[Edit], check_path=None,
              allow_already_applied: bool = False) -> EditOutcome:
    """Apply what applies, in order, and report the rest (the caller decides).
    `allow_already_applied`: a block whose REPLACE text is already in place counts as
    applied (used on repair turns, where models resend blocks that worked)."""
    check = getattr(check_path, "check_edit_path", check_path)
    edits = settle_named(files, edits)
    texts, outcome = dict(files), EditOutcome()
    line_shift: dict[str, int] = {}  # per file: lines added by earlier diff hunks
    for edit in edits:
        try:
            path = _resolve_path(edit, texts)
            _check_path(path, check, texts)
            before = texts.get(path)
            new, shift = _apply_one(before, edit, line_shift.get(path, 0),
                                    allow_already_applied)
            texts[path] = new
            if new != before:
                outcome.done.append(replace(edit, path=path, named=(), line_hint=None))
            line_shift[path] = line_shift.get(path, 0) + shift
            outcome.applied += 1
        except _Failure as failure:
            hint = failure.args[0]
            outcome.failures.append(f"{edit.label}: {hint}")
    outcome.changed = {p: t for p, t in texts.items() if files.get(p) != t}
    return outcome


# -- which file ------------------------------------------------------------------------------

def settle_named(files: dict[str, str], edits: Iterable[Edit]) -> list[Edit]:
    """Decide the fences that prose named ('Here is the updated `train.py`:'): each is
    kept, as a whole-file edit of that file, only when exactly one of the words above it
    is an existing file (or none is and there is exactly one file), it holds the whole
    file, and the reply has no explicit edit (an explicit block wins: the prose fence may
    be the old code, quoted). Else it was an illustration, and is dropped."""
    edits = list(edits)
    if any(not e.named for e in edits):
        return [e for e in edits if not e.named]
    kept = []
    for edit in edits:
        homes = {p for p in (_existing(w, files) for w in edit.named) if p}
        if not homes and len(files) == 1:    # an unnamed listing of the one editable file
            homes = set(files) if _whole_listing(next(iter(files.values())), edit.replace) \
                else set()
        if len(homes) == 1:
            path = homes.pop()
            if edit.source == "whole file" or _whole_listing(files[path], edit.replace):
                kept.append(replace(edit, path=path, named=()))
    return kept


def _existing(word: str, files: dict[str, str]) -> str | None:
    word = word[2:] if word.startswith("./") else word
    if word in files:
        return word
    near = [k for k in files if k.endswith("/" + word)]
    return near[0] if len(near) == 1 else None


def _whole_listing(old: str, new: str) -> bool:
    old_lines = [l.strip() for l in old.splitlines() if l.strip()]
    new_lines = [l.strip() for l in new.splitlines() if l.strip()]
    if not old_lines or len(new_lines) < NAMED_MIN_LENGTH * len(old_lines):
        return False
    present = set(new_lines)
    kept = sum(l in present for l in old_lines) / len(old_lines)
    return kept >= NAMED_MIN_KEPT and (old_lines[0] == new_lines[0]
                                       or old_lines[-1] == new_lines[-1])


def _resolve_path(edit: Edit, texts: dict[str, str]) -> str:
    if edit.path is None:
        homes = [p for p, t in texts.items() if edit.search.strip() and _count_matches(t, edit)]
        if len(homes) == 1:
            return homes[0]
        raise _Failure("the block names no file: put the file's path alone on the line "
                       "above the block")
    try:      # one spelling: `././prepare.py` is `prepare.py` (checked as such below)
        path = canonical_path(edit.path)
    except ValueError as exc:
        raise _Failure(f"{exc}; edit only the editable files") from None
    if path in texts:
        return path
    # "experiments/tinylm/train.py" for "train.py" (or the reverse): one unique suffix match
    near = [k for k in texts if path.endswith("/" + k) or k.endswith("/" + path)]
    return near[0] if len(near) == 1 else path


def _check_path(path: str, check: PathCheck | None, texts: dict[str, str]) -> None:
    parts = PurePosixPath(path).parts
    if path.startswith(("/", "~", "\\")) or ".." in parts or ":" in path:
        raise _Failure(f"{path}: outside the task folder")
    reason = check(path) if check else (None if path in texts else
                                        f"{path}: not one of the editable files "
                                        f"({', '.join(sorted(texts))})")
    if reason:
        raise _Failure(f"{reason}; edit only the editable files")
    if "\0" in texts.get(path, ""):
        raise _Failure(f"{path}: binary file (it may not be edited as text)")


# -- one edit ----------------------------------------------------------------------------------

def _apply_one(text: str | None, edit: Edit, shift: int, allow_already_applied: bool
               ) -> tuple[str, int]:
    if "\0" in edit.replace:
        raise _Failure("the new text contains NUL bytes (binary content is not allowed)")
    crlf = text is not None and "\r\n" in text
    old = None if text is None else text.replace("\r\n", "\n")
    new = _whole(old, edit) if edit.kind == "whole" else _replace(old, edit, shift,
                                                                allow_already_applied)
    delta = 0
    if edit.kind != "whole" and old is not None:
        delta = new.count("\n") - old.count("\n")
    return (new.replace("\n", "\r\n") if crlf else new), delta


def _whole(old: str | None, edit: Edit) -> str:
    if old is None:
        return edit.replace
    if old.rstrip() == edit.replace.rstrip():
        raise _Failure(NO_OP_WHOLE.format(path=edit.path))
    if _fence_lines(old) and not _fence_lines(edit.replace):
        # a file holding ``` blocks (markdown), listed inside ```: the listing ends at the
        # file's first inner fence, so what we read is the file cut there
        raise _Failure(f"{edit.path} contains ``` code fences, so a whole-file listing of it "
                       f"inside ``` is cut at the first of them: use SEARCH/REPLACE blocks")
    old_n, new_n = len(old.splitlines()), len(edit.replace.splitlines())
    if old_n >= 30 and new_n < old_n * MIN_WHOLE_FILE_SHARE:
        raise _Failure(f"this whole-file block has {new_n} lines where {edit.path} has "
                       f"{old_n}: it looks like a fragment, not the whole file. To change "
                       f"part of a file, use SEARCH/REPLACE blocks")
    return edit.replace


def _fence_lines(text: str) -> int:
    return sum(1 for l in text.splitlines() if l.lstrip().startswith(("```", "~~~")))


def _replace(old: str | None, edit: Edit, shift: int, allow_already_applied: bool) -> str:
    search, replace = _lines(edit.search), _lines(edit.replace)
    if [l.rstrip() for l in search] == [l.rstrip() for l in replace] and search:
        raise _Failure(NO_OP_BLOCK)
    if not any(l.strip() for l in search):
        if old is None or not old.strip():
            return _join(replace, True)       # creating a new (or filling an empty) file
        raise _Failure("the SEARCH part is empty, but the file is not: copy the lines to "
                       "change into SEARCH (a diff hunk needs unchanged context lines)")
    if old is None:
        raise _Failure(f"{edit.path} does not exist, so there is nothing to search in")
    lines, ends_with_newline = _lines(old), old.endswith("\n") or old == ""
    hint = None if edit.line_hint is None else edit.line_hint - 1 + shift
    found = _locate(lines, search, replace, hint)
    if found is None:
        if allow_already_applied and _locate(lines, replace, replace, hint) is not None:
            return old
        raise _Failure(_not_found(lines, search, edit))
    start, end, new_lines = found
    return _join(lines[:start] + new_lines + lines[end:], ends_with_newline)


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []


def _join(lines: list[str], ends_with_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if ends_with_newline and lines else "")


# -- finding the SEARCH text ---------------------------------------------------------------------

def _exact(a: str, b: str) -> bool:
    return a == b


def _trailing_ws(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


LEVELS = (("exact", _exact), ("trailing whitespace", _trailing_ws))
TRAILING_COMMENT = re.compile(r"^(?P<code>.*?\S)(?P<tail>\s+#.*)$")


def _locate(lines, search, replace, hint):
    """(start, end, new lines) for the one place `search` fits, or None if none.
    Raises _Failure when it fits several places and the hint does not pick one."""
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
    raise _Failure(f"the SEARCH text matches {len(starts)} places (lines {where}); add "
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


def _count_matches(text: str, edit: Edit) -> int:
    try:
        return int(_locate(_lines(text.replace("\r\n", "\n")), _lines(edit.search),
                           _lines(edit.replace), None) is not None)
    except _Failure:
        return 0


# -- the "did you mean" hint -------------------------------------------------------------------

def _not_found(lines: list[str], search: list[str], edit: Edit) -> str:
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
