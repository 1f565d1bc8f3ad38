"""What is in flight: the candidates by iteration (each one's state is its Candidate, see
loop/engine/lifecycle.py), the best's re-runs not back yet, the candidates waiting on the loop
rather than on a run (held for the best's re-runs, or proposed again and awaiting the answer),
and how many answers repeated a change for an iteration not begun yet. Bookkeeping only: no
git, journal or scheduler."""
from __future__ import annotations

from loop.engine.lifecycle import Candidate, Repropose
from loop.words import RunKey


class InFlight:
    def __init__(self) -> None:
        self._cands: dict[int, Candidate] = {}   # in the order they began
        self.best_runs: set[RunKey] = set()      # re-runs of the best not back yet
        self._repeats: dict[int, int] = {}       # iteration -> answers that repeated a change
        self._held: list[int] = []               # judged once the best's re-runs are in
        self._awaiting: dict[int, Repropose] = {}  # proposed again: the answer is awaited

    def __bool__(self) -> bool:
        return bool(self._cands)

    def __getitem__(self, n: int) -> Candidate:
        return self._cands[n]

    def get(self, n: int) -> Candidate | None:
        return self._cands.get(n)

    def numbers(self) -> set[int]:
        return set(self._cands)

    def begin(self, cand: Candidate) -> None:
        self._cands[cand.iteration] = cand

    def end(self, n: int) -> None:
        """Ended: a stop from here on has nothing of it to roll back."""
        del self._cands[n]
        self._awaiting.pop(n, None)

    def by_iteration(self) -> list[Candidate]:
        return [self._cands[n] for n in sorted(self._cands)]

    def clear(self) -> None:
        self._cands.clear()
        self._held.clear()
        self._awaiting.clear()

    def others(self, n: int) -> list[Candidate]:
        """The candidates in flight other than iteration n's, the baseline left out."""
        return [c for c in self._cands.values() if not c.baseline and c.iteration != n]

    def hold(self, cand: Candidate) -> None:
        """Its runs are in, but the best's re-runs are not: it is judged once they are."""
        self._held.append(cand.iteration)

    def release_held(self) -> list[Candidate]:
        """The candidates held for the best's re-runs, in the order they began; none held now."""
        held = [self._cands[n] for n in self._cands if n in self._held]
        self._held.clear()
        return held

    def await_answer(self, cand: Candidate, step: Repropose) -> None:
        """It was proposed again (see Repropose): its answer is awaited."""
        self._awaiting[cand.iteration] = step

    def awaits_answer(self, n: int) -> bool:
        return n in self._awaiting

    def answered(self, n: int) -> Repropose | None:
        """The step that asked again for iteration n, which waits no more."""
        return self._awaiting.pop(n, None)

    def awaiting(self) -> list[Candidate]:
        """Candidates proposed again, waiting on the proposer's answer, by iteration."""
        return [self._cands[n] for n in sorted(self._awaiting) if n in self._cands]

    def repeated(self, n: int) -> int:
        """One more answer for iteration n repeated a change; how many have so far."""
        self._repeats[n] = self._repeats.get(n, 0) + 1
        return self._repeats[n]
