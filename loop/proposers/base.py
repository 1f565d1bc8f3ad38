"""The proposer contract: `propose(context) -> Proposal`. Proposers never touch git.

The types every proposer shares; it imports no proposer (the factory is
loop/proposers/registry.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from loop.setup.task import Task

if TYPE_CHECKING:
    from loop.proposers.change import Change
    from loop.proposers.tried import ChangeKey


@dataclass
class Attempt:
    """One past iteration, as the proposer sees it (the research journal)."""
    iteration: int
    description: str
    status: str                 # keep | discard | crash | timeout | diverged | no_metric | bad_edit
    metric: float | None
    delta: float | None         # improvement over the best at the time (positive = better)
    reason: str = ""
    log_tail: str = ""          # tail of the experiment log, kept for failures
    change: ChangeKey | None = None  # what its diff did, to refuse a repeat (tried.py)


@dataclass
class Redo:
    """A change that no longer applies: another one was kept since it was proposed. The
    proposer is asked to make it again on the current files."""
    description: str
    patch: str                  # its diff against the older files it was proposed on
    why: str                    # why it does not apply to the current files
    verdict: str = ""           # what its runs showed there ("" when it never ran)


@dataclass
class Context:
    iteration: int
    task: Task
    files: dict[str, str]       # editable files at the best (last kept) state: path -> text
    program: str                # program.md, re-read this iteration
    history: list[Attempt]
    best_metric: float | None
    seed: int                   # proposer seed for this iteration (reproducible)
    noise_sd: float | None = None  # measured run-to-run noise of the metric, when known
    redo: Redo | None = None    # make this change again on `files` (see Redo)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0   # as reported; estimated (chars / 4) where servers report none
    requests: int = 0
    cost_usd: float = 0.0
    proposal_s: float = 0.0     # wall time the proposer took (the engine measures it)

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Proposal:
    description: str                             # one line; the commit subject
    files: dict[str, str] = field(default_factory=dict)  # changed files: path -> new text
    error: str | None = None                     # no applicable edit -> recorded as bad_edit
    usage: Usage = field(default_factory=Usage)
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> text (prompt, reply)
    reasoning: str = ""                          # a reasoning model's thinking, never parsed
    # the change as data, to make it again on a newer best (loop/proposers/change.py);
    # None: the engine derives it from the diff
    change: Change | None = None
    proposer: str = ""          # who made it, where proposers are composed (hybrid.py)


class Proposer(Protocol):
    def propose(self, context: Context) -> Proposal: ...


class ProposerFatal(Exception):
    """The proposer cannot go on (bad key, unknown model): stop the loop, say why."""

