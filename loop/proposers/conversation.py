"""One proposal's conversation with the LLM: each reply read, its edits applied to what
applied before, and what is said back when they do not (repair turns).

A reply cut off at max_tokens is asked again shorter (once); an edit that does not parse or
apply goes back with the error; a change already tried is refused before it costs a run.
Reasoning models' thinking is split off before parsing and never sent back. No request is
made here (loop/proposers/transport.py makes them, loop/proposers/llm.py drives the turns)."""
from __future__ import annotations

from dataclasses import dataclass, field

from loop.edits.edits import NOTHING_CHANGED, describe_failures, settle_named, try_edits
from loop.edits.formats import EditFormat, read_reply
from loop.edits.hunks import hunks
from loop.edits.thinking import split_thinking
from loop.proposers import prompts
from loop.proposers.base import Context, Usage
from loop.proposers.change import Change
from loop.proposers.transport import Call
from loop.proposers.tried import key_of_files, repeated


@dataclass
class Conversation:
    """What was said, what applied so far, and the latest error."""
    context: Context
    fmt: EditFormat
    messages: list[dict]
    waits: Call
    usage: Usage = field(default_factory=Usage)
    replies: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    working: dict[str, str] = field(default_factory=dict)  # blocks that applied, kept across turns
    done: list = field(default_factory=list)  # those blocks, to make the change again (a replay)
    noted: list[str] = field(default_factory=list)  # blocks passed over: they changed nothing
    description: str | None = None
    said: str | None = None          # the latest description the model gave
    error: str | None = None
    cut_off_before: bool = False

    def __post_init__(self):
        self.working = dict(self.context.files)

    def heard(self, text: str, reasoning: str) -> tuple[str, str]:
        """Record a reply: (its thinking, its answer); the thinking is not sent back."""
        thinking, text = split_thinking(text)
        thinking = "\n\n".join(t for t in (reasoning.strip(), thinking) if t)
        self.thoughts.append(thinking)
        self.replies.append(text)
        self.messages.append({"role": "assistant", "content": text})
        return thinking, text

    def cut_off(self, thinking: str, text: str, max_tokens: int) -> str | None:
        """A reply cut off at max_tokens: what to say back, None when it happened before."""
        still_thinking = bool(thinking) and not text.strip()
        self.error = (f"the reply was cut off at max_tokens={max_tokens}"
                      + (" while the model was still thinking (no answer yet): raise "
                         "proposer.max_tokens" if still_thinking else ""))
        if self.cut_off_before:
            return None
        self.cut_off_before = True
        return prompts.THINKING_REPAIR if still_thinking else \
            prompts.LENGTH_REPAIR.format(shorter=self.fmt.shorter)

    def read(self, text: str) -> tuple[dict[str, str], str]:
        """Apply the reply's edits: (the changed files, "") when the change is whole and
        new, else ({}, what to say back)."""
        context, fmt = self.context, self.fmt
        sent = [m["content"] for m in self.messages[:-1] if m["role"] != "assistant"]
        parsed = read_reply(fmt, text, sent, self.working, context.files)
        self.description = self.description or parsed.description
        self.said = parsed.description or self.said     # the record's, if nothing applies
        edits = settle_named(self.working, parsed.edits)
        resent_ok = self.working != context.files  # earlier blocks applied: resends are fine
        outcome = try_edits(self.working, edits, context.task, resent_ok)
        self.working.update(outcome.changed)
        self.done += outcome.done
        self.noted += outcome.noted
        failures = parsed.problems + outcome.failures
        if not edits and not failures:
            failures = [fmt.no_edits]
        changed = {p: t for p, t in self.working.items() if context.files.get(p) != t}
        earlier = [a for a in context.history if a.iteration != context.iteration]
        same = repeated(key_of_files(context.files, changed), parsed.description,
                        earlier) if not failures and changed else None
        if same is not None:     # refused before it costs a run: ask for another idea
            self.error = prompts.REPEAT.format(n=same.iteration, what=same.description,
                                               status=same.status)
            self.working, self.done, self.description = dict(context.files), [], None
            self.noted = []
            return {}, self.error
        if not failures and changed:
            return changed, ""
        self.error = describe_failures(failures or [NOTHING_CHANGED],
                                       len(edits) + len(parsed.problems))
        partial = (prompts.PARTIAL_APPLIED.format(n=outcome.applied)
                   if outcome.applied and failures else prompts.NONE_APPLIED)
        return {}, prompts.EDIT_REPAIR.format(error=self.error, partial=partial, fix=fmt.fix)

    def change(self, changed: dict[str, str]) -> Change:
        """The reply's blocks that applied, in order; a file that a whole-file block rewrote
        is made again by the hunks of its diff instead (the whole text would undo what was
        kept meanwhile)."""
        before = self.context.files
        whole = {e.path for e in self.done if e.kind == "whole"}
        kept = [e for e in self.done if e.path not in whole]
        derived = hunks({p: before[p] for p in whole if p in before},
                        {p: changed[p] for p in whole if p in changed})
        return Change(edits=tuple(kept + derived))

    def failure(self) -> str:
        """The error a proposal without an applicable edit records, in one line."""
        if self.error is None:
            return "no reply from the LLM"
        first = " ".join(l.strip(" -") for l in self.error.splitlines()[:3] if l.strip())
        n = len(self.replies)
        prefix = f"no applicable edit after {n} replies: " if n > 1 else ""
        return (prefix + first)[:400]
