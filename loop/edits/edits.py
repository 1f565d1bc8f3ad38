"""Parse an LLM reply into edits and apply them to file texts, with precise errors.

Pure: texts in, texts out; no git, no files. The contract the engine relies on:
  * a block that does not apply is an error, never silently skipped;
  * a match is exact first, then tolerant (trailing whitespace, edge blank lines, a uniform
    indentation shift, a first line missing its leading keyword: `lr_at(progress):` for
    `def lr_at(progress):`), but never ambiguous: a SEARCH that fits two places is refused;
  * a block that changes nothing (REPLACE equals SEARCH, a whole file as it is) is named
    as such, so the model learns its edit was a no-op, not that it was lost; beside blocks
    that do change a file it is passed over, as aider does, and noted (`EditOutcome.noted`),
    provided its SEARCH text is in the file;
  * errors name the block and show the closest lines, worded to be sent back to the model.
This module applies; where a SEARCH text fits is loop/edits/match.py's, the closest lines
loop/edits/hints.py's, the parsing loop/edits/parse.py's.

    parsed = parse_reply(reply_text)                 # description + edits (+ problems)
    changed = apply_edits(files, parsed, task)       # {path: new text} of changed files
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from loop.edits.hints import not_found
from loop.edits.match import BlockFailure, fits, join_lines, locate, split_lines
from loop.edits.parse import Edit, ParsedReply, parse_reply
from loop.edits.thinking import split_thinking
from loop.untrusted import canonical_path

__all__ = ["Edit", "ParsedReply", "EditError", "EditOutcome", "parse_reply", "apply_edits",
           "try_edits", "apply_reply", "settle_named", "split_thinking"]

PathCheck = Callable[[str], "str | None"]  # rel path -> why it may not be written, or None
NO_EDITS = ("no edit found in the reply: write each change as a SEARCH/REPLACE block under "
            "the file's path (see the format in the instructions)")
NOTHING_CHANGED = ("the edit changes nothing: every block leaves the files as they are; "
                   "propose a change that alters the code")
NO_OP_BLOCK = ("this block changes nothing: its REPLACE text is the same as its SEARCH text. "
               "Write the changed lines in REPLACE")
NO_OP_WHOLE = ("this listing of {path} is the file as it is, unchanged: make the change in "
               "it (or send a SEARCH/REPLACE block)")
NO_OP_NOTED = "it changes nothing; passed over, the reply's other blocks applied"
MIN_WHOLE_FILE_SHARE = 1 / 3   # a "whole file" far shorter than the file is a fragment
# a fence under prose ("Here is the updated `train.py`:") is taken for the whole file only
# if it is about as long as the file, keeps most of its lines and its first or last line
NAMED_MIN_LENGTH, NAMED_MIN_KEPT = 2 / 3, 0.5


class NoOpBlock(BlockFailure):
    """The block changes nothing; `found`: its text is where it says (so, beside blocks that
    change something, it is passed over rather than refused)."""

    def __init__(self, message: str, found: bool):
        super().__init__(message)
        self.found = found


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
    # blocks that changed nothing, passed over beside blocks that did (aider applies them):
    # one line each, naming the block
    noted: list[str] = field(default_factory=list)


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
    no_ops: list[tuple[Edit, NoOpBlock]] = []
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
        except NoOpBlock as passed:
            no_ops.append((edit, passed))
        except BlockFailure as failure:
            hint = failure.args[0]
            outcome.failures.append(f"{edit.label}: {hint}")
    outcome.changed = {p: t for p, t in texts.items() if files.get(p) != t}
    for edit, no_op in no_ops:      # alone (or not found) a no-op is refused, as before
        if outcome.done and no_op.found:
            outcome.noted.append(f"{edit.label}: {NO_OP_NOTED}")
        else:
            outcome.failures.append(f"{edit.label}: {no_op.args[0]}")
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
        homes = [p for p, t in texts.items()
                 if edit.search.strip() and fits(t, edit.search, edit.replace)]
        if len(homes) == 1:
            return homes[0]
        raise BlockFailure("the block names no file: put the file's path alone on the line "
                       "above the block")
    try:      # one spelling: `././prepare.py` is `prepare.py` (checked as such below)
        path = canonical_path(edit.path)
    except ValueError as exc:
        raise BlockFailure(f"{exc}; edit only the editable files") from None
    if path in texts:
        return path
    # "experiments/tinylm/train.py" for "train.py" (or the reverse): one unique suffix match
    near = [k for k in texts if path.endswith("/" + k) or k.endswith("/" + path)]
    return near[0] if len(near) == 1 else path


def _check_path(path: str, check: PathCheck | None, texts: dict[str, str]) -> None:
    parts = PurePosixPath(path).parts
    if path.startswith(("/", "~", "\\")) or ".." in parts or ":" in path:
        raise BlockFailure(f"{path}: outside the task folder")
    reason = check(path) if check else (None if path in texts else
                                        f"{path}: not one of the editable files "
                                        f"({', '.join(sorted(texts))})")
    if reason:
        raise BlockFailure(f"{reason}; edit only the editable files")
    if "\0" in texts.get(path, ""):
        raise BlockFailure(f"{path}: binary file (it may not be edited as text)")


# -- one edit ----------------------------------------------------------------------------------

def _apply_one(text: str | None, edit: Edit, shift: int, allow_already_applied: bool
               ) -> tuple[str, int]:
    if "\0" in edit.replace:
        raise BlockFailure("the new text contains NUL bytes (binary content is not allowed)")
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
        raise NoOpBlock(NO_OP_WHOLE.format(path=edit.path), True)
    if _fence_lines(old) and not _fence_lines(edit.replace):
        # a file holding ``` blocks (markdown), listed inside ```: the listing ends at the
        # file's first inner fence, so what we read is the file cut there
        raise BlockFailure(f"{edit.path} contains ``` code fences, so a whole-file listing of it "
                       f"inside ``` is cut at the first of them: use SEARCH/REPLACE blocks")
    old_n, new_n = len(old.splitlines()), len(edit.replace.splitlines())
    if old_n >= 30 and new_n < old_n * MIN_WHOLE_FILE_SHARE:
        raise BlockFailure(f"this whole-file block has {new_n} lines where {edit.path} has "
                       f"{old_n}: it looks like a fragment, not the whole file. To change "
                       f"part of a file, use SEARCH/REPLACE blocks")
    return edit.replace


def _holds(text: str, search: list[str], replace: list[str]) -> bool:
    """Whether `search` is in `text`, in one place or several (a block that changes nothing
    changes nothing wherever it is)."""
    if not any(l.strip() for l in search):
        return False
    try:
        return locate(split_lines(text), search, replace, None) is not None
    except BlockFailure:        # it fits several places
        return True


def _fence_lines(text: str) -> int:
    return sum(1 for l in text.splitlines() if l.lstrip().startswith(("```", "~~~")))


def _replace(old: str | None, edit: Edit, shift: int, allow_already_applied: bool) -> str:
    search, replace = split_lines(edit.search), split_lines(edit.replace)
    if [l.rstrip() for l in search] == [l.rstrip() for l in replace] and search:
        raise NoOpBlock(NO_OP_BLOCK, old is not None and _holds(old, search, replace))
    if not any(l.strip() for l in search):
        if old is None or not old.strip():
            return join_lines(replace, True)       # creating a new (or filling an empty) file
        raise BlockFailure("the SEARCH part is empty, but the file is not: copy the lines to "
                       "change into SEARCH (a diff hunk needs unchanged context lines)")
    if old is None:
        raise BlockFailure(f"{edit.path} does not exist, so there is nothing to search in")
    lines, ends_with_newline = split_lines(old), old.endswith("\n") or old == ""
    hint = None if edit.line_hint is None else edit.line_hint - 1 + shift
    found = locate(lines, search, replace, hint)
    if found is None:
        if allow_already_applied and locate(lines, replace, replace, hint) is not None:
            return old
        raise BlockFailure(not_found(lines, search, edit))
    start, end, new_lines = found
    return join_lines(lines[:start] + new_lines + lines[end:], ends_with_newline)
