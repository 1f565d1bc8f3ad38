"""The loop: baseline, then propose -> apply -> run -> judge -> keep or restore -> log.

With N slots (`workers`) several candidates are in flight at once: each is proposed against
the best at the time, its runs go to free slots (loop/engine/scheduler.py), and it is judged when
its runs are in. A would-be keep whose base is no longer the tip is replayed: its change is made
again on the tip and measured again there (when it does not apply, the proposer is asked
again on the tip). A change already in flight or judged on the same base is not run twice:
the proposer is asked again. The main thread owns git, the journal,
the judge and MLflow; runs and proposals finish on other threads and come back as events.

What a candidate does next is decided by its state machine (loop/engine/lifecycle.py) and the
judge (loop/judge/judge.py); `Loop` only carries the steps out. Its parts are built in one place
(loop/engine/parts.py). Resume: the journal is the truth; `loop.engine.resume.recover` brings git,
results.tsv and MLflow up to date before the loop carries on from the lowest free number."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from dataclasses import dataclass, replace

from loop.judge import judge as judging
from loop.run.backends.base import grader_folder
from loop.setup.config import Config
from loop.run.faults import disk_full_message, is_disk_full, log_says_disk_full
from loop.repo.gitsafe import DiskFull, GitError, RefSnapshot
from loop.record import Record, record_dict
from loop.repo.taglock import TagLock
from loop.edits.hunks import hunks
from loop.engine.lifecycle import Cancel, Candidate, Judge, Replay, Repropose, Run, Step
from loop.engine.parts import Parts, locate, open_parts, state_dir
from loop.ui.progress import Phase, Progress
from loop.proposers.base import Proposal, ProposerFatal, Redo
from loop.proposers.change import Change, ChangeFailed, redo
from loop.setup.search_space import SpaceError, parse_space
from loop.engine.resume import abandon, install_signals, recover
from loop.engine.scheduler import PROPOSER_BUG
from loop.engine.stopping import rule_for, settings_of
from loop.run.runner import OK, read_tail
from loop.run.spec import RunJob
from loop.untrusted import REASON_MAX, one_line
from loop.words import (BASELINE, FAILURES, RunKey, RunKind, Status, baseline_retry,
                        commit_message, failed_baseline, num, plural)

__all__ = ["Engine", "Loop", "Stop", "default_tag", "state_dir"]

ASKS = 3    # answers repeating a change in flight or judged before one is a bad_edit
# Ctrl-C: MLflow gets this long for its last writes; what is left is logged at the next
# start (the journal knows), so the process ends within seconds of the signal
KILLED_WAIT_S = 2.0


@dataclass
class Stop:
    # iterations | wall_clock | failures | cost | stop_file | proposer | baseline |
    # disk_full | git | interrupted
    reason: str
    message: str
    exit_code: int = 0


def printed_unit(value: float) -> float:
    """One unit of the last digit `value` was printed with: 4.28 -> 0.01, 3 -> 1."""
    for k in range(0, 10):
        if abs(round(value, k) - value) <= 1e-12 * max(1.0, abs(value)):
            return 10.0 ** -k
    return 1e-10


def default_tag() -> str:
    return time.strftime("%b%d").lower()


class Engine:
    """One night of the loop on one tag: where it runs is found before the tag's lock
    (clear errors, nothing created), its parts are opened under the lock, recovered from
    the journal, and handed to the `Loop`; a full disk or a failing git stops it cleanly."""

    def __init__(self, config: Config, out=print, proposer=None, progress=None):
        self.config = config
        self.out = out
        self.progress = progress or Progress(out)    # run/iteration lines, or a live panel
        self.tag = config.tag or default_tag()
        self.site = locate(config, self.tag, out, self.progress, proposer)
        self.repo_root, self.task_rel = self.site.repo_root, self.site.task_rel
        self.workspace, self.proposer = self.site.workspace, self.site.proposer
        self.sandbox = self.site.sandbox
        self.parts: Parts | None = None     # opened under the lock
        self.loop: Loop | None = None

    def best_value(self) -> float | None:
        return self.parts.score.best_value() if self.parts else None

    def run(self) -> Stop:
        lock = TagLock(self.site.dir / "lock")
        try:
            lock.acquire()
            install_signals()
            self.parts = open_parts(self.site)
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
                        lambda: self.site.journal.write("stop", reason=stop.reason,
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


class Loop:
    """The event loop on the main thread: fill slots, hand each event to the candidate's
    state machine, carry out what it asks for, stop on a budget."""

    def __init__(self, parts: Parts, cost: float):
        self.parts, site = parts, parts.site
        self.config, self.out, self.progress = site.config, site.out, site.progress
        self.tag, self.dir, self.task_rel = site.tag, site.dir, site.task_rel
        self.journal, self.workspace, self.task = site.journal, site.workspace, parts.task
        self.sched, self.proposals, self.backend = parts.sched, parts.proposals, parts.backend
        self.tracker, self.sink, self.prompt = parts.tracker, parts.sink, parts.prompt
        self.score, self.state_guard = parts.score, parts.state_guard
        # Without the sandbox: refs and config as the engine leaves them (its own moves keep
        # this current); what a run changes is tampering, undone and recorded when the run's
        # result comes in. In the sandbox a run cannot write .git at all, so a change there
        # is the user's own and is left alone.
        self.watch = site.sandbox != "bwrap"
        self.tip = self.workspace.tip()
        self.cost = cost                  # LLM cost so far, dropped proposals included
        self.cands: dict[int, Candidate] = {}
        self.best_runs: set[RunKey] = set()   # re-runs of the best in flight
        self.held: set[int] = set()       # candidates whose runs are in, held for those
        self.stop: Stop | None = None
        self.asking: dict[int, tuple[Candidate, Repropose]] = {}   # proposed again, waiting
        self.repeats: dict[int, int] = {}   # iteration -> answers that repeated a change
        self._trees: dict[str, str] = {}    # commit -> its tree (commits never change)
        self._snapshot: RefSnapshot | None = None
        self.sched.on_start = self._started
        self.stop_settings = settings_of(self.task)   # early_stop: None when off
        if self.sink.records and self.sink.records[0].kept:   # a resume: the same floor
            self._noise_floor(self.sink.records[0].samples)

    def run(self) -> Stop:
        self._snapshot = self.state_guard.watch() if self.watch else None
        if self.sink.records:          # a resume: the panel counts the night, not this start
            self.progress.resumed(self.sink.records, self.task.metric, self.score.best_value())
        started = time.monotonic()
        try:
            while True:
                if self.stop is None:
                    self.stop = self._should_stop(started)
                self._plan()
                self.progress.proposing([n for n, (_, _, answer) in self.proposals.items.items()
                                         if not answer.done()])
                if not self.cands and not self.sched.busy() and not self.proposals.items:
                    break
                if self.sched.free() <= 0:      # every slot busy: MLflow's writes now
                    self.sink.flush()
                event = self.sched.next_event()
                if event is None:               # idle: nothing waits on the main thread
                    self.sink.flush()
                else:
                    self._handle(event)
        except KeyboardInterrupt:
            self.interrupted()
            self.sink.flush()
            self.tracker.close("KILLED", KILLED_WAIT_S)
            return Stop("interrupted", "interrupted: experiments killed, worktree restored", 130)
        finally:
            self.backend.close()
        self.sink.flush()
        stop = self.stop or Stop("iterations",
                                 f"done: {plural(self.config.iterations, 'iteration')}"
                                 f" after the baseline")
        self.journal.write("stop", reason=stop.reason, message=stop.message)
        self.tracker.close("FINISHED" if stop.exit_code == 0 else "FAILED")
        return stop

    def _should_stop(self, started: float) -> Stop | None:
        """Budgets that stop new work; what is in flight finishes (nothing is lost)."""
        cfg = self.config
        if cfg.max_wall_s and time.monotonic() - started >= cfg.max_wall_s:
            return Stop("wall_clock", f"stopped: wall-clock budget of {cfg.max_wall_s:g}s spent")
        streak = 0
        for rec in reversed(self.sink.records):
            if rec.status not in FAILURES:
                break
            streak += 1
        raised = [r.reason for r in self.sink.records[-2:] if r.reason.startswith(PROPOSER_BUG)]
        if len(raised) == 2 and raised[0] == raised[1]:
            return Stop("proposer", f"stopped: the proposer failed twice in a row the same way "
                                    f"({raised[-1]}): a bug, not a bad idea; nothing more can "
                                    f"be proposed", 1)
        if streak >= cfg.max_consecutive_failures:
            return Stop("failures", f"stopped: {plural(streak, 'failure')} in a row "
                                    f"(see {self.dir / 'logs'})", 1)
        if cfg.max_cost_usd is not None and self.cost >= cfg.max_cost_usd:
            return Stop("cost", f"stopped: LLM cost ${self.cost:.2f} reached the budget "
                                f"${cfg.max_cost_usd:.2f}")
        stop_file = self.dir / "STOP"
        if stop_file.exists():
            stop_file.unlink()
            return Stop("stop_file", f"stopped: {stop_file} was present")
        return None

    def _plan(self) -> None:
        """Fill free slots: re-runs of the best, waiting runs, then new candidates, in
        iteration order; ask for proposals ahead so no slot waits on the proposer."""
        if self.stop is not None:
            if self.proposals.items or self.asking:
                self._drop_proposals(wait=True)
            self.sched.dispatch()
            return
        if self.score.best is None:           # nothing is judged before the baseline is in
            if not self.cands:
                self._start(self._number(), self.tip, "", Proposal(BASELINE), baseline=True)
            self.sched.dispatch()
            return
        n = self._number()
        wanted = self.score.best_runs_wanted(self.config.judge)
        if not self.best_runs and n <= self.config.iterations and wanted:
            self._remeasure_best(n, wanted)      # before the next proposal, as with one slot
        self.sched.dispatch()
        while self.sched.free() > 0 and self.proposals.items:
            n = min(self.proposals.items)       # candidates start in iteration order
            try:
                taken = self.proposals.take(n)
            except ProposerFatal as exc:
                self.stop = Stop("proposer", f"stopped: {exc}", getattr(exc, "exit_code", 1))
                return self._plan()
            if taken is None:
                break
            if n in self.asking:
                self._restage(n, *taken)
            else:
                self._start(n, *taken)
            self.sched.dispatch()
        self._request_proposals()

    def _request_proposals(self) -> None:
        cfg = self.config
        ahead = cfg.proposer.ahead if cfg.proposer.ahead is not None else \
            (0 if cfg.workers == 1 else cfg.workers)
        want = max(0, self.sched.free()) + ahead - len(self.proposals.items)
        while want > 0 and self.proposals.waiting() < cfg.proposer.concurrency:
            n = self._number()
            if n > cfg.iterations or self._cost_reserved() >= (cfg.max_cost_usd or float("inf")):
                return
            self._ask(n)
            want -= 1

    def _ask(self, n: int, redo: Redo | None = None) -> None:
        """Request a proposal for iteration n on the tip; the proposer is shown every
        attempt, those in flight included (status `running`), so it does not repeat them."""
        program, program_sha = self.prompt.program()
        flying = [c.rec for c in self.cands.values() if not c.baseline and c.iteration != n]
        flying += [Record(iteration=m, status="running", description=p.description)
                   for m, p in self.proposals.answered() if m != n and not p.error]
        context = self.prompt.build(n, program, self.tip, self.sink.records, flying,
                                    self.score, self.sink.tail, redo)
        self.proposals.request(n, self.tip, program_sha, context)

    def _cost_reserved(self) -> float:
        """Cost so far plus the expected cost of the requests still being answered."""
        paid = [r.usage.get("cost_usd", 0.0) for r in self.sink.records
                if r.usage.get("requests")]
        mean = sum(paid) / len(paid) if paid else 0.0
        return self.cost + mean * self.proposals.waiting()

    def _number(self) -> int:
        """The lowest iteration number not done or in flight (numbers stay dense)."""
        used = {r.iteration for r in self.sink.records} | set(self.cands) \
            | self.proposals.numbers()
        n = 0
        while n in used:
            n += 1
        return n

    def _start(self, n: int, base: str, program_sha: str, proposal: Proposal,
               baseline: bool = False) -> None:
        """Stage a proposal as an attempt commit on its base, journal `begin`, queue its run."""
        problem = None if baseline else (proposal.error or self.prompt.check(proposal, base))
        commit = base if baseline else ""
        if not (baseline or problem):
            commit, problem = self._stage(base, proposal)
        if commit and not baseline:
            same = self._same_change(n, base, commit)
            if same is not None:
                problem = self._repeated(n, same, proposal)
                if problem is None:
                    return              # asked again; this answer is not run
                commit = ""
        self.cost += proposal.usage.cost_usd
        run_id = self.tracker.start_iteration(self.tag, n)
        self.journal.write("begin", iteration=n, run_id=run_id, parent=base, commit=commit,
                           description=proposal.description)
        rec = Record(iteration=n, status=Status.BAD_EDIT.value, description=proposal.description,
                     reason=problem or "", parent=base, run_id=run_id, commit=commit,
                     program_sha=program_sha or self.prompt.program()[1], seed=self.config.seed,
                     time=time.time(), best_before=self.score.best_value(),
                     usage=vars(proposal.usage).copy(),
                     proposer="" if baseline else proposal.proposer or self.config.proposer.kind)
        cand = self.cands[n] = Candidate(rec, baseline, proposal)
        if commit and not baseline:
            rec.attempt_ref = self.workspace.keep_ref(f"attempt-{n}", commit)
            cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(base, commit)
        step = cand.begin(self.tip, problem)
        if not problem:
            self.prompt.note_steering(n, rec.program_sha, self.sink.records)
        self._carry_out(cand, step)

    def _stage(self, base: str, proposal: Proposal) -> tuple[str, str | None]:
        """(the attempt commit, None), or ("", why) when git refuses what the proposal
        wrote (a path, a file): that attempt's bad_edit, never the night's stop. A full disk
        still stops the night (DiskFull)."""
        try:
            return self.workspace.stage_on(base, self.task_rel, proposal.files,
                                           proposal.description), None
        except GitError as exc:
            if is_disk_full(exc):
                raise
            return "", f"git refused the change: {one_line(exc.first_line(), 300)}"

    def _carry_out(self, cand: Candidate, step: Step) -> None:
        """Do what the candidate's life asks for next (loop/engine/lifecycle.py decides)."""
        while step is not None:
            if isinstance(step, Run):
                for key in step.keys:
                    mine = key.kind is RunKind.CANDIDATE
                    rule = rule_for(self.stop_settings, self.score.best_curves, cand.patch) \
                        if mine and not cand.baseline else None
                    self._queue(cand.iteration, key, cand.rec.commit if mine else self.tip,
                                cand.rec.run_id, rule)
                self.sched.dispatch()
                return
            if isinstance(step, Cancel):
                n = cand.iteration
                # the predicates run inside drop() and cancel(), while n is this iteration
                dropped = self.sched.drop(
                    lambda j: j.iteration != n or j.key.kind is RunKind.BEST)  # noqa: B023
                self.sched.cancel(
                    lambda j: j.iteration == n and j.key.kind is RunKind.CANDIDATE)  # noqa: B023
                step = cand.forget({j.key for j in dropped})
            elif isinstance(step, Judge):
                if self.best_runs and not cand.baseline:  # the best's re-runs first
                    self.held.add(cand.iteration)
                    return
                step = cand.judged(self._verdict(cand), self.tip, self.sched.free())
            elif isinstance(step, Replay):
                step = self._replay(cand, step.verdict)
            elif isinstance(step, Repropose):
                return self._repropose(cand, step)
            else:
                return self._finish(cand)

    def _verdict(self, cand: Candidate) -> judging.Verdict:
        if cand.baseline:
            return judging.judge_baseline(cand.rec.samples, self.config.judge)
        return self.score.judge(cand.rec, self.task.metric.direction, self.config.judge)

    def _queue(self, n: int, key: RunKey, commit: str, run_id: str, rule=None) -> None:
        # its environment is made where it runs (loop/run/spec.py), from the job and the task
        job = RunJob.make(n, key, commit, run_id, self.config.seed, self.sink.log_path(n, key),
                          self.dir / "runs" / f"{n:04d}-{key.number}")
        job.stop_rule = rule         # a candidate's run: stopped once clearly worse
        self.sched.add(job)

    def _started(self, job: RunJob) -> None:
        """A run got a slot (the scheduler calls this): the console or panel says so."""
        cand = self.cands.get(job.iteration)
        note, k = "", job.key.number
        if job.key.kind is RunKind.CANDIDATE and cand is not None:
            rec, planned = cand.rec, judging.max_runs(self.config.judge, cand.baseline)
            k -= cand.first               # runs on its current base: a replay starts anew
            failed = failed_baseline(self.sink.records) if cand.baseline else None
            if failed is not None and k == 0:
                note = f"run again: {baseline_retry(failed)}"
            elif cand.replayed_onto and k == 0:
                note = f"replayed onto the new best {cand.replayed_onto[:7]}"
        else:
            rec, planned = Record(iteration=job.iteration, status="remeasure",
                                  description="re-measure the best"), None
            if job.key.kind is RunKind.PAIR:
                note = f"beside iteration {job.iteration}'s run, paired"
        task = self.task
        probe = grader_folder(job.run_dir).exists if self.config.backend == "local" else None
        phase = Phase(task.grade_timeout_s if task.grade_command else None, probe)
        self.progress.run_started(job.lane, rec, k, planned, task.time_budget_s + task.grace_s,
                                  self.config.iterations, note=note, phase=phase)

    def _handle(self, event) -> None:
        if event[0] != "run":
            return                              # a proposal is ready: _plan takes it
        _, job, result = event
        self.sched.finished(job)
        self.progress.run_finished(job.lane)
        if result.status != OK and log_says_disk_full(result.log_path):
            raise DiskFull(f"a write of the experiment failed, see {result.log_path}")
        # every check, at this run's end: what one leaves would be blamed on the next run
        key = job.key
        tampered = self.state_guard.after_run(self._snapshot, f"{job.iteration}-{key.number}",
                                              keep_watching=True, tip=self.tip)
        if tampered:
            found = result.detail.startswith("tampered: ")    # its task folder, its worktree
            tampered += "; " + result.detail.removeprefix("tampered: ") if found else ""
            result.status, result.metric, result.detail = Status.CRASH.value, None, tampered
        result.detail = one_line(result.detail, REASON_MAX)   # built from the run's output
        value = result.metric if result.status == OK else None
        if key.kind is not RunKind.CANDIDATE:   # a run of the best
            self._best_measured(job, result, value)
            if key.kind is RunKind.BEST:
                return self._best_runs_done(key)
        else:
            self._measured(self.cands[job.iteration].rec, job, result)
        cand = self.cands[job.iteration]
        self._carry_out(cand, cand.ran(key, value, result.status, result.detail,
                                       result.curve))

    def _measured(self, rec: Record, job: RunJob, result) -> None:
        """What a run of the candidate says besides its metric: time, memory, throughput."""
        if self.task.throughput_pattern and result.status == OK:   # the machine's speed
            rec.throughput.append(self.task.throughput(read_tail(job.log_path)))
        rec.wall_s += result.wall_s
        if result.memory_gb is not None:
            rec.memory_gb = max(rec.memory_gb or 0.0, result.memory_gb)

    def _replay(self, cand: Candidate, verdict) -> Step:
        """The candidate's base is no longer the tip: make its change again on the tip (set
        the same constants, apply the same edits) and measure it again there (a gain on an
        older base is not a gain on the new one). When the change does not apply there, the
        proposer is asked again on the tip (`Repropose`)."""
        rec = cand.rec
        new, why, notes = None, "", ""
        try:
            made = redo(self._change(cand), self.prompt.editable(self.tip), self.task,
                        self._space())
        except ChangeFailed as exc:
            why = str(exc)
        else:
            notes = "; ".join(made.notes)
            new = self.workspace.stage_on(self.tip, self.task_rel, made.files,
                                          self.workspace.message(rec.commit))
            same = self._same_change(rec.iteration, self.tip, new)
            if same is not None:        # never run twice: see Candidate.replayed
                return cand.replayed(None, self.tip, verdict, cannot_ask=self._cannot_ask(),
                                     same_as=same)
            self.workspace.keep_ref(f"attempt-{rec.iteration}-on-{rec.parent[:7]}", rec.commit)
            self.journal.write("replay", iteration=rec.iteration, old_commit=rec.commit,
                               commit=new, parent=self.tip, samples=rec.samples)
            if verdict:
                self.out(f"      iteration {rec.iteration} would be kept, but the best moved: "
                         f"replayed onto {self.tip[:7]}{f' ({notes})' if notes else ''}, "
                         f"measuring it again")
        step = cand.replayed(new, self.tip, verdict, why, notes, self._cannot_ask())
        if new is not None:
            rec.attempt_ref = self.workspace.keep_ref(f"attempt-{rec.iteration}", new)
            rec.best_before = self.score.best_value()
            cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(rec.parent, new)
        return step

    def _change(self, cand: Candidate) -> Change:
        """The candidate's change as data: what its proposer said, else the hunks of its diff
        (a proposer that gives none, or a candidate left from before it was recorded)."""
        given = cand.proposal.change if cand.proposal is not None else None
        if given:
            return given
        rec = cand.rec
        paths = self.workspace.changed_paths(rec.parent, rec.commit, self.task_rel)
        return Change(edits=tuple(hunks(
            self.workspace.read_at(rec.parent, self.task_rel, paths),
            self.workspace.read_at(rec.commit, self.task_rel, paths))))

    def _space(self):
        try:
            return parse_space(self.task.search_space or {}, "task.yaml")
        except SpaceError:          # check-task reports it; a replay only skips the check
            return {}

    def _cannot_ask(self) -> str:
        """Why the proposer cannot be asked again now ("" when it can)."""
        if self.stop is not None:
            return "the loop stopped before it could be proposed again"
        if self._cost_reserved() >= (self.config.max_cost_usd or float("inf")):
            return "the LLM cost budget leaves no room to propose it again"
        return ""

    def _repropose(self, cand: Candidate, step: Repropose) -> None:
        """Its change does not apply to the tip: ask the proposer again, on the tip, for the
        same iteration (told what the change was); `_restage` stages the answer."""
        rec = cand.rec
        self.workspace.keep_ref(f"attempt-{rec.iteration}-on-{rec.parent[:7]}", rec.commit)
        self.asking[rec.iteration] = (cand, step)
        if step.same_as is not None:    # on the tip it repeats a change: ask for another
            self._ask(rec.iteration)
            self.out(f"      iteration {rec.iteration} was proposed on an older best; on the "
                     f"best now it is iteration {step.same_as}'s change: asking for another")
            return
        self._ask(rec.iteration, Redo(rec.description, cand.patch, step.why,
                                      step.verdict.reason if step.verdict else ""))
        what = "would be kept, but its change" if step.verdict else "was proposed on an " \
            "older best, and its change"
        self.out(f"      iteration {rec.iteration} {what} does not apply to the best now "
                 f"({step.why}): proposing it again on {self.tip[:7]}")

    def _restage(self, n: int, base: str, program_sha: str, proposal: Proposal) -> None:
        """The proposer's answer for a candidate proposed again: staged on `base` (the tip
        when asked) and measured there from scratch, or the candidate ends saying why not."""
        cand, step = self.asking.pop(n)
        rec = cand.rec
        self.cost += proposal.usage.cost_usd
        for key, value in vars(proposal.usage).items():
            rec.usage[key] = rec.usage.get(key, 0) + value
        problem = proposal.error or self.prompt.check(proposal, base)
        commit = ""
        if not problem:
            commit, problem = self._stage(base, proposal)
        if commit:
            same = self._same_change(rec.iteration, base, commit)
            if same is not None:
                problem, commit = f"it repeats iteration {same}'s change", ""
        if not commit:
            return self._carry_out(cand, cand.reproposed(None, base, step.verdict, step.why,
                                                         problem=problem or "",
                                                         same_as=step.same_as))
        self.journal.write("replay", iteration=n, old_commit=rec.commit, commit=commit,
                           parent=base, samples=rec.samples, description=proposal.description)
        cand.proposal = proposal
        next_step = cand.reproposed(commit, base, step.verdict, step.why, proposal.description,
                                    same_as=step.same_as)
        rec.attempt_ref = self.workspace.keep_ref(f"attempt-{n}", commit)
        rec.best_before = self.score.best_value()
        cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(base, commit)
        self._carry_out(cand, next_step)

    def _same_change(self, n: int, base: str, commit: str) -> int | None:
        """The iteration other than `n` whose change on `base` is exactly `commit`'s (same
        parent, same tree), in flight or judged; None when there is none. Told apart by
        iteration, not by commit: two answers staged within a second are the same commit."""
        others = [(c.iteration, c.rec.commit) for c in self.cands.values()
                  if not c.baseline and c.iteration != n and c.rec.parent == base
                  and c.rec.commit]
        others += [(r.iteration, r.commit) for r in self.sink.records
                   if r.iteration != n and r.parent == base and r.commit and r.attempt_ref]
        if not others:
            return None
        unknown = [c for c in {commit, *(c for _, c in others)} if c not in self._trees]
        if unknown:
            self._trees.update(zip(unknown, self.workspace.trees(unknown)))
        tree = self._trees[commit]
        return next((i for i, c in sorted(others) if self._trees[c] == tree), None)

    def _repeated(self, n: int, same: int, proposal: Proposal) -> str | None:
        """An answer that repeats iteration `same`'s change: asked again (its cost counted,
        journalled as a `drop`), at most ASKS times, then a bad_edit saying so."""
        self.cost += proposal.usage.cost_usd
        self.journal.write("drop", iteration=n, cost_usd=proposal.usage.cost_usd,
                           description=proposal.description)
        self.repeats[n] = self.repeats.get(n, 0) + 1
        if self.repeats[n] >= ASKS:
            return (f"the proposer answered {plural(self.repeats[n], 'time')} with a change "
                    f"already tried on this base (iteration {same}'s): "
                    f"{proposal.description}")
        self.out(f"      iteration {n}: {proposal.description!r} is iteration {same}'s change "
                 f"again; asking the proposer for another")
        self._ask(n)
        return None

    def _finish(self, cand: Candidate) -> None:
        """Settle the git side, journal the record, then move the branch (resume-safe order)."""
        rec, metric = cand.rec, self.task.metric
        if rec.samples:
            rec.metric = sum(rec.samples) / len(rec.samples)
        if rec.metric is not None and rec.best_before is not None:
            rec.delta = judging.improvement(rec.metric, rec.best_before, metric.direction)
        self.score.add(rec)
        rec.best_after = self.score.best_value()
        rec.run_id = self.tracker.resolve(rec.run_id, rec.iteration)
        if rec.attempt_ref:
            rec.commit = self.workspace.recommit(rec.commit, commit_message(rec, metric))
            rec.attempt_ref = self.workspace.keep_ref(f"attempt-{rec.iteration}", rec.commit)
        self.journal.write("end", **record_dict(rec))
        del self.cands[rec.iteration]   # ended: a stop from here on has nothing to roll back
                                        # (resume makes the branch move, rows, MLflow)
        if rec.kept and rec.commit != self.tip:
            self.workspace.advance(rec.commit, self.tip)
            self.tip = rec.commit
        if rec.kept or self.config.workers == 1 or self.config.backend != "local":
            self.workspace.restore()     # the main worktree shows the tip (with one slot,
                                         # it is also where the run happened)
        if not rec.kept:   # a discarded attempt's checkpoints are not worth the disk
            for run_dir in (self.dir / "runs").glob(f"{rec.iteration:04d}-*"):
                shutil.rmtree(run_dir, ignore_errors=True)
        self.sink.add(rec, cand.patch, cand.proposal)
        self.progress.iteration_done(rec, self.task.metric, self.config.iterations)
        if cand.baseline and rec.kept:
            self._say_if_exact(rec.samples)
        if cand.baseline and not rec.kept:
            log = self.sink.log_path(rec.iteration)
            hint = self._failure_hint(log)
            self.stop = Stop("baseline", f"stopped: the baseline failed ({rec.status}: "
                                         f"{rec.reason}); see {log}"
                                         + (f"\n{hint}" if hint else ""), 1)

    def _say_if_exact(self, samples: list) -> None:
        """Runs of one version that all gave the same number: the judge sees no noise. What
        that means is said once, after the baseline, with the ways out; and where the number
        is printed coarsely (`4.28`), a difference of one printed unit is no evidence: it
        becomes the night's min_delta (`_noise_floor`, again on every resume)."""
        floor = self._noise_floor(samples)
        if floor is None:
            return
        values, quantum = floor
        metric = self.task.metric.name
        seeded = self.task.flags and "$AUTORESEARCH_SEED" in (
            self.workspace.worktree / self.task_rel / self.task.flags).read_text(errors="replace")
        cause = (f"{metric} is printed to {num(quantum)}, coarser than its run-to-run noise"
                 if seeded else "the runs are deterministic (a fixed seed)")
        self.out(f"note: the baseline's {len(values)} runs all gave {metric} {num(values[0])}: "
                 f"{cause}, so the judge sees no noise; a gain must exceed one printed unit "
                 f"({num(quantum)}: judge.min_delta for this night) to be kept; "
                 + ("print more digits" if seeded else
                    "seed the script from $AUTORESEARCH_SEED (a seed flag in the flags file: "
                    "`seed: $AUTORESEARCH_SEED`)")
                 + ", or set judge.min_delta to the smallest gain worth keeping")

    def _noise_floor(self, samples: list) -> tuple[list[float], float] | None:
        """(the runs, one printed unit) when every baseline run gave the same value; the
        judge's min_delta is raised to that unit for the rest of the night."""
        values = [v for v in samples if isinstance(v, (int, float))]
        if len(values) < 2 or len(set(values)) > 1:
            return None
        quantum = printed_unit(values[0])
        judge = self.config.judge
        if judge.min_delta < quantum:
            self.config = replace(self.config, judge=replace(judge, min_delta=quantum))
        return values, quantum

    def _failure_hint(self, log: Path) -> str | None:
        """What check-task would say about the failed baseline: a file not committed (or
        ignored: `inputs:`), one the sandbox hides, a package the environment lacks."""
        from loop.run import uncommitted
        from loop.run.spec import grade_log
        logs = "\n".join(p.read_text(errors="replace") for p in (log, grade_log(log))
                         if p.exists())
        site = self.parts.site
        try:
            return uncommitted.failure_hint(
                logs, site.repo_root, self.task_rel, self.task, self.workspace.git,
                self.workspace.committed, [self.workspace.worktree], site.sandbox == "bwrap",
                who="run")
        except Exception:     # a hint is a courtesy: never the reason a stop goes wrong
            return None

    def _remeasure_best(self, n: int, wanted: int) -> None:
        """Run the best state again (new seeds): its mean corrects a lucky keep, and the runs
        refresh the noise estimate. Journalled, logged on the parent run; not a row. After a
        keep it needs R runs: they go to free slots at once."""
        have = len(self.score.best_samples)
        for i in range(max(1, min(wanted, self.sched.free()))):
            key = RunKey.best(have + i)
            self.best_runs.add(key)
            self._queue(n, key, self.tip, self.tracker.parent_id or "")

    def _best_measured(self, job: RunJob, result, value: float | None) -> None:
        """A run of the best ended (a re-run, or one beside a candidate): journal it, and it
        joins the best's runs."""
        curve = result.curve if value is not None else []
        self.journal.write("remeasure", iteration=job.iteration, commit=job.commit,
                           value=value, status=result.status, **({"curve": curve} if curve
                                                                 else {}))
        self.score.remeasured(value, curve)
        if value is None:
            self.out(f"note: re-measuring the best failed ({result.status}: {result.detail})")
        else:
            runs, best = len(self.score.best_samples), self.score.best_value()
            assert best is not None   # value just joined the best's runs
            self.tracker.log_best(self.task.metric.name, best, runs, job.iteration)
            self.progress.best_measured(best)
            self.out(f"      re-measured the best: {num(value)}; best is now the mean of "
                     f"{runs} runs, {num(best)}")

    def _best_runs_done(self, key: RunKey) -> None:
        """Candidates held for the best's re-runs are judged once all of them are in."""
        self.best_runs.discard(key)
        if not self.best_runs:
            for n in [n for n in self.cands if n in self.held]:   # in the order they began
                self.held.discard(n)
                cand = self.cands[n]
                self._carry_out(cand, cand.judged(self._verdict(cand), self.tip,
                                                  self.sched.free()))

    def _drop_proposals(self, wait: bool) -> None:
        """Proposals made but not started when the loop stops: their cost is journalled."""
        for n, proposal in self.proposals.drop_all(wait):
            cost = proposal.usage.cost_usd if proposal else 0.0
            self.cost += cost
            self.journal.write("drop", iteration=n, cost_usd=cost,
                               description=proposal.description if proposal else "")
        # candidates whose change did not apply, waiting to be proposed again: no time now
        for _, (cand, step) in sorted(self.asking.items()) if wait else []:
            self._carry_out(cand, cand.replayed(
                None, self.tip, step.verdict, step.why, same_as=step.same_as,
                cannot_ask="the loop stopped before it was proposed again"))
        self.asking.clear()

    def interrupted(self) -> None:
        """Ctrl-C / SIGTERM: kill every run in flight, roll back every open step."""
        self.sched.drop(lambda j: False)
        self.sched.cancel(lambda j: True)
        self.proposals.cancel_all()          # an LLM request in flight ends now
        self.backend.close()
        self._drop_proposals(wait=False)
        for n, cand in sorted(self.cands.items()):   # the redo will reuse attempt-<n>
            abandon(self.parts, n, cand.rec.time,
                    "" if cand.baseline else cand.rec.commit, cand.rec.run_id)
        self.cands.clear()
        self.workspace.restore()
