"""Which of a night's kept commits `finalize` can drop without a run, and the trees it
measures and builds. Pure: file texts in, decisions and texts out (no git, no runs).

A night's kept commits, in order, are states S0 (the night's start), S1, .., Sn (the final
best), each a dict path -> text over the files any of them changed. For commit i
(S{i-1} -> Si):

- **no-op**: no effective change: the same texts, or (Python) the same tokens once comments
  and blank lines are set aside.
- **superseded**: every line it wrote (a pure deletion counts as the line after it) was
  rewritten by later commits before the end (followed through each later diff, line by
  line): nothing of it is left in the final code.
- otherwise **live**: it is measured. Its leave-one-out code is made forward from S0 with
  every other live commit's change made again in order (its hunks, applied with the
  project's edit applier, as the replay rule makes a change again), and measured against
  the same made with every live commit (the final code without its no-ops and superseded
  commits). When a later live commit rewrote part of its lines, the two are one **unit**,
  left out together and judged together. When a forward build does not apply, the final
  code with the unit's diffs reversed (latest first) stands in.

The branch to merge is rebuilt forward from S0 with each unit that matters made again in
order; a change whose context was written by a superseded commit brings that commit's
change with it (it is rewritten by the later one anyway), and those its lines came through
in turn (a setting changed three times: the third brings the first two)."""
from __future__ import annotations

import difflib
import io
import tokenize
from dataclasses import dataclass, field

from loop.proposers.change import Change, ChangeFailed, redo
from loop.edits.hunks import hunks

Files = dict[str, str]


@dataclass
class Fact:
    """What the diffs alone say about kept commit `index` (1-based: S{index-1} -> S{index})."""
    index: int
    noop: bool = False
    superseded: bool = False
    overwriters: set[int] = field(default_factory=set)   # later commits that rewrote its lines

    @property
    def live(self) -> bool:
        return not (self.noop or self.superseded)


@dataclass
class Unit:
    """Kept commits left out and judged together (one, unless their lines overlap)."""
    members: list[int]                 # commit indices, in order
    variant: Files | None = None       # the final files without them (None: cannot be made)
    why_not: str = ""                  # why the variant cannot be made


def lines(text: str | None) -> list[str]:
    return (text or "").splitlines()


def code_lines(path: str, text: str | None) -> list[str]:
    """The lines as code: for Python, comments cut off and trailing blanks stripped, so that
    a comment added to a line does not count as rewriting it."""
    raw = lines(text)
    if not path.endswith(".py") or not text:
        return raw
    try:
        comments = [t.start for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return raw
    for row, col in comments:
        if row - 1 < len(raw):
            raw[row - 1] = raw[row - 1][:col].rstrip()
    return raw


def same_code(path: str, old: str | None, new: str | None) -> bool:
    """Whether two texts of a file do the same: equal, or for Python the same tokens once
    comments and blank lines are set aside (a string, a docstring included, may matter)."""
    if old == new:
        return True
    if old is None or new is None or not path.endswith(".py"):
        return False
    a, b = _tokens(old), _tokens(new)
    return a is not None and a == b


def _tokens(text: str) -> list[tuple[int, str]] | None:
    skip = {tokenize.COMMENT, tokenize.NL}
    try:
        return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def is_noop(before: Files, after: Files) -> bool:
    paths = set(before) | set(after)
    return all(same_code(p, before.get(p), after.get(p)) for p in paths)


def _touched(old: list[str], new: list[str]) -> set[int]:
    """Lines of `new` a diff from `old` wrote; a pure deletion counts as the line after it
    (or before it, at the end of the file)."""
    out: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new,
                                                     autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if j1 < j2:
            out.update(range(j1, j2))
        elif new:
            out.add(min(j1, len(new) - 1))
    return out


def _carry(alive: set[int], old: list[str], new: list[str]) -> tuple[set[int], bool]:
    """Lines of `old` in `alive` as lines of `new`, and whether the diff rewrote any."""
    moved: set[int] = set()
    hit = False
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, old, new,
                                                      autojunk=False).get_opcodes():
        inside = {i for i in alive if i1 <= i < i2}
        if tag == "equal":
            moved.update(j1 + (i - i1) for i in inside)
        elif inside:
            hit = True
    return moved, hit


