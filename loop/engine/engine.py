"""One night of the loop on one tag: where it runs is found before the tag's lock, its parts
are opened under the lock (loop/engine/parts.py), recovered from the journal
(loop/engine/resume.py: the journal is the truth; git, results.tsv and MLflow are brought up
to date before the loop carries on from the lowest free number), and handed to the `Loop`
(loop/engine/night.py). A full disk or a failing git stops it cleanly. Progress is
reported through the `Progress` it is given (loop/engine/progress.py)."""
from __future__ import annotations

import time

from loop.engine.budget import Stop
from loop.engine.night import Loop
from loop.engine.parts import LoopParts, locate, open_parts, state_dir
from loop.engine.progress import Progress
from loop.engine.resume import install_signals, recover
from loop.repo.gitsafe import GitError
from loop.run.faults import disk_full_message, is_disk_full
from loop.setup.config import Config
from loop.repo.taglock import TagLock

__all__ = ["Engine", "Loop", "Stop", "default_tag", "state_dir"]


def default_tag() -> str:
    return time.strftime("%b%d").lower()


class Engine:
    """One night of the loop on one tag: where it runs is found before the tag's lock
    (clear errors, nothing created), its parts are opened under the lock, recovered from
    the journal, and handed to the `Loop`; a full disk or a failing git stops it cleanly."""

    def __init__(self, config: Config, out=print, proposer=None, progress=None, backend=None):
        self.config = config
        self.out = out
        self.progress = progress or Progress(out)    # run/iteration lines, or a live panel
        self.tag = config.tag or default_tag()
        self.setup = locate(config, self.tag, out, self.progress, proposer, backend)
        self.repo_root, self.task_rel = self.setup.repo_root, self.setup.task_rel
        self.workspace, self.proposer = self.setup.workspace, self.setup.proposer
        self.parts: LoopParts | None = None     # opened under the lock
        self.loop: Loop | None = None

    def best_value(self) -> float | None:
        return self.parts.score.best_value() if self.parts else None

    def run(self) -> Stop:
        lock = TagLock(self.setup.dir / "lock")
        try:
            lock.acquire()
            install_signals()
            self.parts = open_parts(self.setup)
            self.loop = Loop(self.parts, recover(self.parts))
            return self.loop.run()
        except Exception as exc:
            if is_disk_full(exc):
                return self._stop_cleanly(Stop("disk_full", disk_full_message(exc), 1))
            if isinstance(exc, GitError):
                return self._stop_cleanly(Stop("git", git_failed_message(exc), 1))
            raise
        finally:
            # held while a proposal still runs (it ends with the process at the latest):
            # a second engine on this tag must not start beside its request
            if self.parts is not None:
                self.parts.proposals.when_idle(lock.release)
            else:
                lock.release()

    def _stop_cleanly(self, stop: Stop) -> Stop:
        """A full disk, or git failing (a stale lock file, a read-only .git): the journal
        (if it can still be written) says why; every step in flight is rolled back and
        redone on resume, as after a kill."""
        parts, loop = self.parts, self.loop
        for cleanup in (lambda: loop.interrupted() if loop else
                        parts.backend.close() if parts else None,
                        lambda: self.setup.journal.write("stop", reason=stop.reason,
                                                        message=stop.message),
                        lambda: parts.tracker.close("FAILED", 5.0) if parts else None):
            try:
                cleanup()
            except Exception:
                pass
        return stop


def git_failed_message(exc: GitError) -> str:
    """One line: what git said first, and that nothing is lost."""
    return f"stopped: {exc.first_line()}; the journal is intact; run the same command to resume"
