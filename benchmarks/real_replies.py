"""Our edit parser against real LLM replies that no one here wrote: aider's recorded chat
history (tests/fixtures/chat-history.md, several hundred replies from real models) and the
blocks aider's own parser finds in it (tests/fixtures/chat-history-search-replace-gold.txt).

    python benchmarks/real_replies.py PATH     # PATH: an aider checkout, or its bare git dir

Nothing of aider is copied here: the script reads the two files from the checkout you give
it. Each reply holding a SEARCH/REPLACE block (or that aider refused) is parsed by
`loop.edits.edits.parse_reply` and compared with aider's blocks:
  applied correctly   our edits are aider's blocks (file, SEARCH, REPLACE), nothing refused;
  refused             we report a problem: the reply goes back to the model (repair turn);
  wrong               we would apply something else than aider's blocks (must be 0);
  refused at apply    a reply with a block that changes nothing, applied (loop.edits'
                      try_edits) to files made of its SEARCH texts, refused (see JUDGED_APPLY);
and replies aider found no block in are checked for edits we would invent (also wrong).
Replies where we apply what aider refused, or aider's reading is itself wrong, are listed
with the reason, judged by hand in `JUDGED` (keyed by the reply's first line).
Exits 1 if anything is wrong."""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from loop.edits.edits import Edit, parse_reply, settle_named, try_edits  # noqa: E402

# Replies judged by hand (key: sha1 of the reply, first 12 hex digits): aider's editblock
# reading cannot judge them, so each was read in full and what we make of it checked.
WHOLE_OK = "whole file, checked by hand"
NOT_A_REPLY = "not a model reply, excluded"
JUDGED = {
    # whole-file replies (aider's 'whole' format): one complete listing, which we take
    "2bd3a8e21388": (WHOLE_OK, "a complete listing of the translated HISTORY.md"),
    "e73329befc8d": (WHOLE_OK, "a complete listing of the translated HISTORY.md"),
    "40bc5351ca4b": (WHOLE_OK, "a complete listing of a new script (not editable: refused)"),
    "f77c6adf603b": (WHOLE_OK, "a listing of a new text file the model meant to create"),
    # transcript text no model sent: our client never receives it
    "f7774a0f8a1e": (NOT_A_REPLY, "the user's `/run git diff` output, read as diffs"),
    "31a0a3580c1b": (NOT_A_REPLY, "aider's 'Retrying' messages spliced into a streamed "
                                  "listing resumed mid-line"),
}
# Replies refused at apply (see `refused_at_apply`), judged by hand, same keys
LONE_NO_OP = "refused: its one block changes nothing"
MADE_UP = "applies: a made-up file's double"
JUDGED_APPLY = {
    # aider applies a lone block whose REPLACE is its SEARCH (a change of nothing); we send
    # it back: the model learns its edit was a no-op (by design, issue 37 item 8)
    "151a3178ec48": (LONE_NO_OP, "its one block's REPLACE is its SEARCH"),
    "690cab0f0016": (LONE_NO_OP, "its one block's REPLACE is its SEARCH"),
    "e6206aa3df3d": (LONE_NO_OP, "its one block's REPLACE is its SEARCH"),
    "60795f3b7ad7": (LONE_NO_OP, "its one block's REPLACE is its SEARCH"),
    # block 5 (a no-op) is passed over; block 4's one SEARCH line is also inside block 1's
    # SEARCH, so the file made of the SEARCH texts holds it twice: no refusal of ours on
    # the real file, which aider's history does not hold
    "b1c882fa9cb8": (MADE_UP, "block 4's one SEARCH line is also in block 1's SEARCH"),
}
HISTORY = "tests/fixtures/chat-history.md"
GOLD = "tests/fixtures/chat-history-search-replace-gold.txt"
RULE = "@" * 20
ENTRY_RE = re.compile(r"^@@@ (#### .*) @{20}$")
BLOCK_RE = re.compile(r"^@@@ SEARCH: (.*) @{20}$")


