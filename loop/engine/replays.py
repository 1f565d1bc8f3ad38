"""A candidate whose base is no longer the tip, carried through: its change made again on the
tip and measured there (`replay`); when it does not apply there, or repeats a change on the
tip, the proposer asked again for the same iteration (`repropose`), and its answer staged
on the tip (`restage`). Steps of the `Loop` (loop/engine/night.py), on its state; what
follows each is the candidate's state machine's to say (loop/engine/lifecycle.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from loop.engine.lifecycle import Candidate, Repropose, Step
from loop.engine.staging import Staged
from loop.judge.judge import Verdict
from loop.proposers.base import Proposal, Redo

if TYPE_CHECKING:   # the loop calls these with itself
    from loop.engine.night import Loop


def replay(loop: Loop, cand: Candidate, verdict: Verdict | None) -> Step:
    """The candidate's base is no longer the tip: make its change again on the tip and
    measure it again there (a gain on an older base is not a gain on the new one). When
    the change does not apply there, the proposer is asked again on the tip."""
    rec = cand.rec
    staged = loop.stager.again(cand, loop.tip)
    if staged.same_as is not None:        # never run twice: see Candidate.replayed
        return cand.replayed(None, loop.tip, verdict, cannot_ask=cannot_ask(loop),
                             same_as=staged.same_as)
    if staged.commit:
        loop.stager.keep_old(cand)
        loop.parts.site.journal.write("replay", iteration=rec.iteration,
                                      old_commit=rec.commit, commit=staged.commit,
                                      parent=loop.tip, samples=rec.samples)
        if verdict:
            notes = f" ({staged.notes})" if staged.notes else ""
            loop.out(f"      iteration {rec.iteration} would be kept, but the best moved: "
                     f"replayed onto {loop.tip[:7]}{notes}, measuring it again")
    step = cand.replayed(staged.commit or None, loop.tip, verdict, staged.problem or "",
                         staged.notes, cannot_ask(loop))
    if staged.commit:
        loop.stager.adopt(cand, rec.parent, staged.commit)
    return step

def cannot_ask(loop: Loop) -> str:
    """Why the proposer cannot be asked again now ("" when it can)."""
    if loop.stop is not None:
        return "the loop stopped before it could be proposed again"
    if loop.cost_reserved() >= (loop.config.max_cost_usd or float("inf")):
        return "the LLM cost budget leaves no room to propose it again"
    return ""

def repropose(loop: Loop, cand: Candidate, step: Repropose) -> None:
    """Its change does not apply to the tip: ask the proposer again, on the tip, for the
    same iteration (told what the change was); `restage` stages the answer."""
    rec = cand.rec
    loop.stager.keep_old(cand)
    cand.asking = step
    if step.same_as is not None:    # on the tip it repeats a change: ask for another
        loop.ask(rec.iteration)
        loop.out(f"      iteration {rec.iteration} was proposed on an older best; on the "
                 f"best now it is iteration {step.same_as}'s change: asking for another")
        return
    loop.ask(rec.iteration, Redo(rec.description, cand.patch, step.why,
                                  step.verdict.reason if step.verdict else ""))
    what = "would be kept, but its change" if step.verdict else "was proposed on an " \
        "older best, and its change"
    loop.out(f"      iteration {rec.iteration} {what} does not apply to the best now "
             f"({step.why}): proposing it again on {loop.tip[:7]}")

def restage(loop: Loop, cand: Candidate, base: str, program_sha: str,
            proposal: Proposal) -> None:
    """The proposer's answer for a candidate proposed again: staged on `base` (the tip
    when asked) and measured there from scratch, or the candidate ends saying why not."""
    step, cand.asking = cand.asking, None
    assert step is not None
    rec = cand.rec
    loop.cost += proposal.usage.cost_usd
    for key, value in vars(proposal.usage).items():
        rec.usage[key] = rec.usage.get(key, 0) + value
    staged = loop.stager.proposal(rec.iteration, base, proposal)
    if staged.same_as is not None:
        staged = Staged(problem=f"it repeats iteration {staged.same_as}'s change")
    if not staged.commit:
        return loop.carry_out(cand, cand.reproposed(None, base, step.verdict, step.why,
                                                     problem=staged.problem or "",
                                                     same_as=step.same_as))
    loop.parts.site.journal.write("replay", iteration=rec.iteration, old_commit=rec.commit,
                                  commit=staged.commit, parent=base, samples=rec.samples,
                                  description=proposal.description)
    cand.proposal = proposal
    next_step = cand.reproposed(staged.commit, base, step.verdict, step.why,
                                proposal.description, same_as=step.same_as)
    loop.stager.adopt(cand, base, staged.commit)
    loop.carry_out(cand, next_step)
