"""Reasoning models' thinking, told apart from their answer in a message's content.

Pure text. The LLM proposer keeps the thinking (an MLflow artifact, a token count) and
parses only the answer; `loop.edits.parse.parse_reply` strips thinking too, so a draft edit
inside it is never applied whoever calls the parser."""
from __future__ import annotations

import re

TAGS = r"(think|thinking|reasoning)"
# servers put the thinking first: the content starts with the opening tag
LEADING_OPEN_RE = re.compile(rf"^\s*<{TAGS}>", re.IGNORECASE)
# a template that opened the tag in the prompt leaves a closing tag ending its line
# (not inside code: a string literal "</think>" in an edit does not end a line)
ORPHAN_CLOSE_RE = re.compile(rf"</{TAGS}>[ \t]*$", re.IGNORECASE | re.MULTILINE)
ANY_OPEN_RE = re.compile(rf"<{TAGS}>", re.IGNORECASE)


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, answer) of a reasoning model's message content.

    DeepSeek-R1, Qwen3 and the like, served by vLLM, Ollama or llama.cpp without a
    reasoning parser, start the content with <think>...</think>; chat templates that open
    the tag in the prompt leave only the closing tag; a reply cut off while thinking has
    only the opening one. Drafts inside the thinking are not the answer: they must never
    be parsed as edits. Tags elsewhere (a tokenizer's special tokens in code) are text."""
    lead = LEADING_OPEN_RE.match(text)
    if lead:
        close = re.compile(rf"</{lead.group(1)}>", re.IGNORECASE).search(text, lead.end())
        if close is None:                                   # cut off while thinking
            return text[lead.end():].strip(), ""
        return text[lead.end():close.start()].strip(), text[close.end():].lstrip("\n")
    orphan = ORPHAN_CLOSE_RE.search(text)
    if orphan and not ANY_OPEN_RE.search(text, 0, orphan.start()):
        return text[:orphan.start()].strip(), text[orphan.end():].lstrip("\n")
    return "", text
