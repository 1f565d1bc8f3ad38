"""The registry of edit formats: how the model is asked to write its change, and how its
reply is read. One entry per format, its prompt text beside its parser (aider's habit), so
a format can be read, tuned and measured in one place (benchmarks/edits.py --format).

    fmt = FORMATS.get("search_replace")
    fmt.instructions(files)              # the "Reply format" part of the system prompt
    fmt.response_format(files)           # what the request carries (None: nothing)
    parsed = read_reply(fmt, text, sent, files)

The example in each format's instructions is made of real lines of the current editable
file: a placeholder (`exact lines copied from the current file`) is what small models copy
into SEARCH. A reply that echoes our own messages (an error, the journal) is told apart
from an edit (`echoed`). Pure text, no I/O."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from loop.edits.edits import settle_named
from loop.edits.jsonreply import constant_lines, parse_json_reply, schema
from loop.edits.parse import REPLACE_RE, SEARCH_RE, ParsedReply, parse_reply
from loop.registry import Registry

DESCRIPTION_RULE = (
    "Start your reply with one line that begins `Description:` and says, in at most 100 "
    "characters, the change and why it should help; it becomes the commit message.")
ECHO_MIN_CHARS = 16    # shorter lines ('```python', 'train.py') are echoed by every reply


@dataclass(frozen=True)
class EditFormat:
    name: str
    instructions: Callable[[dict[str, str]], str]   # files -> the reply format, with example
    parse: Callable[..., ParsedReply]   # (text, files, original files or None)
    fix: str                    # the repair turn's request, after the error
    no_edits: str               # when a reply holds no edit at all
    structured: bool = False    # the request carries a JSON schema (response_format)
    # after a reply cut off at max_tokens: how to answer shorter in this format
    shorter: str = ("Reply again, shorter: the `Description:` line, then only the "
                    "SEARCH/REPLACE blocks, each as small as possible. Do not repeat whole "
                    "files.")

    def response_format(self, files: dict[str, str]) -> dict | None:
        return {"type": "json_schema", "json_schema": schema(files)} if self.structured \
            else None


# -- the example: real lines of the file -------------------------------------------------------

CONSTANT_RE = re.compile(r"^(?P<head>\s*[A-Za-z_]\w*\s*=\s*)(?P<value>\d[\d_]*(?:\.\d*)?"
                         r"(?:[eE][-+]?\d+)?)(?P<tail>\s*(?:#.*)?)$")


@dataclass(frozen=True)
class Example:
    path: str
    search: str                 # one real line of the file, unique in it
    replace: str                # that line changed (a constant doubled), or with a line added
    description: str            # what the example does, in a description's words
    name: str = ""              # the constant it sets, and its new value (a constant's line)
    value: str = ""

    @property
    def lang(self) -> str:
        return "python" if self.path.endswith(".py") else ""


def example(files: dict[str, str]) -> Example | None:
    """A line of the first editable file to show the format with: a numeric constant
    (`LR = 3e-4` -> `LR = 0.0006`), else a short unique line with a comment added."""
    for path in sorted(files, key=lambda p: (not p.endswith(".py"), p)):
        lines = files[path].splitlines()
        unique = [l for l in lines if l.strip() and lines.count(l) == 1 and len(l) <= 80]
        for line in unique:
            m = CONSTANT_RE.match(line)
            value = m["value"].replace("_", "") if m else ""
            if m and float(value) != 0:       # 0 doubled would be an example of a no-op
                doubled = f"{float(value) * 2:g}" if any(c in value for c in ".eE") \
                    else str(int(value) * 2)
                name = m["head"].split("=")[0].strip()
                return Example(path, line, m["head"] + doubled + m["tail"],
                               f"set {name} to {doubled}", name, doubled)
        code = [l for l in unique if not l.lstrip().startswith(("#", '"', "'"))]
        if code:
            line = code[0]
            indent = line[:len(line) - len(line.lstrip())]
            return Example(path, line, f"{line}\n{indent}# a line added below it",
                           "add a comment line")
    return None


def _illustration(ex: Example) -> str:
    return (f"For example, a change of the line `{ex.search.strip()}` of {ex.path} (an "
            f"illustration of the format, not a suggestion):")


# -- search_replace ----------------------------------------------------------------------------

def _search_replace_instructions(files: dict[str, str]) -> str:
    ex = example(files)
    shown = "" if ex is None else (
        f"{_illustration(ex)}\n\n{ex.path}\n```{ex.lang}\n<<<<<<< SEARCH\n{ex.search}\n"
        f"=======\n{ex.replace}\n>>>>>>> REPLACE\n```\n\n")
    return (f"Reply format:\n{DESCRIPTION_RULE} Then write the change as one or more "
            f"SEARCH/REPLACE blocks, each under the file's path on a line of its own. "
            f"{shown}"
            f"- SEARCH must copy the current lines exactly (indentation included) and match "
            f"one place only; include a few unchanged lines around the change if needed. "
            f"Never elide lines with \"...\".\n"
            f"- REPLACE holds the new lines: it must differ from SEARCH.\n"
            f"- Use several small blocks rather than one huge one. To create a new editable "
            f"file, use an empty SEARCH section.\n"
            f"- Nothing else is needed: no explanations after the blocks.")


# -- whole_file --------------------------------------------------------------------------------

def _whole_file_instructions(files: dict[str, str]) -> str:
    path = sorted(files, key=lambda p: (not p.endswith(".py"), p))[0] if files else "train.py"
    lines = [l for l in files.get(path, "").splitlines() if l.strip()]
    first, last = (_short(lines[0]), _short(lines[-1])) if lines else ("", "")
    ends = f" from its first line (`{first}`) to its last (`{last}`)" if lines else ""
    lang = "python" if path.endswith(".py") else ""
    only = (" With one editable file, the fence alone is enough."
            if len(files) == 1 else "")
    return (f"Reply format:\n{DESCRIPTION_RULE} Then, for each file you change, its path "
            f"alone on a line (e.g. `{path}`) and under it the file's complete new text in one "
            f"```{lang} fence: every line,{ends}, with your change made in it. Never elide "
            f"lines with \"...\" or a comment such as \"rest unchanged\".{only}\n"
            f"- Nothing else is needed: no explanations after the file.")


def _short(line: str, limit: int = 60) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _parse_whole_file(text: str, files: dict[str, str], original=None) -> ParsedReply:
    """As any reply, and a fence that names no editable file is the one editable file's
    new text when there is exactly one (the format asks for nothing else)."""
    parsed = parse_reply(text)
    if len(files) == 1 and parsed.edits and all(e.named for e in parsed.edits):
        only = next(iter(files))
        parsed.edits = [replace(e, path=only, named=(), source="whole file")
                        if not any(w == only or only.endswith("/" + w) for w in e.named)
                        and e.kind == "whole" else e for e in parsed.edits]
    return parsed


# -- json --------------------------------------------------------------------------------------

def _json_instructions(files: dict[str, str]) -> str:
    import json
    ex = example(files)
    constants = constant_lines(files)
    if ex is None:
        shown = ""
    elif ex.name in constants:    # a constant: shown as `set`, the way that cannot misquote
        shown = f"{_illustration(ex)}\n\n" + json.dumps(
            {"description": ex.description, "set": [{"name": ex.name, "value": ex.value}],
             "edits": []}) + "\n\n"
    else:
        shown = f"{_illustration(ex)}\n\n" + json.dumps(
            {"description": ex.description, **({"set": []} if constants else {}), "edits": [
                {"file": ex.path, "search": ex.search + "\n", "replace": ex.replace + "\n"}]}) \
            + "\n\n"
    named = ("`set`: the module-level constants to change, each {\"name\", \"value\"} (the value "
             "as Python writes it); " if constants else "")
    return ("Reply format:\nReply with one JSON object (its shape is enforced): "
            "`description`: one line, at most 100 characters, the change and why it should "
            f"help (it becomes the commit message); {named}"
            "`edits`: a list of other changes to the code, each with "
            "`file` (the path), `search` (lines copied exactly from the current file, "
            "indentation included, matching one place only) and `replace` (the new lines; "
            "they must differ from `search`). An empty `search` with the complete new text "
            f"in `replace` replaces the whole file. {shown}"
            "Never elide lines with \"...\" in `search`.")


SEARCH_REPLACE = EditFormat(
    "search_replace", _search_replace_instructions,
    lambda text, files, original=None: parse_reply(text),
    "Fix this and reply with corrected SEARCH/REPLACE blocks.",
    "no edit found in the reply: write each change as a SEARCH/REPLACE block under the "
    "file's path (see the format in the instructions)")
WHOLE_FILE = EditFormat(
    "whole_file", _whole_file_instructions, _parse_whole_file,
    "Fix this and reply again with the file's complete new text under its path.",
    "no file found in the reply: write the complete new text of the file you change, "
    "in a fence under its path (see the format in the instructions)")
JSON = EditFormat(
    "json", _json_instructions, parse_json_reply,
    "Fix this and reply again with one JSON object: `description` and corrected `edits`.",
    "no edit found in the reply: put each change in `edits` as "
    "{\"file\", \"search\", \"replace\"}", structured=True,
    shorter="Reply again, shorter: `edits` with only the lines that change and a few around "
            "them in `search`, never the whole file.")

FORMATS = Registry("edit format", {f.name: f"loop.edits.formats:{f.name.upper()}"
                                   for f in (SEARCH_REPLACE, WHOLE_FILE, JSON)})
AUTO_FIRST, AUTO_FALLBACK = JSON, SEARCH_REPLACE   # `auto`: json, unless the server refuses


# -- reading a reply ---------------------------------------------------------------------------

def read_reply(fmt: EditFormat, text: str, sent: list[str], files: dict[str, str],
               original: dict[str, str] | None = None) -> ParsedReply:
    """The reply's edits in `fmt`; lines echoed from our own messages (`sent`: the prompt,
    the errors sent back) are no part of it: the error's closest lines are not an edit,
    nor a journal line the description."""
    clean, echoes = echoed(text, sent, files)
    parsed = fmt.parse(clean, files, original)
    if echoes:    # a fence the echo quoted (the error's closest lines) is not a listing
        parsed.edits = settle_named(files, parsed.edits)
    if echoes and not parsed.edits:
        parsed.problems.insert(0, (
            f"your reply repeats the text of my messages ({len(echoes)} line(s), e.g. "
            f"{echoes[0][:80]!r}) instead of giving an edit: do not copy the error or the "
            f"journal back; write the change itself"))
    return parsed


def echoed(text: str, sent: list[str], files: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with the lines it copies from `sent` blanked (but not lines of the code, nor
    lines inside a SEARCH/REPLACE block), and those lines."""
    code = {l.strip() for t in files.values() for l in t.splitlines()}
    ours = {l.strip() for m in sent for l in m.splitlines()
            if len(l.strip()) >= ECHO_MIN_CHARS} - code
    if not ours:
        return text, []
    lines, found, in_block = text.split("\n"), [], False
    for k, line in enumerate(lines):
        if SEARCH_RE.match(line):
            in_block = True
        elif REPLACE_RE.match(line):
            in_block = False
        elif not in_block and line.strip() in ours:
            found.append(line.strip())
            lines[k] = ""
    return "\n".join(lines), found
