"""After each run: is the engine's own state as the engine left it?

Without a sandbox an experiment runs as the same user as the engine, so it can reach the
journal, results.tsv and the repository's config and refs. The engine cannot stop that
(a sandbox can); it notices, undoes it from what it holds in memory, and records the run
as tampering."""
from __future__ import annotations

from pathlib import Path

from loop.repo.gitsafe import RefSnapshot


class StateGuard:
    def __init__(self, workspace, journal, results_path: Path, expected_results):
        """`expected_results()`: results.tsv's text as the engine last wrote it."""
        self.workspace = workspace
        self.journal = journal
        self.results_path = Path(results_path)
        self.expected_results = expected_results

    def watch(self) -> RefSnapshot:
        """For the loop with runs in flight at any time: one snapshot, kept current."""
        return self.workspace.watch()

    def after_run(self, before: RefSnapshot | None, label: str,
                  keep_watching: bool = False) -> str | None:
        """Undo what the run changed outside its worktree; one line saying what, or None."""
        # before None: refs and config were not watched (the sandbox keeps runs out of .git)
        notes = [] if before is None else self.workspace.check_tamper(before, label,
                                                                      keep_watching)
        note = self.journal.verify()
        if note:
            notes.append(note)
        notes += self._results()
        if not notes:
            return None
        self.journal.write("tamper", run=label, changes=notes)
        return "tampered: " + "; ".join(notes)

    def _results(self) -> list[str]:
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
