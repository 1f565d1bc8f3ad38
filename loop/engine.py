"""The loop: baseline, then propose -> apply -> run -> judge -> keep or restore -> log.

With N slots (`workers`) several candidates are in flight at once: each is proposed against
the best at the time, its runs go to free slots (loop/scheduler.py), and it is judged when
its runs are in. A would-be keep whose base is no longer the tip is replayed onto the tip
and measured again there (a conflict is a discard). The main thread owns git, the journal,
the judge and MLflow; runs and proposals finish on other threads and come back as events.

Resume: the journal is the truth. On start the engine replays it, rolls back every step that
was cut off, finishes a keep whose branch move was lost, and brings results.tsv and MLflow
up to date; then it carries on from the lowest free iteration number."""
from __future__ import annotations

import math
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from loop import grading, judge as judging
from loop.backends import RunJob
from loop.config import Config
from loop.journal import Journal, Record, TagLock, record_dict
from loop.proposers.base import Proposal, ProposerFatal, make_proposer
from loop.reporting import FAILURES, REMEASURE_RUN, Reporting
from loop.resume import Recovery
from loop import sandbox
from loop.faults import disk_full_message, is_disk_full, log_says_disk_full
from loop.gitsafe import DiskFull
from loop.integrity import StateGuard
from loop.preflight import check_run_command
from loop.progress import Progress, planned_runs
from loop.runner import OK, Limits, read_tail
from loop.scoreboard import BASELINE, Scoreboard
from loop.status import commit_message, num, plural
from loop.task import load_task, with_budget
from loop.tracking import append_result, results_text
from loop.workspace import Workspace, worktree_path

__all__ = ["Engine", "Stop", "FAILURES", "REMEASURE_RUN", "default_tag", "state_dir"]


@dataclass
class Stop:
    reason: str           # iterations | wall_clock | failures | cost | stop_file | proposer | baseline
    message: str
    exit_code: int = 0


@dataclass
class Candidate:
    """An iteration in flight: its record so far and its runs (k -> metric)."""
    rec: Record
    proposal: Proposal
    baseline: bool = False
    patch: str = ""
    next_k: int = 0              # next run number (logs and seeds stay unique)
    first_k: int = 0             # its first run on the current base (after a replay: later)
    values: dict = field(default_factory=dict)
    in_flight: set = field(default_factory=set)
    failed: tuple | None = None  # (k, RunResult) of its first failed run
    stats: dict = field(default_factory=dict)   # the last verdict's numbers
    waiting: bool = False        # all in, held until the best's re-runs are in
    replayed_onto: str = ""
    pair_best: dict = field(default_factory=dict)  # k -> the best's value run alongside run k
    next_best_k: int = REMEASURE_RUN + 50   # the best's runs alongside it (logs `best50`, ..)


def default_tag() -> str:
    return time.strftime("%b%d").lower()


def state_dir(repo_root: Path, tag: str) -> Path:
    return repo_root / ".autoresearch" / tag


