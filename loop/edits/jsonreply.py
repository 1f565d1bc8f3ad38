"""The structured reply: one JSON object, its shape enforced by the server.

The request carries `response_format={"type": "json_schema", ...}` (llama.cpp, vLLM, Ollama
and OpenAI accept it), so even a small model's reply is valid JSON with the keys we need:

    {"description": "...", "set": [{"name": "DEPTH", "value": "8"}],
     "edits": [{"file": "train.py", "search": "...", "replace": "..."}]}

`set` changes module-level numeric constants by name (the schema lists the editable files'
UPPER_CASE ones): most ideas a small model has are such a change, and naming a constant
cannot fail the way copying its line can. Each becomes an ordinary edit of its line.
An empty `search` with `replace` holding the whole new text replaces the file. A reply that
is no such object (a server that ignored the schema) is read as text instead, by the
ordinary parser: a good idea is not lost to formatting. Pure text in, `Edit`s out."""
from __future__ import annotations

import json
import re

from loop.edits.constant_lines import CONSTANT, POWER
from loop.edits.describe import clean_description
from loop.edits.parse import Edit, ParsedReply, parse_reply
from loop.edits.thinking import split_thinking
from loop.untrusted import parse_number

NUMBER = re.compile(r"[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                    r"|2\s*\*\*\s*\d+")

FENCED_RE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def schema(files: dict[str, str]) -> dict:
    """The `json_schema` part of response_format; `file` is one of the editable files."""
    file = {"type": "string", "enum": sorted(files)} if files else {"type": "string"}
    edit = {"type": "object", "additionalProperties": False,
            "required": ["file", "search", "replace"],
            "properties": {"file": file, "search": {"type": "string"},
                           "replace": {"type": "string"}}}
    properties: dict = {"description": {"type": "string"}}
    names = sorted(constant_lines(files))
    if names:
        properties["set"] = {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "value"],
            "properties": {"name": {"type": "string", "enum": names},
                           "value": {"type": "string"}}}}
    properties["edits"] = {"type": "array", "items": edit}
    return {"name": "edit", "strict": True,
            "schema": {"type": "object", "additionalProperties": False,
                       "required": list(properties), "properties": properties}}


def constant_lines(files: dict[str, str]) -> dict[str, tuple[str, str, str, str]]:
    """NAME -> (file, its line, the line before its value, the line after it) for the
    editable Python files' module-level numeric UPPER_CASE constants (the first file that
    defines a name, in path order)."""
    out: dict[str, tuple[str, str, str, str]] = {}
    for path in sorted(p for p in files if p.endswith(".py")):
        for m in [*CONSTANT.finditer(files[path]), *POWER.finditer(files[path])]:
            line, at = m.group(0), m.start()
            out.setdefault(m["name"], (path, line, line[:m.start("value") - at],
                                       line[m.end("value") - at:]))
    return out


def _value_of(path: str, line: str, head: str, tail: str) -> str:
    return line[len(head):len(line) - len(tail)]


def _same_number(a: str, b: str) -> bool:
    """Whether two values are one number; a current value this engine cannot read (the
    code's own `2**5000`) is no value a reply could repeat."""
    try:
        current = parse_number(b)
    except ValueError:
        return False
    return parse_number(a) == current


def _unreadable(value: str) -> str | None:
    """Why `value` is no number this engine reads (`2**4000000000`: beyond a float), or None.
    It is read, never evaluated (loop/untrusted.py)."""
    try:
        parse_number(value)
    except ValueError as exc:
        return f"{value[:40]!r} is not a number this engine reads: {exc}"
    return None


def _set_edits(items, files: dict[str, str],
               original: dict[str, str] | None = None) -> tuple[list[Edit], list[str]]:
    """`set`'s {name, value} pairs as edits of the constants' lines. In a repair turn
    (`original`: the files before the proposal's first turn) a pair that an earlier turn
    already applied, resent with the rest of the reply, is skipped, not refused."""
    known = constant_lines(files)
    before = constant_lines(original) if original is not None else known
    edits, problems = [], []
    for n, item in enumerate(items if isinstance(items, list) else [], start=1):
        name = item.get("name") if isinstance(item, dict) else None
        value = str(item.get("value", "")).strip() if isinstance(item, dict) else ""
        if name not in known:
            problems.append(f"set {n}: {name!r} is not a constant of the editable files "
                            f"(they are: {', '.join(sorted(known)) or 'none'}); change other "
                            f"code with `edits`")
        elif not NUMBER.fullmatch(value):
            problems.append(f"set {n}: {name} = {value!r} is not a number; write the value "
                            f"as Python writes it (e.g. 8, 0.003, 3e-4)")
        elif (unread := _unreadable(value)) is not None:
            problems.append(f"set {n}: the value {unread}")
        elif _same_number(value, _value_of(*known[name])):
            if name in before and not _same_number(value, _value_of(*before[name])):
                continue    # set by an earlier turn of this proposal: a resend, not a no-op
            problems.append(f"set {n}: {name} is {value} already in the current code: "
                            f"propose a change that differs from it")
        else:
            path, line, head, tail = known[name]
            edits.append(Edit(path, "replace", line + "\n", head + value + tail + "\n",
                              index=n, source="json set"))
    return edits, problems


def parse_json_reply(text: str, files: dict[str, str],
                     original: dict[str, str] | None = None) -> ParsedReply:
    """The JSON object's edits; a reply that is no JSON object is parsed as text. `files` are
    the code as the earlier turns left it, `original` the code the proposal started from."""
    body = split_thinking(text)[1].strip()
    fenced = FENCED_RE.match(body)
    body = fenced.group(1) if fenced else body
    try:
        data = json.loads(body[body.index("{"):body.rindex("}") + 1])
    except ValueError as exc:
        parsed = parse_reply(text)
        if not parsed.edits and not parsed.problems:
            why = "it holds no JSON object" if "{" not in body else f"invalid JSON: {exc}"
            parsed.problems.append(f"no edit found in the reply ({why}): reply with one JSON "
                                   f"object with `description` and `edits`")
        return parsed
    if not isinstance(data, dict):
        return ParsedReply(None, [], ["the reply is JSON but not an object with `description` "
                                      "and `edits`"])
    raw = data.get("description")
    description = clean_description(raw) if isinstance(raw, str) and raw.strip() else None
    edits, problems = _set_edits(data.get("set", []), files, original)
    items = data.get("edits")
    for n, item in enumerate(items if isinstance(items, list) else [], start=len(edits) + 1):
        if not (isinstance(item, dict) and all(isinstance(item.get(k), str)
                                               for k in ("file", "search", "replace"))):
            problems.append(f"edit {n} is not an object with the strings `file`, `search` "
                            f"and `replace`")
            continue
        path, search, new = item["file"].strip(), item["search"], item["replace"]
        whole = not search.strip() and path in files and bool(files[path].strip())
        if whole and not new.endswith("\n"):
            new += "\n"
        edits.append(Edit(path, "whole" if whole else "replace", "" if whole else search,
                          new, index=n, source="json whole file" if whole else "json"))
    if not isinstance(items, list) and not edits:
        problems.append("the JSON object has no `edits` list")
    return ParsedReply(description, edits, problems)
