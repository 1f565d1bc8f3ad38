"""After each run: is the engine's own state as the engine left it?

Without a sandbox an experiment runs as the same user as the engine, so it can reach the
journal, results.tsv and the repository's config and refs. The engine cannot stop that
(a sandbox can); it notices, undoes it from what it holds in memory, and records the run
as tampering."""
from __future__ import annotations

import threading
from pathlib import Path

from loop.repo.gitsafe import RefSnapshot


class StateGuard:
    def __init__(self, workspace, journal, results_path: Path, expected_results,
                 lock=None):
        """`expected_results()`: results.tsv's text as the engine last wrote it; `lock`:
        held by whoever writes it (another thread may, while a run ends)."""
        self.workspace = workspace
        self.journal = journal
        self.results_path = Path(results_path)
        self.expected_results = expected_results
        self.lock = lock or threading.RLock()

    def watch(self) -> RefSnapshot:
        """For the loop with runs in flight at any time: one snapshot, kept current."""
        return self.workspace.watch()

    def after_run(self, before: RefSnapshot | None, label: str,
                  keep_watching: bool = False, tip: str | None = None) -> str | None:
        """Undo what the run changed outside its worktree; one line saying what, or None.
        Every check is made, whatever an earlier one found: what is left for later would be
        found at the end of the next run, and blamed on it. `tip`: where the loop's branch
        must be (None: not checked)."""
        notes = []
        if tip is not None:
            notes += self._branch(tip, label)
            switched = self.workspace.reattach()    # the loop's worktree stays on the branch
            if switched:
                notes.append(switched)
        # before None: refs and config were not watched (the sandbox keeps runs out of .git)
        if before is not None:
            notes += self.workspace.check_tamper(before, label, keep_watching)
        note = self.journal.verify()
        if note:
            notes.append(note)
        notes += self._results()
        if not notes:
            return None
        self.journal.write("tamper", run=label, changes=notes)
        return "tampered: " + "; ".join(notes)

    def _branch(self, tip: str, label: str) -> list[str]:
        """A run must not move the loop's branch (a `git commit` from inside the experiment):
        it goes back, and what the run committed stays retrievable as a ref."""
        ws = self.workspace
        now = ws.tip()
        if now == tip:
            return []
        iteration = label.split("-", 1)[0]
        ref = ws.keep_ref(f"tampered-{iteration}", now)
        ws.advance(tip, now)
        return [f"the run moved branch {ws.branch} (its commit is kept as {ref})"]

    def _results(self) -> list[str]:
        with self.lock:
            return self._check_results()

    def _check_results(self) -> list[str]:
        want = self.expected_results()
        if want is None:
            return []
        try:
            have = self.results_path.read_text()
        except OSError:
            have = None
        if have == want:
            return []
        tmp = self.results_path.with_name(".results.restore")
        tmp.write_text(want)
        tmp.chmod(0o644)
        tmp.replace(self.results_path)
        return [f"results.tsv was {'deleted' if have is None else 'changed'}; restored"]