class Engine(Recovery, Reporting):
    def __init__(self, config: Config, out=print, proposer=None, progress=None):
        self.config = config
        self.out = out
        self.progress = progress or Progress(out)    # run/iteration lines, or a live panel
        user_task = load_task(config.resolve(config.task))        # clear errors first
        with_budget(user_task, config.time_budget_s)   # refused when the code holds it
        self.repo_root = Workspace.find_repo_root(user_task.root)
        self.task_rel = user_task.root.relative_to(self.repo_root).as_posix()
        self.tag = config.tag or default_tag()
        self.dir = state_dir(self.repo_root, self.tag)
        self.journal = Journal(self.dir / "journal.jsonl")
        self.results_path = self.dir / "results.tsv"
        self.workspace = Workspace(self.repo_root, self.tag,
                                   worktree_path(self.repo_root, self.tag))
        self.state_guard = StateGuard(self.workspace, self.journal, self.results_path, lambda: (
            results_text(self.task.metric.name, self._rows()) if self.results_path.exists()
            or self.records else None))
        self._check_committed(user_task)
        if not self.workspace.branch_exists():   # a resume runs the branch's files
            check_run_command(user_task, self.task_rel, self.workspace.committed)
        self.user_task = user_task
        # sandbox: required without one stops here (exit 2); auto without one warns
        self.sandbox = sandbox.startup(config.sandbox, out)
        self.limits = Limits.from_config(config)
        self.proposer = proposer or make_proposer(config.proposer, seed=config.seed)
        self.program_path = config.resolve(config.program)
        self.records: list[Record] = []
        self.score = Scoreboard()
        self.cost = 0.0
        self.cands: dict[int, Candidate] = {}
        self.probes = 0                   # re-runs of the best in flight
        self.rows_written = 0             # results.tsv holds iterations below this
        self.stop: Stop | None = None
        self._snapshot = None
        self._program_sha: str | None = None

    # -- the loop -----------------------------------------------------------------
    def run(self) -> Stop:
        lock = TagLock(self.dir / "lock")
        try:
            lock.acquire()
            return self._run()
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            return self._disk_full(exc)
        finally:
            lock.release()

    def _disk_full(self, exc: Exception) -> Stop:
        """Stop cleanly: the journal (if it can still be written) says why; every step in
        flight is rolled back and redone on resume, as after a kill."""
        stop = Stop("disk_full", disk_full_message(exc), 1)
        for cleanup in (lambda: hasattr(self, "sched") and self._interrupted(),
                        lambda: self.journal.write("stop", reason=stop.reason,
                                                   message=stop.message),
                        lambda: hasattr(self, "tracker") and self.tracker.close("FAILED", 5.0)):
            try:
                cleanup()
            except Exception:
                pass
        return stop

    def _run(self) -> Stop:
        self._install_signals()
        self._open()
        # Without the sandbox: refs and config as the engine leaves them (its own moves keep
        # this current); what a run changes is tampering, undone and recorded when the run's
        # result comes in. In the sandbox a run cannot write .git at all, so a change there
        # is the user's own and is left alone.
        self._snapshot = None if self.sandbox == "bwrap" else self.state_guard.watch()
        started = time.monotonic()
        try:
            while True:
                if self.stop is None:
                    self.stop = self._should_stop(started)
                self._plan()
                if not self.cands and not self.sched.busy() and not self.proposals.items:
                    break
                event = self.sched.next_event()
                if event is not None:
                    self._handle(event)
        except KeyboardInterrupt:
            self._interrupted()
            self.tracker.close("KILLED")
            return Stop("interrupted", "interrupted: experiments killed, worktree restored", 130)
        finally:
            self.backend.close()
        stop = self.stop or Stop("iterations", f"done: {plural(self.config.iterations, 'iteration')}"
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
        for rec in reversed(self.records):
            if rec.status not in FAILURES:
                break
            streak += 1
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
            if self.proposals.items:
                self._drop_proposals(wait=True)
            self.sched.dispatch()
            return
        if self.score.best is None:           # nothing is judged before the baseline is in
            if not self.cands:
                self._start(self._number(), self.tip, "", Proposal(BASELINE), baseline=True)
            self.sched.dispatch()
            return
        n = self._number()
        if not self.probes and n <= self.config.iterations and \
                self.score.needs_remeasure(self.config.judge):
            self._remeasure_best(n)      # before the next proposal, as with one slot
        self.sched.dispatch()
        while self.sched.free() > 0 and self.proposals.items:
            n = min(self.proposals.items)       # candidates start in iteration order
            try:
                taken = self.proposals.take(n)
            except ProposerFatal as exc:
                self.stop = Stop("proposer", f"stopped: {exc}", 1)
                return self._plan()
            if taken is None:
                break
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
            program, program_sha = self._program()
            self.proposals.request(n, self.tip, program_sha, self._context(n, program))
            want -= 1

    def _cost_reserved(self) -> float:
        """Cost so far plus the expected cost of the requests still being answered."""
        paid = [r.usage.get("cost_usd", 0.0) for r in self.records if r.usage.get("requests")]
        mean = sum(paid) / len(paid) if paid else 0.0
        return self.cost + mean * self.proposals.waiting()

    def _number(self) -> int:
        """The lowest iteration number not done or in flight (numbers stay dense)."""
        used = {r.iteration for r in self.records} | set(self.cands) | self.proposals.numbers()
        n = 0
        while n in used:
            n += 1
        return n

    def _start(self, n: int, base: str, program_sha: str, proposal: Proposal,
               baseline: bool = False) -> None:
        """Stage a proposal as an attempt commit on its base, journal `begin`, queue its run."""
        problem = None if baseline else (proposal.error or self._check(proposal, base))
        self.cost += proposal.usage.cost_usd
        run_id = self.tracker.start_iteration(self.tag, n)
        commit = base if baseline else ("" if problem else self.workspace.stage_on(
            base, self.task_rel, proposal.files, proposal.description))
        self.journal.write("begin", iteration=n, run_id=run_id, parent=base, commit=commit,
                           description=proposal.description)
        rec = Record(iteration=n, status="bad_edit", description=proposal.description,
                     reason=problem or "", parent=base, run_id=run_id, commit=commit,
                     program_sha=program_sha or self._program()[1], seed=self.config.seed,
                     time=time.time(), best_before=self.score.best_value(),
                     usage=vars(proposal.usage).copy())
        cand = self.cands[n] = Candidate(rec, proposal, baseline)
        if commit and not baseline:
            rec.attempt_ref = self.workspace.keep_ref(f"attempt-{n}", commit)
            cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(base, commit)
        if problem:
            return self._finish(cand)
        self._note_steering(n, rec.program_sha)
        if base != self.tip:          # the best moved while it was proposed: replay it first
            return self._replay(cand, None)
        self._queue_runs(cand, 1)

    def _queue_runs(self, cand: "Candidate", count: int) -> None:
        rec = cand.rec
        for _ in range(count):
            k = cand.next_k
            cand.next_k += 1
            cand.in_flight.add(k)
            self.sched.add(self._job(rec.iteration, k, rec.commit, rec.run_id, "candidate",
                                     (1, rec.iteration, k)))
        self.sched.dispatch()

    def _queue_pairs(self, cand: "Candidate", count: int) -> None:
        """The paired judge's confirmation: each time a run of the best and a run of the
        candidate, queued together so they run in the same period (at once, with two free
        slots; back to back with one)."""
        rec = cand.rec
        for _ in range(count):
            k = cand.next_k
            cand.next_k += 1
            best_k, cand.next_best_k = cand.next_best_k, cand.next_best_k + 1
            job = self._job(rec.iteration, best_k, self.tip, rec.run_id, "pair",
                            (1, rec.iteration, k - 0.5))
            job.pair_of = k
            cand.in_flight |= {("best", best_k), k}
            self.sched.add(job)
            self.sched.add(self._job(rec.iteration, k, rec.commit, rec.run_id, "candidate",
                                     (1, rec.iteration, k)))
        self.sched.dispatch()

    def _started(self, job: RunJob) -> None:
        """A run got a slot (the scheduler calls this): the console or panel says so."""
        if job.kind == "candidate" and job.iteration in self.cands:
            cand = self.cands[job.iteration]
            rec, planned = cand.rec, planned_runs(self.config.judge, cand.baseline)
        else:
            rec, planned = Record(iteration=job.iteration, status="remeasure",
                                  description="re-measure the best"), None
        self.progress.run_started(job.lane, rec, job.k,
                                  planned, self.task.time_budget_s, self.config.iterations)

    def _job(self, n: int, k: int, commit: str, run_id: str, kind: str, priority) -> RunJob:
        # the id marks the run's processes: unique across engines, tags and restarts
        return RunJob(f"{n}-{k}-{uuid.uuid4().hex[:10]}", n, k, commit, run_id,
                      {"AUTORESEARCH_SEED": str(self._seed(n, k)),
                       "AUTORESEARCH_TIME_BUDGET": f"{self.task.time_budget_s:g}",
                       "AUTORESEARCH_ITERATION": str(n), "AUTORESEARCH_RUN_ID": run_id},
                      self._log_path(n, k), self.dir / "runs" / f"{n:04d}-{k}", kind, priority)

    def _handle(self, event) -> None:
        if event[0] != "run":
            return                              # a proposal is ready: _plan takes it
        _, job, result = event
        self.sched.finished(job)
        self.progress.run_finished(job.lane)
        if result.status != OK and log_says_disk_full(result.log_path):
            raise DiskFull(f"a write of the experiment failed, see {result.log_path}")
        tampered = self.state_guard.after_run(self._snapshot, f"{job.iteration}-{job.k}",
                                              keep_watching=True) \
            or grading.check_branch(self.workspace, self.tip, job.iteration)
        if tampered:
            result.status, result.metric, result.detail = "crash", None, tampered
        if job.kind == "remeasure":
            return self._remeasured(job, result)
        cand = self.cands[job.iteration]
        rec = cand.rec
        if job.kind == "pair":             # the best, run alongside the candidate's run k
            cand.in_flight.discard(("best", job.k))
            cand.pair_best[job.pair_of] = self._remeasured(job, result, judge_waiting=False)
            if not cand.in_flight:
                self._advance(cand)
            return
        cand.in_flight.discard(job.k)
        if self.task.throughput_pattern and result.status == OK:   # the machine's speed
            rec.throughput.append(self.task.throughput(read_tail(job.log_path)))
        rec.wall_s += result.wall_s
        if result.memory_gb is not None:
            rec.memory_gb = max(rec.memory_gb or 0.0, result.memory_gb)
        if result.status != OK:
            if cand.failed is None or job.k < cand.failed[0]:
                cand.failed = (job.k, result)
            mine = lambda j: j.iteration == job.iteration and j.kind == "candidate"  # noqa: E731
            cand.in_flight -= {j.k for j in self.sched.pending if mine(j)}
            mine_pair = lambda j: j.iteration == job.iteration and j.kind == "pair"  # noqa: E731
            cand.in_flight -= {("best", j.k) for j in self.sched.pending if mine_pair(j)}
            self.sched.drop(lambda j: not mine_pair(j))
            self.sched.drop(lambda j: not mine(j))        # its other runs are not needed now
            self.sched.cancel(mine)
        else:
            cand.values[job.k] = result.metric
        if not cand.in_flight:
            self._advance(cand)

    def _advance(self, cand: "Candidate") -> None:
        """All runs of a candidate are in: judge it, run it again, replay it, or finish it."""
        rec, cfg = cand.rec, self.config.judge
        rec.samples = [cand.values[k] for k in sorted(cand.values)]
        rec.pairs = [[cand.values[k], cand.pair_best[k]] for k in sorted(cand.pair_best)
                     if k in cand.values and cand.pair_best[k] is not None]
        if cand.failed:
            k, result = cand.failed
            if cand.baseline or k == cand.first_k:
                rec.status, rec.reason = result.status, result.detail
            else:
                rec.status, rec.reason = judging.DISCARD, f"confirmation run: {result.status}"
                rec.stats = cand.stats
            return self._finish(cand)
        if cand.baseline:
            if judging.should_remeasure_best(rec.samples, cfg):
                need = (cfg.baseline_runs if cfg.rule == "noise" else 1) - len(rec.samples)
                return self._queue_runs(cand, max(1, min(need, self.sched.free())))
            rec.status, rec.reason = "keep", "baseline"
            return self._finish(cand)
        if self.probes:                 # judge against the best once its re-runs are in
            cand.waiting = True
            return
        verdict = self.score.judge(rec, self.task.metric.direction, cfg)
        cand.stats = verdict.stats
        if verdict.action == judging.RERUN:
            if verdict.also_best:         # paired: the best runs alongside, in one period
                return self._queue_pairs(cand, max(1, min(verdict.also_best,
                                                          self.sched.free() // 2)))
            confirm_at = min(cfg.baseline_runs, 1 + cfg.confirm_runs)
            above = verdict.stats.get("gain", 0) > verdict.stats.get("threshold", math.inf)
            need = (confirm_at if above else 1 + cfg.confirm_runs) - len(rec.samples)
            return self._queue_runs(cand, max(1, min(need, self.sched.free())))
        if verdict.action == judging.KEEP and rec.parent != self.tip:
            return self._replay(cand, verdict)
        rec.status, rec.reason, rec.stats = verdict.action, verdict.reason, verdict.stats
        if cand.replayed_onto:
            rec.reason = f"replayed onto {cand.replayed_onto[:7]}: {rec.reason}"
        self._finish(cand)

    def _replay(self, cand: "Candidate", verdict) -> None:
        """The candidate's base is no longer the tip: apply its change 3-way on the tip and
        measure it again there (a gain on an older base is not a gain on the new one)."""
        rec = cand.rec
        new = self.workspace.replay(rec.commit, self.tip)
        if new is None:
            why = f"would be kept ({verdict.reason}), but" if verdict else "proposed on"
            rec.status, rec.reason = judging.DISCARD, (
                f"{why} its change conflicts with the best kept since its base "
                f"{rec.parent[:7]}: not replayed onto {self.tip[:7]}")
            rec.stats = verdict.stats if verdict else {}
            return self._finish(cand)
        self.workspace.keep_ref(f"attempt-{rec.iteration}-on-{rec.parent[:7]}", rec.commit)
        self.journal.write("replay", iteration=rec.iteration, old_commit=rec.commit, commit=new,
                           parent=self.tip, samples=rec.samples)
        if verdict:
            self.out(f"      iteration {rec.iteration} would be kept, but the best moved: "
                     f"replayed onto {self.tip[:7]}, measuring it again")
        rec.commit, rec.parent, rec.samples, rec.pairs = new, self.tip, [], []
        cand.pair_best = {}
        rec.attempt_ref = self.workspace.keep_ref(f"attempt-{rec.iteration}", new)
        rec.best_before = self.score.best_value()
        cand.patch, rec.lines_added, rec.lines_removed = self.workspace.diff(rec.parent, new)
        cand.values, cand.first_k, cand.replayed_onto = {}, cand.next_k, self.tip
        self._queue_runs(cand, 1)

    def _finish(self, cand: "Candidate") -> None:
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
        if rec.kept and rec.commit != self.tip:
            self.workspace.advance(rec.commit, self.tip)
            self.tip = rec.commit
        if rec.kept or self.config.workers == 1 or self.config.backend != "local":
            self.workspace.restore()     # the main worktree shows the tip (with one slot,
                                         # it is also where the run happened)
        if not rec.kept:   # a discarded attempt's checkpoints are not worth the disk
            for run_dir in (self.dir / "runs").glob(f"{rec.iteration:04d}-*"):
                shutil.rmtree(run_dir, ignore_errors=True)
        del self.cands[rec.iteration]
        self.records.append(rec)
        self._write_rows()
        self._track(rec, cand.patch, cand.proposal)
        self.progress.iteration_done(rec, self.task.metric, self.config.iterations)
        if cand.baseline and rec.status != "keep":
            self.stop = Stop("baseline", f"stopped: the baseline failed ({rec.status}: "
                                         f"{rec.reason}); see {self._log_path(rec.iteration, 0)}",
                             1)

    def _write_rows(self) -> None:
        """results.tsv in iteration order: a row waits until every earlier one is written."""
        by_iter = {r.iteration: r for r in self.records}
        while self.rows_written in by_iter:
            rec = by_iter[self.rows_written]
            append_result(self.results_path, self.task.metric.name, rec,
                          [by_iter[i] for i in range(self.rows_written + 1)])
            self.rows_written += 1

    def _remeasure_best(self, n: int) -> None:
        """Run the best state again (new seeds): its mean corrects a lucky keep, and the runs
        refresh the noise estimate. Journalled, logged on the parent run; not a row. After a
        keep it needs R runs: they go to free slots at once."""
        cfg = self.config.judge
        have = len(self.score.best_samples)
        count = max(1, min(cfg.baseline_runs - have, self.sched.free())) \
            if have < cfg.baseline_runs else 1
        for i in range(count):
            k = REMEASURE_RUN + have + i
            self.sched.add(self._job(n, k, self.tip, self.tracker.parent_id or "",
                                     "remeasure", (0, n, k)))
        self.probes += count

    def _remeasured(self, job: RunJob, result, judge_waiting: bool = True) -> float | None:
        if job.kind != "pair":
            self.probes -= 1
        value = result.metric if result.status == OK else None
        self.journal.write("remeasure", iteration=job.iteration, commit=job.commit,
                           value=value, status=result.status)
        self.score.remeasured(value)
        if value is None:
            self.out(f"note: re-measuring the best failed ({result.status}: {result.detail})")
        else:
            runs, best = len(self.score.best_samples), self.score.best_value()
            self.tracker.log_best(self.task.metric.name, best, runs, job.iteration)
            self.out(f"      re-measured the best: {num(value)}; best is now the mean of "
                     f"{runs} runs, {num(best)}")
        if judge_waiting and not self.probes:   # candidates held for the best's runs
            for cand in [c for c in self.cands.values() if c.waiting]:
                cand.waiting = False
                self._advance(cand)
        return value
