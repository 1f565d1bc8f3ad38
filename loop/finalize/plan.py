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

import ast
import difflib
import io
import re
import textwrap
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


@dataclass
class Part:
    """One unit of a kept commit that can be left out alone (its commit's only one, unless
    the commit set several settings or touched separate hunks)."""
    commit: int          # the kept commit's index (1-based)
    part: int            # 1-based within the commit
    parts: int           # how many the commit was split into
    label: str           # what it changes: `NAME: old -> new`, or where


ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=\s*(.*?)\s*$")


def split(states: list[Files]) -> tuple[list[Files], list[Part]]:
    """Each kept commit cut into the parts that can be left out alone, as finer states:
    commit i's parts made one after the other from S{i-1}, the last being S{i}. The rest of
    the plan (facts, units, rebuild) then works on parts as it did on commits.

    How a commit is cut: its diff's changed regions (per file, per difflib opcode); a region
    replacing top-level assignments one for one (`CLIP = 1.0` -> `CLIP = 2.23`, adjacent
    lines included) is cut per line. Regions that depend on each other are joined again:
    (Python) regions within one top-level statement (a def, a class, one call), and a region
    that uses a name another region of the commit defines anew. A cut is valid only when
    each part alone, and the parts made one after another, still parse (Python); otherwise
    the commit stays whole. A file that is not Python is one part per file."""
    fine, parts = [states[0]], []
    for i in range(1, len(states)):
        groups = _parts(states[i - 1], states[i])
        for n, (label, _) in enumerate(groups, 1):
            done = {r for _, chosen in groups[:n] for r in chosen}
            fine.append(_apply(states[i - 1], states[i], done) if n < len(groups)
                        else states[i])
            parts.append(Part(i, n, len(groups), label))
    return fine, parts


Region = tuple[str, int]       # (path, index of the non-equal opcode, or of a line within it)


def _regions(before: Files, after: Files) -> dict[str, list[tuple[int, int, int, int]]]:
    """Per path, the changed regions as (i1, i2, j1, j2) line ranges (old, new), the
    one-for-one assignment replacements cut per line."""
    out: dict[str, list[tuple[int, int, int, int]]] = {}
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        a, b = (old or "").splitlines(True), (new or "").splitlines(True)
        got = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b,
                                                           autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            names_a = [_assigned(line) for line in a[i1:i2]]
            names_b = [_assigned(line) for line in b[j1:j2]]
            if path.endswith(".py") and tag == "replace" and len(names_a) + len(names_b) > 2 \
                    and all(names_a) and all(names_b):
                got += _by_name(names_a, names_b, i1, j1)
            else:
                got.append((i1, i2, j1, j2))
        out[path] = got
    return out


def _by_name(names_a: list, names_b: list, i0: int, j0: int) -> list[tuple[int, int, int, int]]:
    """A block of top-level assignments replaced by another, cut per setting: a name on
    both sides is one region (its line), the names only one side has are regions of their
    own (matched as a sequence of names, so the order is kept)."""
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, names_a, names_b,
                                                       autojunk=False).get_opcodes():
        if tag == "equal":
            out += [(i0 + i1 + d, i0 + i1 + d + 1, j0 + j1 + d, j0 + j1 + d + 1)
                    for d in range(i2 - i1)]
        else:
            out.append((i0 + i1, i0 + i2, j0 + j1, j0 + j2))
    return out


def _assigned(line: str) -> str | None:
    """The name a top-level one-line assignment sets (None: not one)."""
    m = ASSIGN.match(line.rstrip("\n"))
    return m.group(1) if m and not line[:1].isspace() and not line.startswith("def ") else None


def _apply(before: Files, after: Files, chosen: set[Region]) -> Files:
    """`before` with only the chosen regions of the change to `after` made."""
    regions = _regions(before, after)
    out = dict(before)
    for path, found in regions.items():
        if not any((path, n) in chosen for n in range(len(found))):
            continue
        a = (before.get(path) or "").splitlines(True)
        b = (after.get(path) or "").splitlines(True)
        text, pos = [], 0
        for n, (i1, i2, j1, j2) in enumerate(found):
            text += a[pos:i1]
            text += b[j1:j2] if (path, n) in chosen else a[i1:i2]
            pos = i2
        text += a[pos:]
        joined = "".join(text)
        if path not in before and not joined:
            continue
        out[path] = joined
    return out


