"""The one-line description of a reply: its `Description:` line, else its first sentence,
cleaned as it is recorded and becomes the commit subject.

Text in, one line out; which lines are prose (not an edit) is loop/edits/parse.py's call."""
from __future__ import annotations

import re

from loop import untrusted
from loop.edits.names import path_label
from loop.words import ITERATION_STATUSES

DESCRIPTION_RE = re.compile(
    r"^\W*(?:\d+[.)]\s*)?\W*(description|hypothesis|idea|change)\W*\s*[:：-]\s*(.+)$",
    re.IGNORECASE)
# what models put before a description: list markers ('1.', '-', '*'), quotes, emphasis,
# heading marks, and the label itself ('Description:', '**Description:**')
LEAD_RE = re.compile(r"^(?:\s*(?:(?:[-*+>#•]+|\d+[.)])(?=\s)|[\"'`“‘]+|\*\*|__)\s*)+")
LABEL_RE = re.compile(r"^(?:description|hypothesis|idea|change)\s*[*_`]*\s*[:：-]\s*[*_`]*\s*",
                      re.IGNORECASE)
DESCRIPTION_MAX = 120
# what a model copies from the history the prompt shows it (loop/proposers/prompts.py's
# `#3 discard 3.9 (gain -0.9): set DEPTH to 16 [not better (gain -0.94, p=0.999): ...]`):
# the attempt's number, status and figures before the text, the judge's verdict after it
HISTORY_LEAD = re.compile(r"^#\d+\s+(?:%s)\b[^:]*:\s*" % "|".join(sorted(ITERATION_STATUSES)))
VERDICT_TAIL = re.compile(r"\s*\[[^\[\]]*(?:\bgain [+-]|\bp=\d|stopped after one run|"
                          r"within noise|beyond noise)[^\[\]]*\]\s*$")


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
    `**Description:** ...`), nor a closing quote after it, nor what it copied of the
    history it was shown (an attempt's `#3 discard ...:` before it, a verdict after it);
    one line."""
    text = text.strip()
    for _ in range(4):   # '1. **Description:** "..."' peels in layers
        peeled = LABEL_RE.sub("", LEAD_RE.sub("", text)).strip()
        if peeled == text:
            break
        text = peeled
    text = VERDICT_TAIL.sub("", HISTORY_LEAD.sub("", text)).strip() or text
    text = one_line(text, limit)
    return text.rstrip("\"'`”’ ").strip() if text[-1:] in "\"'`”’" else text


def one_line(text: str, limit: int = DESCRIPTION_MAX) -> str:
    """Collapse whitespace, drop markdown emphasis, cut to `limit` characters; control
    characters written out visibly (loop/untrusted.py)."""
    text = untrusted.one_line(text, limit=1 << 30)
    text = re.sub(r"\s+", " ", text.replace("**", "").replace("`", "")).strip(" *_")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