def facts(states: list[Files]) -> list[Fact]:
    """One Fact per kept commit (states[0] is the start, states[i] after commit i)."""
    out = []
    for i in range(1, len(states)):
        fact = Fact(i, noop=is_noop(states[i - 1], states[i]))
        if not fact.noop:
            left = 0
            for path in set(states[i - 1]) | set(states[i]):
                alive = _touched(code_lines(path, states[i - 1].get(path)),
                                 code_lines(path, states[i].get(path)))
                for j in range(i + 1, len(states)):
                    if not alive:
                        break
                    alive, hit = _carry(alive, code_lines(path, states[j - 1].get(path)),
                                        code_lines(path, states[j].get(path)))
                    if hit:
                        fact.overwriters.add(j)
                left += len(alive)
            fact.superseded = left == 0 and bool(fact.overwriters)
        out.append(fact)
    return out


def _reverse(states: list[Files], i: int, files: Files) -> Files:
    """`files` with commit i's change undone (its hunks from after back to before)."""
    back = hunks(states[i], {p: states[i - 1].get(p, "") for p in states[i]})
    made = redo(Change(edits=tuple(back)), files)
    return {**files, **made.files}


def leave_out(states: list[Files], members: list[int]) -> Files:
    """The final files without these commits (latest reversed first); ChangeFailed when
    a reversal does not apply."""
    files = dict(states[-1])
    for i in sorted(members, reverse=True):
        files = _reverse(states, i, files)
    return files


def units(states: list[Files], found: list[Fact]) -> list[Unit]:
    """Live commits grouped by overlapping lines (a later live commit rewrote part of an
    earlier one's), each group with its leave-one-out files."""
    live = {f.index for f in found if f.live}
    parent = {i: i for i in live}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        parent[root(b)] = root(a)

    by_index = {f.index: f for f in found}
    for i in sorted(live):
        for j in by_index[i].overwriters & live:
            join(i, j)
    groups: dict[int, list[int]] = {}
    for i in sorted(live):
        groups.setdefault(root(i), []).append(i)
    out = []
    for members in sorted(groups.values()):
        unit = Unit(members)
        try:
            unit.variant = without(states, found, sorted(live - set(members)))
        except ChangeFailed:
            try:       # made forward it does not apply: the final code with it reversed
                unit.variant = leave_out(states, members)
            except ChangeFailed as exc:
                unit.why_not = str(exc)
        out.append(unit)
    return out


def without(states: list[Files], found: list[Fact], keep: list[int]) -> Files:
    """The code made from the start with only the commits `keep` (the last step of
    `rebuild`); every live commit: the final code without its no-ops and superseded
    commits, the reference each unit is left out of."""
    steps = rebuild(states, found, keep)
    return steps[-1].files if steps else dict(states[0])


def reference(states: list[Files], found: list[Fact]) -> Files:
    return without(states, found, [f.index for f in found if f.live])


@dataclass
class Step:
    """One commit of the branch to merge: a kept commit made again on the branch so far."""
    index: int
    files: Files                  # the branch's files after it
    brings: list[int]             # superseded commits whose change it needed first


def rebuild(states: list[Files], found: list[Fact], keep: list[int]) -> list[Step]:
    """The kept commits `keep` made again forward from the start, in order. A change that
    does not apply brings first the superseded commits whose lines it rewrote; ChangeFailed
    when it still does not apply."""
    files, steps = dict(states[0]), []
    for i in sorted(keep):
        brings = _context(found, i)
        try:
            files = _forward(states, [i], files)
            brings = []
        except ChangeFailed:
            files = _forward(states, brings + [i], files)
        steps.append(Step(i, dict(files), brings))
    return steps


def _context(found: list[Fact], i: int) -> list[int]:
    """The superseded commits whose lines commit i rewrote, and theirs in turn (a constant
    set three times: the third's line is the second's, the second's the first's)."""
    need = {i}
    while True:
        more = {f.index for f in found if f.superseded and f.index < i
                and f.index not in need and f.overwriters & need}
        if not more:
            return sorted(need - {i})
        need |= more


def _forward(states: list[Files], commits: list[int], files: Files) -> Files:
    for i in commits:
        ahead = hunks({p: states[i - 1].get(p, "") for p in states[i]}, states[i])
        made = redo(Change(edits=tuple(ahead)), files)
        files = {**files, **made.files}
    return files
