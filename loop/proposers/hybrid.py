"""The hybrid night: the LLM proposes changes to the code, the tuner tunes its constants.

Two proposers composed, not copied: an LLMProposer (loop/proposers/llm.py) and a
TuneProposer (loop/proposers/tune.py), both shown the same context: the kept code, every
attempt. Who proposes an iteration is decided by the policy, from the iteration's number
alone (so a resumed night, even after kill -9, asks the same one again):

  * `llm_every: k` (the default, k = 4): the LLM proposes iterations 1, k + 1, 2k + 1, ...
    and the tuner the k - 1 between. The LLM goes first: a code change kept early is
    tuned for longer. k = 1 is an LLM night, k = 0 a tuner night.

The tuner tunes whatever code is kept, the LLM's included: it learns from the points
measured on earlier code as loop/proposers/epochs.py says (moved by the kept change's gain,
dropped when the change altered how a searched constant is used). When the tuner has
nothing left to propose (no searched constant, or every point tried), the LLM proposes
instead. Each proposal says who made it (`Proposal.proposer`): results.tsv's `proposer`
column, the iteration's MLflow tag `proposer`, the journal."""
from __future__ import annotations

from loop.proposers.base import Context, Proposal, Proposer
from loop.proposers.axes import SpaceExhausted

LLM, TUNE = "llm", "tune"


def chooses(iteration: int, llm_every: int) -> str:
    """Who proposes iteration `iteration` (1, 2, ...) under `llm_every: k`."""
    if llm_every <= 0:
        return TUNE
    return LLM if (iteration - 1) % llm_every == 0 else TUNE


class HybridProposer:
    def __init__(self, llm: Proposer, tuner: Proposer, llm_every: int = 4):
        self.llm, self.tuner, self.llm_every = llm, tuner, llm_every

    def propose(self, context: Context) -> Proposal:
        who = chooses(context.iteration, self.llm_every)
        if who == TUNE:
            try:
                proposal = self.tuner.propose(context)
            except SpaceExhausted:
                if self.llm_every <= 0:
                    raise
                who = LLM          # nothing left to tune on this code: the LLM's turn
        if who == LLM:
            proposal = self.llm.propose(context)
        proposal.proposer = who
        return proposal

    # the engine's hooks, for the LLM (the tuner needs none)
    def cancel(self) -> None:
        cancel = getattr(self.llm, "cancel", None)
        if cancel is not None:
            cancel()

    def check_endpoint(self, *args, **kwargs):
        check = getattr(self.llm, "check_endpoint", None)
        return check(*args, **kwargs) if check is not None else None