@dataclass
class Entry:
    """What aider's parser made of one reply: its blocks, or the error it raised."""
    header: str
    blocks: list[tuple[str, str, str]] = field(default_factory=list)
    error: str = ""


def read(checkout: Path, rel: str) -> str:
    if (checkout / rel).is_file():
        return (checkout / rel).read_text(encoding="utf-8")
    return subprocess.run(["git", "--git-dir", str(checkout), "show", f"HEAD:{rel}"],
                          check=True, capture_output=True, text=True).stdout


def gold_entries(text: str) -> list[Entry]:
    entries, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = ENTRY_RE.match(lines[i])
        i += 1
        if not m:
            continue
        entry = Entry(m.group(1))
        entries.append(entry)
        error = []
        while i < len(lines) and not ENTRY_RE.match(lines[i]):
            b = BLOCK_RE.match(lines[i])
            if b:
                search, i = _until(lines, i + 1, lambda l: l == RULE)
                replace, i = _until(lines, i, lambda l: l == f"@@@ REPLACE {RULE}")
                entry.blocks.append((b.group(1), search, replace))
            elif lines[i] == f"@@@ SHELL {RULE}":
                _, i = _until(lines, i + 1, lambda l: l == f"@@@ ENDSHELL {RULE}")
            else:
                error.append(lines[i])
                i += 1
        entry.error = "\n".join(error).strip() if not entry.blocks else ""
    return entries


def _until(lines, i, stop) -> tuple[str, int]:
    start = i
    while not stop(lines[i]):
        i += 1
    return "".join(l + "\n" for l in lines[start:i]), i + 1


def sections(history: str) -> list[tuple[str, str]]:
    """(header, reply) as aider's test splits its history; the two sections aider skips
    (they discuss the block format itself) are skipped here too."""
    out = []
    for section in re.split(r"(?=####\s)", history):
        if "editblock_coder.py" in section or "test_editblock.py" in section:
            continue
        if section.strip():
            header = section.split("\n")[0].strip()
            out.append((header, "".join(section.splitlines(keepends=True)[1:])))
    return out