def _parts(before: Files, after: Files) -> list[tuple[str, set[Region]]]:
    """The commit's parts: (label, regions), in file and line order."""
    regions = _regions(before, after)
    every = [(p, n) for p, found in regions.items() for n in range(len(found))]
    if len(every) <= 1:
        return [("", set(every))]
    parent = {r: r for r in every}

    def root(r: Region) -> Region:
        while parent[r] != r:
            r = parent[r]
        return r

    def join(x: Region, y: Region) -> None:
        parent[root(y)] = root(x)

    uses: dict[Region, set[str]] = {}
    defines: dict[Region, set[str]] = {}
    for path, found in regions.items():
        if not path.endswith(".py"):
            for n in range(1, len(found)):
                join((path, 0), (path, n))
            continue
        spans_new = _statements(after.get(path))
        spans_old = _statements(before.get(path))
        if spans_new is None or spans_old is None:
            for n in range(1, len(found)):
                join((path, 0), (path, n))
            continue
        owner: dict[tuple[str, int], Region] = {}
        old_names = _defined(before.get(path) or "")
        for n, (i1, i2, j1, j2) in enumerate(found):
            stmts = {("new", k) for k, (lo, hi) in enumerate(spans_new)
                     if lo < max(j2, j1 + 1) and hi > j1 and (j2 > j1 or lo <= j1 < hi)}
            stmts |= {("old", k) for k, (lo, hi) in enumerate(spans_old)
                      if lo < max(i2, i1 + 1) and hi > i1 and (i2 > i1 or lo <= i1 < hi)}
            for s in stmts:
                if s in owner:
                    join(owner[s], (path, n))
                else:
                    owner[s] = (path, n)
            text = "".join((after.get(path) or "").splitlines(True)[j1:j2])
            defines[(path, n)] = _defined(text) - old_names
            uses[(path, n)] = _used(text)
    for r in every:
        for q in every:
            if r != q and defines.get(r, set()) & uses.get(q, set()):
                join(r, q)
    groups: dict[Region, set[Region]] = {}
    for r in every:
        groups.setdefault(root(r), set()).add(r)
    ordered = sorted(groups.values(), key=min)
    if len(ordered) > 1 and not _each_parses(before, after, ordered):
        return [("", set(every))]
    if len(ordered) == 1:
        return [("", set(every))]
    return [(_label(before, after, regions, g), g) for g in ordered]


def _each_parses(before: Files, after: Files, groups: list[set[Region]]) -> bool:
    done: set[Region] = set()
    for g in groups:
        done |= g
        for files in (_apply(before, after, g), _apply(before, after, done)):
            for path, text in files.items():
                if path.endswith(".py") and text != before.get(path):
                    try:
                        ast.parse(text)
                    except SyntaxError:
                        return False
    return True


def _statements(text: str | None) -> list[tuple[int, int]] | None:
    """Top-level statements as 0-based [first line, last line + 1) (None: does not parse)."""
    if not text:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    out = []
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        out.append((first - 1, node.end_lineno or node.lineno))
    return out


def _defined(text: str) -> set[str]:
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _used(text: str) -> set[str]:
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} | {n.attr for n in ast.walk(tree)
                                                if isinstance(n, ast.Attribute)}


def _label(before: Files, after: Files, regions, group: set[Region]) -> str:
    said = []
    for path, n in sorted(group):
        i1, i2, j1, j2 = regions[path][n]
        a = (before.get(path) or "").splitlines()[i1:i2]
        b = (after.get(path) or "").splitlines()[j1:j2]
        old = ASSIGN.match(a[0]) if len(a) == len(b) == 1 else None
        new = ASSIGN.match(b[0]) if len(a) == len(b) == 1 else None
        if old and new and _assigned(a[0]) and _assigned(a[0]) == _assigned(b[0]):
            said.append(f"{old.group(1)}: {old.group(2)} -> {new.group(2)}")
        else:
            said.append(f"{path} line {j1 + 1}" if j2 - j1 <= 1 else
                        f"{path} lines {j1 + 1}-{j2}")
    return "; ".join(said)


def settings_set(before: Files, after: Files) -> set[str]:
    """The names of the top-level one-line assignments a change rewrote, added or removed
    (Python files): the settings it set."""
    names: set[str] = set()
    for path, found in _regions(before, after).items():
        if not path.endswith(".py"):
            continue
        a = (before.get(path) or "").splitlines(True)
        b = (after.get(path) or "").splitlines(True)
        for i1, i2, j1, j2 in found:
            names |= {n for n in map(_assigned, a[i1:i2] + b[j1:j2]) if n}
    return names
