"""What is in flight: the candidates by iteration (each one's state is its Candidate, see
loop/engine/lifecycle.py), the best's re-runs not back yet, and how many answers repeated
a change for an iteration not begun yet. Bookkeeping only: no git, journal or scheduler."""
from __future__ import annotations

from loop.engine.lifecycle import Candidate
from loop.words import RunKey


class Flight:
    def __init__(self) -> None:
        self._cands: dict[int, Candidate] = {}   # in the order they began
        self.best_runs: set[RunKey] = set()      # re-runs of the best not back yet
        self._repeats: dict[int, int] = {}       # iteration -> answers that repeated a change

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

    def by_iteration(self) -> list[Candidate]:
        return [self._cands[n] for n in sorted(self._cands)]

    def clear(self) -> None:
        self._cands.clear()

    def others(self, n: int) -> list[Candidate]:
        """The candidates in flight other than iteration n's, the baseline left out."""
        return [c for c in self._cands.values() if not c.baseline and c.iteration != n]

    def held(self) -> list[Candidate]:
        """Candidates whose runs are in, held for the best's re-runs: in the order they began."""
        return [c for c in self._cands.values() if c.held]

    def asking(self) -> list[Candidate]:
        """Candidates proposed again, waiting on the proposer's answer, by iteration."""
        return [c for c in self.by_iteration() if c.asking is not None]

    def repeated(self, n: int) -> int:
        """One more answer for iteration n repeated a change; how many have so far."""
        self._repeats[n] = self._repeats.get(n, 0) + 1
        return self._repeats[n]
