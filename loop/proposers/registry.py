"""Which proposer `proposer.kind` names, built from its config. The kinds, the one list of
them and what each needs, are loop/kinds.py's `PROPOSER_KINDS`.

Each kind is a factory `(ProposerConfig, seed) -> Proposer` (`make` in its module), imported
on first use (openai and optuna stay out of `autoresearch --help`). The hybrid composes two
registered kinds, the LLM and the tuner, so its factory is here. No proposer imports this
module."""
from __future__ import annotations

from loop.proposers.base import Proposer
from loop.proposers.hybrid import HybridProposer
from loop.kinds import PROPOSERS


def make_proposer(config, seed: int = 0) -> Proposer:
    """Build the proposer named by a ProposerConfig (an unknown kind: a UsageError)."""
    return PROPOSERS.get(config.kind)(config, seed)


def make_hybrid(config, seed: int = 0) -> HybridProposer:
    """The hybrid night (loop/proposers/hybrid.py): the LLM and the tuner, both built as
    their own kinds are, composed by `proposer.llm_every`."""
    return HybridProposer(PROPOSERS.get("llm")(config, seed), PROPOSERS.get("tune")(config, seed),
                          config.llm_every)