def _norm(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def ours(reply: str):
    parsed = parse_reply(reply)
    edits = settle_named({}, parsed.edits)   # no files known: prose-named fences drop out
    return [(e.path, e.search, e.replace, e.kind) for e in edits], parsed.problems


def same_path(mine: str | None, theirs: str) -> bool:
    # no file named: loop.edits.edits finds the one file the SEARCH matches, or refuses
    return mine is None or mine.strip() == theirs.strip()


def judge(header: str, reply: str, entry: Entry | None) -> tuple[str, str]:
    edits, problems = ours(reply)
    if entry is None:
        if edits and not problems:
            return "wrong", f"we find {len(edits)} edit(s) where aider found none"
        return "no edit (agree)", ""
    if entry.error:
        if problems or not edits:
            return "refused", "aider refused too"
        return "applied, aider refused", f"aider: {entry.error.splitlines()[-1]}"
    if problems:
        return "refused", problems[0][:160]
    theirs = [(p, _norm(s), _norm(r)) for p, s, r in entry.blocks]
    if len(edits) == len(theirs) and all(
            k == "replace" and same_path(p, tp) and s == ts and r == tr
            for (p, s, r, k), (tp, ts, tr) in zip(edits, theirs)):
        refused = refused_at_apply(theirs) if any(no_op(s, r) for _, s, r in theirs) else ""
        if refused:
            return "refused at apply", refused
        return "applied correctly", ""
    return "wrong", f"ours {[(p, k) for p, _, _, k in edits]} vs aider {[p for p, _, _ in theirs]}"


def no_op(search: str, replace: str) -> bool:
    return bool(search.strip()) and [l.rstrip() for l in search.splitlines()] == \
        [l.rstrip() for l in replace.splitlines()]


def refused_at_apply(blocks: list[tuple[str, str, str]]) -> str:
    """For a reply holding a block that changes nothing (aider applies it, changing nothing):
    apply aider's blocks (the same as ours) with loop.edits to files made of their SEARCH
    texts, in order, so that each block finds its text as aider's did: why we refuse, or ""
    (beside real blocks the no-op is passed over and noted). The files are made up (aider's
    history has only the replies), so only these replies are applied: a made-up file can
    hold a SEARCH text twice where the real one did not."""
    files: dict[str, str] = {}
    current: dict[str, str] = {}
    for path, search, replace in blocks:
        path = path.strip()
        search = search + "\n" if search and not search.endswith("\n") else search
        replace = replace + "\n" if replace and not replace.endswith("\n") else replace
        text = current.get(path)
        if not search.strip():
            if text is None:
                current[path] = replace
            continue
        if text is None or search not in text:
            gap = f"# gap {len(files.get(path, ''))}\n"
            files[path] = files.get(path, "") + gap + search
            text = (text or "") + gap + search
        current[path] = text.replace(search, replace, 1)
    edits = [Edit(path.strip(), "replace", s, r, index=i + 1)
             for i, (path, s, r) in enumerate(blocks)]
    outcome = try_edits(files, edits, lambda path: None)
    return outcome.failures[0][:160] if outcome.failures else ""


def main(argv: list[str]) -> int:
    dump = Path(argv.pop(argv.index("--dump") + 1)) if "--dump" in argv else None
    argv = [a for a in argv if a != "--dump"]
    if len(argv) != 1 or not Path(argv[0]).exists():
        print("usage: python benchmarks/real_replies.py PATH-TO-AIDER-CHECKOUT [--dump DIR]",
              file=sys.stderr)
        return 2
    checkout = Path(argv[0])
    entries = gold_entries(read(checkout, GOLD))
    counts, notes, pending = Counter(), [], list(entries)
    for header, reply in sections(read(checkout, HISTORY)):
        entry = None
        if pending and pending[0].header == header and _belongs(pending[0], reply):
            entry = pending.pop(0)
        if entry is None and "<<<<<<< SEARCH" not in reply and "```" not in reply:
            continue
        verdict, why = judge(header, reply, entry)
        key = hashlib.sha1(reply.encode()).hexdigest()[:12]
        if verdict == "wrong" and key in JUDGED:
            verdict, why = JUDGED[key]
        if verdict == "refused at apply" and key in JUDGED_APPLY:
            verdict, why = JUDGED_APPLY[key]
        counts[verdict] += 1
        if verdict not in ("applied correctly", "no edit (agree)", "refused") \
                or (verdict == "refused" and why != "aider refused too"):
            notes.append(f"- {verdict}: {header[5:70]!r}: {why}")
            if dump:   # to read by hand: the reply and what we made of it
                dump.mkdir(parents=True, exist_ok=True)
                edits, problems = ours(reply)
                (dump / f"{len(notes):03d}-{verdict.split()[0].strip(',')}.md").write_text(
                    f"{header}\n{reply}\n\n=== ours\n{problems}\n" + "\n".join(
                        f"--- {p} ({k})\n{s}\n+++\n{r}" for p, s, r, k in edits))
    blocks = sum(len(e.blocks) for e in entries)
    print(f"## Real replies: aider's chat history ({len(entries)} replies with a verdict "
          f"from aider's parser, {blocks} blocks)\n")
    print("| outcome | replies |\n|---|---:|")
    for name in ("applied correctly", WHOLE_OK, MADE_UP, "refused", LONE_NO_OP,
                 "refused at apply", "applied, aider refused", "wrong",
                 "no edit (agree)", NOT_A_REPLY):
        print(f"| {name} | {counts[name]} |")
    if pending:
        print(f"\n{len(pending)} of aider's verdicts were not matched to a reply")
    print("\n" + "\n".join(notes))
    return 1 if counts["wrong"] else 0


def _belongs(entry: Entry, reply: str) -> bool:
    if entry.blocks:   # replies under one header (repeated requests) differ in their blocks
        return "SEARCH" in reply and all(s in reply and r in reply for _, s, r in entry.blocks)
    first = next((l for l in entry.error.splitlines() if l.strip()), "")
    return first in reply


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
