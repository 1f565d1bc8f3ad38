"""Editable files as text and back to the exact bytes: a Python file is read in the encoding
its PEP 263 coding line declares (`# -*- coding: latin-1 -*-`), anything else as UTF-8, and
bytes the codec cannot read survive as surrogates, so an unchanged file is written back byte
for byte. Pure: no I/O."""
from __future__ import annotations

import codecs
import re

# PEP 263: a comment on line 1 or 2 naming the source encoding
COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.M)


def codec_of(path: str, head: str) -> str:
    """The codec a file at `path` whose first lines are `head` is written in."""
    if path.endswith((".py", ".pyw")):
        m = COOKIE.search("\n".join(head.splitlines()[:2]))
        if m:
            try:
                return codecs.lookup(m[1]).name
            except LookupError:
                pass                # Python refuses the file itself: the run will say so
    return "utf-8"


def decode(path: str, data: bytes) -> str:
    head = data[:400].decode("latin-1")        # the cookie is ASCII in any codec Python allows
    return data.decode(codec_of(path, head), "surrogateescape")


def encode(path: str, text: str) -> bytes:
    codec = codec_of(path, text[:400])
    try:
        return text.encode(codec, "surrogateescape")
    except UnicodeEncodeError:      # a character the declared codec cannot hold: as Python
        return text.encode(codec, "backslashreplace")   # would read it in a string literal
