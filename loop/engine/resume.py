"""Resume and interruption: make git, results.tsv and MLflow agree with the journal before
the loop goes on (`recover`), and leave them agreeing when it is stopped (`abandon`).
Plain functions over the loop's parts (loop/engine/parts.py)."""
from __future__ import annotations

import signal
import time

from loop.record import Record
from loop.engine.parts import LoopParts
from loop.run.process import kill_marked
from loop.run.spec import RUN_ID_ENV
from loop.words import resume_line


def recover(parts: LoopParts) -> float:
    """Make git, results.tsv and MLflow agree with the journal; returns the LLM cost so
    far. The scoreboard is rebuilt in the order measurements were made."""
    state, setup, workspace = parts.state, parts.setup, parts.setup.workspace
    for n, b in sorted(state.open_begins.items()):   # steps cut off: roll each back
        setup.out(f"resume: iteration {n} was interrupted; redoing it")
        if b.get("run_id") and kill_marked(f"{RUN_ID_ENV}={b['run_id']}"):
            setup.out("resume: killed the experiment processes the interrupted step left")
        abandon(parts, n, b.get("time", 0), b.get("commit", ""), b.get("run_id", ""))
    parent_id = (state.start or {}).get("parent_run_id")
    if parent_id and kill_marked(f"{RUN_ID_ENV}={parent_id}"):
        setup.out("resume: killed re-runs of the best the interrupted loop left")
    for rec in state.records:
        if rec.kept and rec.commit != rec.parent and workspace.tip() == rec.parent:
            workspace.advance(rec.commit, rec.parent)   # the keep's ref move was lost
            workspace.keep_ref(f"attempt-{rec.iteration}", rec.commit)
    _branch_as_journalled(parts)
    workspace.restore()
    cost = 0.0
    for item in state.measured:   # every measurement again, in the order it was made
        if isinstance(item, Record):
            parts.score.add(item)
            cost += item.usage.get("cost_usd", 0.0)
        else:
            parts.score.remeasured(item.get("value"), item.get("curve"))
    cost += state.dropped_cost
    parts.sink.restore(state.records)
    by_iter = {r.iteration: r for r in state.records}
    for n in state.untracked:                 # MLflow missed these: log them now
        rec = by_iter[n]
        patch = workspace.diff(rec.parent, rec.commit)[0] if rec.attempt_ref else ""
        parts.sink.track(rec, patch)
    if state.records:
        setup.out(resume_line(setup.tag, state.records, parts.task.metric.name,
                             parts.score.best_value()))
    return cost


def _branch_as_journalled(parts: LoopParts) -> None:
    """Commits on top of the last kept one that the journal does not know (a run's `git
    commit` whose check an interruption cut off): the branch goes back, they stay as a ref.
    Left there, every later attempt would be built and measured on them."""
    workspace, journal = parts.setup.workspace, parts.setup.journal
    kept = [r for r in parts.state.records if r.kept]
    tip = workspace.tip()
    if not kept or tip == kept[-1].commit or not workspace.is_ancestor(kept[-1].commit, tip):
        return
    want = kept[-1].commit
    ref = workspace.keep_ref(f"tampered-resume-{int(time.time())}", tip)
    workspace.advance(want, tip)
    note = (f"branch {workspace.branch} was past the last kept commit {want[:7]} by commits "
            f"the journal does not know ({tip[:7]}, kept as {ref}); put back")
    journal.write("tamper", run="resume", changes=[note])
    parts.setup.out(f"resume: {note}")


def abandon(parts: LoopParts, n: int, began: float, commit: str, run_id: str) -> None:
    """Roll back an open step: its attempt kept as `interrupted-<n>-<time>` (the redo
    reuses attempt-<n>), its MLflow run ended and deleted, `abandon` journalled."""
    if commit:
        parts.setup.workspace.keep_ref(f"interrupted-{n}-{int(began)}", commit)
    if run_id:
        parts.tracker.abandon(run_id)
    parts.setup.journal.write("abandon", iteration=n)


def install_signals() -> None:
    """SIGTERM (a scheduler, `kill`) and SIGHUP (the terminal closed) stop like Ctrl-C:
    cleanly, nothing lost."""
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            # a signal the user chose to ignore stays ignored: `nohup autoresearch run &`
            # must survive its terminal closing (SIGHUP), as nohup promises
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, handler)
    except ValueError:
        pass  # not the main thread (tests): Ctrl-C handling still applies
