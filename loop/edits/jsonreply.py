"""The structured reply: one JSON object, its shape enforced by the server.

The request carries `response_format={"type": "json_schema", ...}` (llama.cpp, vLLM, Ollama
and OpenAI accept it), so even a small model's reply is valid JSON with the keys we need:

    {"description": "...", "edits": [{"file": "train.py", "search": "...", "replace": "..."}]}

An empty `search` with `replace` holding the whole new text replaces the file. A reply that
is no such object (a server that ignored the schema) is read as text instead, by the
ordinary parser: a good idea is not lost to formatting. Pure text in, `Edit`s out."""
from __future__ import annotations

import json
import re

from loop.edits.parse import Edit, ParsedReply, clean_description, parse_reply
from loop.edits.thinking import split_thinking

FENCED_RE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def schema(files: dict[str, str]) -> dict:
    """The `json_schema` part of response_format; `file` is one of the editable files."""
    file = {"type": "string", "enum": sorted(files)} if files else {"type": "string"}
    edit = {"type": "object", "additionalProperties": False,
            "required": ["file", "search", "replace"],
            "properties": {"file": file, "search": {"type": "string"},
                           "replace": {"type": "string"}}}
    return {"name": "edit", "strict": True,
            "schema": {"type": "object", "additionalProperties": False,
                       "required": ["description", "edits"],
                       "properties": {"description": {"type": "string"},
                                      "edits": {"type": "array", "items": edit}}}}


def parse_json_reply(text: str, files: dict[str, str]) -> ParsedReply:
    """The JSON object's edits; a reply that is no JSON object is parsed as text."""
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
    edits, problems = [], []
    items = data.get("edits")
    for n, item in enumerate(items if isinstance(items, list) else [], start=1):
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
    if not isinstance(items, list):
        problems.append("the JSON object has no `edits` list")
    return ParsedReply(description, edits, problems)
