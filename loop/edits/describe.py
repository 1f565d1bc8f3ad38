"""The one-line description of a reply: its `Description:` line, else its first sentence,
cleaned as it is recorded and becomes the commit subject.

Text in, one line out; which lines are prose (not an edit) is loop/edits/parse.py's call."""
from __future__ import annotations

import re

from loop import untrusted
from loop.edits.names import path_label

DESCRIPTION_RE = re.compile(
    r"^\W*(?:\d+[.)]\s*)?\W*(description|hypothesis|idea|change)\W*\s*[:：-]\s*(.+)$",
    re.IGNORECASE)
# what models put before a description: list markers ('1.', '-', '*'), quotes, emphasis,
# heading marks, and the label itself ('Description:', '**Description:**')
LEAD_RE = re.compile(r"^(?:\s*(?:(?:[-*+>#•]+|\d+[.)])(?=\s)|[\"'`“‘]+|\*\*|__)\s*)+")
LABEL_RE = re.compile(r"^(?:description|hypothesis|idea|change)\s*[*_`]*\s*[:：-]\s*[*_`]*\s*",
                      re.IGNORECASE)
DESCRIPTION_MAX = 120


def description(prose: list[str]) -> str | None:
    """The 'Description: ...' line of the reply's prose, else its first sentence."""
    labelled: dict[str, str] = {}   # label -> its first line's text
    for line in prose:
        m = DESCRIPTION_RE.match(line.strip())
        if m and m.group(2).strip(" *_`"):
            labelled.setdefault(m.group(1).lower(), m.group(2))
    if labelled:   # `Description:` is the subject even below a `Hypothesis:` line
        return clean_description(labelled.get("description") or next(iter(labelled.values())))
    for line in prose:
        text = clean_description(line.strip(), limit=10_000)
        if re.fullmatch(r"(?:description|hypothesis|idea|change)s?:?", text, re.IGNORECASE):
            continue       # a heading ('### Description'): the text is on the next line
        if len(text) >= 8 and not path_label(text) and not text.endswith(":"):
            return one_line(re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0])
        if len(text) >= 8 and text.endswith(":") and " " in text:
            return one_line(text.rstrip(":"))
    return None


def clean_description(text: str, limit: int = DESCRIPTION_MAX) -> str:
    """The description as it is recorded and becomes the commit subject: no list marker,
    quote, emphasis or `Description:` label before it (`1. Description: ...`,
    `**Description:** ...`), nor a closing quote after it; one line."""
    text = text.strip()
    for _ in range(4):   # '1. **Description:** "..."' peels in layers
        peeled = LABEL_RE.sub("", LEAD_RE.sub("", text)).strip()
        if peeled == text:
            break
        text = peeled
    text = one_line(text, limit)
    return text.rstrip("\"'`”’ ").strip() if text[-1:] in "\"'`”’" else text


def one_line(text: str, limit: int = DESCRIPTION_MAX) -> str:
    """Collapse whitespace, drop markdown emphasis, cut to `limit` characters; control
    characters written out visibly (loop/untrusted.py)."""
    text = untrusted.one_line(text, limit=1 << 30)
    text = re.sub(r"\s+", " ", text.replace("**", "").replace("`", "")).strip(" *_")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
