"""A proposal's change as data, so that it can be made again on another state's files.

A candidate is proposed against the best at the time; when another candidate is kept
meanwhile, the engine makes the same change on the new best (docs/design.md, "The replay
rule") instead of merging two diffs line by line (a 3-way merge refuses changes on adjacent
lines, though `Set DEPTH` and `Set WIDTH` have nothing to do with each other):

  * the mutate proposer's change is "set these constants to these values": each is set in
    the new text, whatever its value there (a different one is noted);
  * an LLM's change is its SEARCH/REPLACE blocks (or diff hunks), applied again with the
    project's edit applier; hunks derived from a diff (loop/edits/hunks.py) stand in for a
    whole-file block, and for proposers that give no change at all.

Pure: texts in, texts out (no git, no files)."""
from __future__ import annotations

from dataclasses import dataclass

from loop.edits.edits import Edit, try_edits
from loop.script import settings as where
from loop.setup.search_space import Dim, constants, implied, number, valid


@dataclass(frozen=True)
class Setting:
    """Set constant `name` in `path` to the source text `new` (it was `old`)."""
    path: str
    name: str
    old: str
    new: str


@dataclass(frozen=True)
class Change:
    settings: tuple[Setting, ...] = ()    # mutate: constants set to values
    edits: tuple[Edit, ...] = ()          # edits that made it, in order

    def __bool__(self) -> bool:
        return bool(self.settings or self.edits)


class ChangeFailed(Exception):
    """The change cannot be made on these files; the message says why, in a clause."""


@dataclass
class Redone:
    files: dict[str, str]                 # the files it changes, with their new text
    notes: list[str]                      # what differed from where it was proposed


def redo(change: Change, files: dict[str, str], check_path=None,
         space: dict[str, Dim] | None = None) -> Redone:
    """`change` made on `files` (path -> text). ChangeFailed when it cannot be, or when it
    changes nothing there; `space`: the declared search space a set constant must stay in."""
    if change.settings:
        return _set(change.settings, files, space or {})
    texts = dict(files)
    for edit in change.edits:
        outcome = try_edits(texts, [edit], check_path)
        if outcome.failures:
            raise ChangeFailed(_why(edit, outcome.failures[0]))
        texts.update(outcome.changed)
    changed = {p: t for p, t in texts.items() if files.get(p) != t}
    if not changed:
        raise ChangeFailed("it changes nothing there")
    return Redone(changed, [])


def _why(edit: Edit, failure: str) -> str:
    """A failed edit, as a clause of a sentence (the applier's own message is written for
    the model, with the closest lines)."""
    first = next((line.strip() for line in edit.search.splitlines() if line.strip()), "")
    first = first if len(first) <= 60 else first[:59] + "…"
    where = edit.path or "the editable files"
    if "not found" in failure:
        return f"{where} no longer has the line `{first}`"
    if "matches" in failure and "places" in failure:
        return f"the line `{first}` is in {where} more than once"
    text = " ".join(failure.split(": ", 1)[-1].split())
    text = text.split(". ")[0]
    return text if len(text) <= 160 else text[:159] + "…"


def _set(settings: tuple[Setting, ...], files: dict[str, str], space: dict[str, Dim]) -> Redone:
    texts, notes = dict(files), []
    for s in settings:
        if s.path not in texts:
            raise ChangeFailed(f"{s.path} is not there")
        found = where.lookup(texts, s.path, s.name)
        if found is None:
            noun = "constant" if where.kind_of(s.path) == "constant" else "setting"
            raise ChangeFailed(f"{s.name} is no longer a {noun} in {s.path}")
        now = found.text
        if now.strip() == s.new.strip() or _same(now, s.new):
            notes.append(f"{s.name} is {s.new} there already")
            continue
        if not _same(now, s.old):
            notes.append(f"{s.name} was {now} there, not {s.old}")
        texts[s.path] = where.write(texts[s.path], s.path, s.name, s.new) or texts[s.path]
    changed = {p: t for p, t in texts.items() if files.get(p) != t}
    if not changed:
        raise ChangeFailed("every constant it sets has that value there already")
    point = constants(texts, space)
    why = valid(point, implied(texts, space)) or valid(point, space)
    if why:
        raise ChangeFailed(f"there it is no valid point: {why}")
    return Redone(changed, notes)


def _same(a: str, b: str) -> bool:
    try:
        return number(a) == number(b)
    except (ValueError, ZeroDivisionError):
        return a.strip() == b.strip()
