"""Which file a part of an LLM reply is about: file names in labels, prose, fence info.

Pure text. Used by `loop.edits.parse`; kept apart because telling a file name from a word
is its own job (so '0.1' and 'e.g.' are not files, but 'Makefile' above a fence may be)."""
from __future__ import annotations

import re

FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})\s*(.*)$")
# a file name has an extension starting with a letter (so '0.1' and 'e.g.' are not files)
PATH_TOKEN_RE = re.compile(r"^(?:/|~/)?(?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z][A-Za-z0-9]{0,7}$")
# alone on its line, a path needs no extension if it has a folder ('/etc/passwd', 'src/Makefile')
LABEL_ONLY_PATH_RE = re.compile(r"^(?:/|~/)?(?:[\w.-]+/)+[\w.-]*\w$")
# a word in prose that might be a file name ('train.py', 'src/model.py', 'Makefile')
NAME_WORD_RE = re.compile(r"^(?:[\w.-]+/)*[A-Za-z_][\w.-]*$")


def clean_path(token: str, label: bool = False) -> str | None:
    """A file path from a token like `train.py`, **a/train.py**, ./train.py:, or None."""
    token = token.strip().strip("*`'\"").rstrip(":").strip("*`'\"").strip()
    if token.startswith("./"):
        token = token[2:]
    ok = PATH_TOKEN_RE.match(token) or (label and LABEL_ONLY_PATH_RE.match(token))
    return token if token and ok else None


def path_label(line: str) -> str | None:
    """The path when a line is nothing but a file name (with markdown decoration):
    'train.py', '**train.py**', '### `train.py`', 'File: train.py', 'train.py:'."""
    s = line.strip().lstrip("#>").strip()
    s = re.sub(r"^(?:file(?:name|path)?|path)\s*[:=]\s*", "", s.strip("*_ "), flags=re.I)
    return clean_path(s, label=True) if s and " " not in s.strip("*`_ ") else None


def path_in_prose(line: str) -> str | None:
    """The one file name mentioned in a prose line ('Change `train.py` like so:')."""
    names = {p for p in (clean_path(t) for t in re.split(r"[\s,;()]+", line)) if p}
    return names.pop() if len(names) == 1 else None


def path_in_info(info: str) -> str | None:
    """A path in a fence's info string: ```python train.py, ```train.py, ```py:train.py,
    ```python title="train.py"."""
    for token in re.split(r"[\s:=]+", info.strip()):
        path = clean_path(token.strip('"\''))
        if path and "." in path.rsplit("/", 1)[-1]:
            return path
    return None


def label_above(lines, fence_open: int) -> str | None:
    for k in range(fence_open - 1, max(-1, fence_open - 3), -1):
        if lines[k].strip():
            return path_label(lines[k])
    return None


def names_above(lines, used, fence_open: int) -> tuple[tuple[str, ...], str]:
    """The words that could name a file on the line just above a fence, and the edit's
    source: a bare word ('Makefile') is a label, 'whole file'; a prose line ('Here is the
    updated `train.py`:') gives 'whole file named in prose'. loop.edits.edits keeps the words
    that are real files."""
    for k in range(fence_open - 1, max(-1, fence_open - 3), -1):
        if lines[k].strip():
            if used[k] or FENCE_RE.match(lines[k]):
                return (), ""
            words = [w.strip("*`'\"_:.,!?") for w in re.split(r"[\s,;()]+", lines[k])]
            words = [w for w in words if w]
            source = "whole file" if len(words) == 1 else "whole file named in prose"
            return tuple(dict.fromkeys(w for w in words if NAME_WORD_RE.match(w))), source
    return (), ""
