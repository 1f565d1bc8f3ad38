"""The event loop on the main thread: propose -> apply -> run -> judge -> keep or restore ->
record, for as many candidates at once as there are slots.

Each candidate is proposed against the best at the time, staged as an attempt commit
(loop/engine/staging.py), its runs go to free slots (loop/engine/scheduler.py), and it is
judged when its runs are in. A would-be keep whose base is no longer the tip is replayed:
its change is made again on the tip and measured again there (when it does not apply, the
proposer is asked again on the tip). A change already in flight or judged on the same base
is not run twice: the proposer is asked again. Runs and proposals finish on other threads
and come back as events (loop/engine/events.py); this thread owns git, the journal, the
judge and MLflow. What a candidate does next is its state machine's to say
(loop/engine/lifecycle.py); `Loop` only carries the steps out (replays and re-proposals
among them), and stops on a budget (loop/engine/budget.py)."""
from __future__ import annotations

import time

from loop.engine.budget import Stop, iterations_done, should_stop
from loop.engine.events import Event, RunEnded
from loop.engine.flight import InFlight
from loop.engine.keep import Keeper, exact_runs, with_floor
from loop.engine.lifecycle import Cancel, Candidate, Judge, Replay, Repropose, Run, Step
from loop.engine.parts import LoopParts
from loop.engine.resume import abandon
from loop.engine.runs import announce, best_measured, check_ended, measured
from loop.engine.staging import Staged, Stager
from loop.engine.stopping import rule_for, settings_of
from loop.judge import judge as judging
from loop.proposers.base import Proposal, ProposerFatal, Redo
from loop.repo.gitsafe import RefSnapshot
from loop.run.spec import RunJob
from loop.record import Record
from loop.words import BASELINE, RunKey, RunKind, Status, plural

# answers repeating a change in flight or judged before, after which it is a bad_edit
MAX_REPEATED_ANSWERS = 3
# Ctrl-C: MLflow gets this long for its last writes; what is left is logged at the next
# start (the journal knows), so the process ends within seconds of the signal
KILLED_WAIT_S = 2.0


class Loop:
    """Fill slots, hand each event to the candidate's state machine, carry out what it asks
    for, stop on a budget."""

    def __init__(self, parts: LoopParts, cost: float):
        self.parts, setup = parts, parts.setup
        self.config, self.out, self.progress = setup.config, setup.out, setup.progress
        self.sched, self.proposals = parts.sched, parts.proposals
        self.sink, self.score = parts.sink, parts.score
        self.flight = InFlight()            # candidates in flight, the best's re-runs
        self.stager = Stager(parts, self.flight)
        self.keeper = Keeper(parts)
        self.tip = setup.workspace.tip()
        self.cost = cost                  # LLM cost so far, dropped proposals included: each
                                          # proposal's is counted once, by _paid
        self.stop: Stop | None = None
        # Without the sandbox: refs and config as the engine leaves them (its own moves keep
        # this current); what a run changes is tampering, undone and recorded when the run's
        # result comes in. In the sandbox a run cannot write .git at all, so a change there
        # is the user's own and is left alone.
        self.snapshot: RefSnapshot | None = None
        self.sched.on_start = lambda job: announce(parts, self.config, job,
                                                   self.flight.get(job.iteration))
        if self.sink.records and self.sink.records[0].kept:   # a resume: the same floor
            self._floor(self.sink.records[0].samples)

    def run(self) -> Stop:
        if self.parts.setup.sandbox != "bwrap":
            self.snapshot = self.parts.state_guard.watch()
        if self.sink.records:          # a resume: the panel counts the night, not this start
            self.progress.resumed(self.sink.records, self.parts.task.metric,
                                  self.score.best_value())
        started = time.monotonic()
        try:
            while self._turn(started):
                pass
        except KeyboardInterrupt:
            self.interrupted()
            self.sink.flush()
            self.parts.tracker.close("KILLED", KILLED_WAIT_S)
            return Stop("interrupted", "interrupted: experiments killed, worktree restored", 130)
        finally:
            self.parts.backend.close()
        self.sink.flush()
        stop = self.stop or iterations_done(self.config)
        self.parts.setup.journal.write("stop", reason=stop.reason, message=stop.message)
        self.parts.tracker.close("FINISHED" if stop.exit_code == 0 else "FAILED")
        return stop

    def _turn(self, started: float) -> bool:
        """Plan, then wait for one event and handle it; False once nothing is left."""
        if self.stop is None:
            self.stop = should_stop(self.config, self.sink.records, self.cost,
                                    self.parts.setup.dir, started)
        self._plan()
        self.progress.proposing(self.proposals.being_answered())
        if not self.flight and not self.sched.busy() and not self.proposals:
            return False
        if self.sched.free() <= 0:      # every slot busy: MLflow's writes now
            self.sink.flush()
        event = self.sched.next_event()
        if event is None:               # idle: nothing waits on the main thread
            self.sink.flush()
        else:
            self._handle(event)
        return True

    # -- propose ----------------------------------------------------------------------

    def _plan(self) -> None:
        """Fill free slots: re-runs of the best, waiting runs, then new candidates, in
        iteration order; ask for proposals ahead so no slot waits on the proposer."""
        if self.stop is not None:
            if self.proposals or self.flight.awaiting():
                self._drop_proposals(wait=True)
            self.sched.dispatch()
            return
        if self.score.best is None:           # nothing is judged before the baseline is in
            if not self.flight:
                self._start(self._number(), self.tip, "", Proposal(BASELINE), baseline=True)
            self.sched.dispatch()
            return
        n = self._number()
        wanted = self.score.best_runs_wanted(self.config.judge)
        if not self.flight.best_runs and n <= self.config.iterations and wanted:
            self._remeasure_best(n, wanted)      # before the next proposal, as with one slot
        self.sched.dispatch()
        while self.sched.free() > 0 and self.proposals:
            n = self.proposals.first()           # candidates start in iteration order
            try:
                taken = self.proposals.take(n)
            except ProposerFatal as exc:
                self.stop = Stop("proposer", f"stopped: {exc}", getattr(exc, "exit_code", 1))
                return self._plan()
            if taken is None:
                break
            cand = self.flight.get(n)
            if cand is not None and self.flight.awaits_answer(n):
                self._restage(cand, *taken)
            else:
                self._start(n, *taken)
            self.sched.dispatch()
        self._request_proposals()

    def _request_proposals(self) -> None:
        cfg = self.config
        ahead = cfg.proposer.ahead if cfg.proposer.ahead is not None else \
            (0 if cfg.workers == 1 else cfg.workers)
        want = max(0, self.sched.free()) + ahead - len(self.proposals)
        while want > 0 and self.proposals.waiting() < cfg.proposer.concurrency:
            n = self._number()
            if n > cfg.iterations or self.cost_reserved() >= (cfg.max_cost_usd or float("inf")):
                return
            self.ask(n)
            want -= 1

    def ask(self, n: int, redo: Redo | None = None) -> None:
        """Request a proposal for iteration n on the tip; the proposer is shown every
        attempt, those in flight included (status `running`), so it does not repeat them."""
        prompt = self.parts.prompt
        program, program_sha = prompt.program()
        flying = [c.rec for c in self.flight.others(n)]
        flying += [Record(iteration=m, status="running", description=p.description)
                   for m, p in self.proposals.answered() if m != n and not p.error]
        context = prompt.build(n, program, self.tip, self.sink.records, flying,
                               self.score, self.sink.tail, redo)
        self.proposals.request(n, self.tip, program_sha, context)

    def cost_reserved(self) -> float:
        """Cost so far plus the expected cost of the requests still being answered."""
        paid = [r.usage.get("cost_usd", 0.0) for r in self.sink.records
                if r.usage.get("requests")]
        mean = sum(paid) / len(paid) if paid else 0.0
        return self.cost + mean * self.proposals.waiting()

    def _paid(self, cost_usd: float) -> None:
        """A proposal's LLM cost, counted once: the only place the night's cost grows."""
        self.cost += cost_usd

    def _number(self) -> int:
        """The lowest iteration number not done or in flight (numbers stay dense)."""
        used = {r.iteration for r in self.sink.records} | self.flight.numbers() \
            | self.proposals.numbers()
        n = 0
        while n in used:
            n += 1
        return n

    # -- apply ------------------------------------------------------------------------

    def _start(self, n: int, base: str, program_sha: str, proposal: Proposal,
               baseline: bool = False) -> None:
        """Stage a proposal as an attempt commit on its base, journal `begin`, queue its run."""
        staged = Staged(base) if baseline else self.stager.proposal(n, base, proposal)
        if staged.repeats is not None:
            problem = self._repeated(n, staged.repeats, proposal)
            if problem is None:
                return              # asked again; this answer is not run
            staged = Staged(problem=problem)
        self._paid(proposal.usage.cost_usd)
        run_id = self.parts.tracker.start_iteration(self.parts.setup.tag, n)
        self.parts.setup.journal.write("begin", iteration=n, run_id=run_id, parent=base,
                                      commit=staged.commit, description=proposal.description)
        rec = Record(iteration=n, status=Status.BAD_EDIT.value, description=proposal.description,
                     reason=staged.problem or "", parent=base, run_id=run_id,
                     commit=staged.commit,
                     program_sha=program_sha or self.parts.prompt.program()[1],
                     seed=self.config.seed, time=time.time(),
                     best_before=self.score.best_value(), usage=vars(proposal.usage).copy(),
                     proposer="" if baseline else proposal.proposer or self.config.proposer.kind)
        cand = Candidate(rec, baseline, proposal)
        self.flight.begin(cand)
        if staged.commit and not baseline:
            self.stager.adopt(cand, base, staged.commit)
        step = cand.begin(self.tip, staged.problem)
        if not staged.problem:
            self.parts.prompt.note_steering(n, rec.program_sha, self.sink.records)
        self.carry_out(cand, step)

    def _repeated(self, n: int, same: int, proposal: Proposal) -> str | None:
        """An answer that repeats iteration `same`'s change: asked again (its cost counted,
        journalled as a `drop`), at most MAX_REPEATED_ANSWERS times, then a bad_edit saying
        so (its cost is the bad_edit's record's, counted once: not a `drop` too)."""
        times = self.flight.repeated(n)
        if times >= MAX_REPEATED_ANSWERS:
            return (f"the proposer answered {plural(times, 'time')} with a change "
                    f"already tried on this base (iteration {same}'s): "
                    f"{proposal.description}")
        self._paid(proposal.usage.cost_usd)
        self.parts.setup.journal.write("drop", iteration=n, cost_usd=proposal.usage.cost_usd,
                                      description=proposal.description)
        self.out(f"      iteration {n}: {proposal.description!r} is iteration {same}'s change "
                 f"again; asking the proposer for another")
        self.ask(n)
        return None

    def carry_out(self, cand: Candidate, step: Step) -> None:
        """Do what the candidate's life asks for next (loop/engine/lifecycle.py decides)."""
        while step is not None:
            if isinstance(step, Run):
                return self._run(cand, step)
            if isinstance(step, Cancel):
                step = self._cancel(cand)
            elif isinstance(step, Judge):
                if self.flight.best_runs and not cand.baseline:  # the best's re-runs first
                    self.flight.hold(cand)
                    return
                step = cand.judged(self._verdict(cand), self.tip, self.sched.free())
            elif isinstance(step, Replay):
                step = self._replay(cand, step.verdict)
            elif isinstance(step, Repropose):
                return self._repropose(cand, step)
            else:
                return self._finish(cand)

    # -- replay: a candidate whose base is no longer the tip -----------------------------

    def _replay(self, cand: Candidate, verdict: judging.Verdict | None) -> Step:
        """The candidate's base is no longer the tip: make its change again on the tip and
        measure it again there (a gain on an older base is not a gain on the new one). When
        the change does not apply there, the proposer is asked again on the tip."""
        rec = cand.rec
        staged = self.stager.remake(cand, self.tip)
        if staged.repeats is not None:        # never run twice: see Candidate.replayed
            return cand.replayed(None, self.tip, verdict, cannot_ask=self._cannot_ask(),
                                 repeats=staged.repeats)
        if staged.commit:
            self.stager.keep_old(cand)
            self.parts.setup.journal.write("replay", iteration=rec.iteration,
                                          old_commit=rec.commit, commit=staged.commit,
                                          parent=self.tip, samples=rec.samples)
            if verdict:
                notes = f" ({staged.notes})" if staged.notes else ""
                self.out(f"      iteration {rec.iteration} would be kept, but the best moved: "
                         f"replayed onto {self.tip[:7]}{notes}, measuring it again")
        step = cand.replayed(staged.commit or None, self.tip, verdict, staged.problem or "",
                             staged.notes, self._cannot_ask())
        if staged.commit:
            self.stager.adopt(cand, rec.parent, staged.commit)
        return step

    def _cannot_ask(self) -> str:
        """Why the proposer cannot be asked again now ("" when it can)."""
        if self.stop is not None:
            return "the loop stopped before it could be proposed again"
        if self.cost_reserved() >= (self.config.max_cost_usd or float("inf")):
            return "the LLM cost budget leaves no room to propose it again"
        return ""

    def _repropose(self, cand: Candidate, step: Repropose) -> None:
        """Its change does not apply to the tip: ask the proposer again, on the tip, for the
        same iteration (told what the change was); `_restage` stages the answer."""
        rec = cand.rec
        self.stager.keep_old(cand)
        self.flight.await_answer(cand, step)
        if step.repeats is not None:    # on the tip it repeats a change: ask for another
            self.ask(rec.iteration)
            self.out(f"      iteration {rec.iteration} was proposed on an older best; on the "
                     f"best now it is iteration {step.repeats}'s change: asking for another")
            return
        self.ask(rec.iteration, Redo(rec.description, cand.patch, step.why,
                                     step.verdict.reason if step.verdict else ""))
        what = "would be kept, but its change" if step.verdict else "was proposed on an " \
            "older best, and its change"
        self.out(f"      iteration {rec.iteration} {what} does not apply to the best now "
                 f"({step.why}): proposing it again on {self.tip[:7]}")

    def _restage(self, cand: Candidate, base: str, program_sha: str,
                 proposal: Proposal) -> None:
        """The proposer's answer for a candidate proposed again: staged on `base` (the tip
        when asked) and measured there from scratch, or the candidate ends saying why not."""
        step = self.flight.answered(cand.iteration)
        assert step is not None
        rec = cand.rec
        self._paid(proposal.usage.cost_usd)
        for key, value in vars(proposal.usage).items():
            rec.usage[key] = rec.usage.get(key, 0) + value
        staged = self.stager.proposal(rec.iteration, base, proposal)
        if staged.repeats is not None:
            staged = Staged(problem=f"it repeats iteration {staged.repeats}'s change")
        if not staged.commit:
            return self.carry_out(cand, cand.reproposed(None, base, step.verdict, step.why,
                                                         problem=staged.problem or "",
                                                         repeats=step.repeats))
        self.parts.setup.journal.write("replay", iteration=rec.iteration, old_commit=rec.commit,
                                      commit=staged.commit, parent=base, samples=rec.samples,
                                      description=proposal.description)
        cand.proposal = proposal
        next_step = cand.reproposed(staged.commit, base, step.verdict, step.why,
                                    proposal.description, repeats=step.repeats)
        self.stager.adopt(cand, base, staged.commit)
        self.carry_out(cand, next_step)

    # -- run --------------------------------------------------------------------------

    def _run(self, cand: Candidate, step: Run) -> None:
        """Queue the runs asked for: the candidate's, and the best's beside them."""
        settings = settings_of(self.parts.task)
        for key in step.keys:
            mine = key.kind is RunKind.CANDIDATE
            rule = rule_for(settings, self.score.best_curves, cand.patch) \
                if mine and not cand.baseline else None
            self._queue(cand.iteration, key, cand.rec.commit if mine else self.tip,
                        cand.rec.run_id, rule)
        self.sched.dispatch()

    def _cancel(self, cand: Candidate) -> Step:
        """A run failed: its waiting runs are dropped, its running ones killed."""
        n = cand.iteration
        dropped = self.sched.drop_where(
            lambda j: j.iteration == n and j.key.kind is not RunKind.REMEASURE)
        self.sched.cancel(lambda j: j.iteration == n and j.key.kind is RunKind.CANDIDATE)
        return cand.forget({j.key for j in dropped})

    def _queue(self, n: int, key: RunKey, commit: str, run_id: str, rule=None) -> None:
        # its environment is made where it runs (loop/run/spec.py), from the job and the task
        job = RunJob.make(n, key, commit, run_id, self.config.seed, self.sink.log_path(n, key),
                          self.parts.setup.dir / "runs" / f"{n:04d}-{key.number}")
        job.stop_rule = rule         # a candidate's run: stopped once clearly worse
        self.sched.add(job)

    def _handle(self, event: Event) -> None:
        if not isinstance(event, RunEnded):
            return                              # a proposal is ready: _plan takes it
        job, result = event.job, event.result
        self.sched.finished(job)
        self.progress.run_finished(job.lane)
        value = check_ended(self.parts, job, result, self.snapshot, self.tip)
        key = job.key
        if key.kind is not RunKind.CANDIDATE:   # a run of the best
            best_measured(self.parts, job, result, value)
            if key.kind is RunKind.REMEASURE:
                return self._best_runs_done(key)
        else:
            measured(self.parts, self.flight[job.iteration].rec, job, result)
        cand = self.flight[job.iteration]
        self.carry_out(cand, cand.ran(key, value, result.status, result.detail,
                                       result.curve))

    def _remeasure_best(self, n: int, wanted: int) -> None:
        """Run the best state again (new seeds): its mean corrects a lucky keep, and the runs
        refresh the noise estimate. Journalled, logged on the parent run; not a row. After a
        keep it needs R runs: they go to free slots at once."""
        have = len(self.score.best_samples)
        for i in range(max(1, min(wanted, self.sched.free()))):
            key = RunKey.best(have + i)
            self.flight.best_runs.add(key)
            self._queue(n, key, self.tip, self.parts.tracker.parent_id or "")

    # -- judge ------------------------------------------------------------------------

    def _verdict(self, cand: Candidate) -> judging.Verdict:
        if cand.baseline:
            return judging.judge_baseline(cand.rec.samples, self.config.judge)
        return self.score.judge(cand.rec, self.parts.task.metric.direction, self.config.judge)

    def _best_runs_done(self, key: RunKey) -> None:
        """Candidates held for the best's re-runs are judged once all of them are in."""
        self.flight.best_runs.discard(key)
        if not self.flight.best_runs:
            for cand in self.flight.release_held():     # in the order they began
                self.carry_out(cand, cand.judged(self._verdict(cand), self.tip,
                                                  self.sched.free()))

    # -- keep or restore, record ------------------------------------------------------

    def _finish(self, cand: Candidate) -> None:
        """Settle the git side, journal the record, then move the branch (resume-safe order)."""
        rec = cand.rec
        self.keeper.conclude(cand)
        self.flight.end(rec.iteration)   # (resume makes the branch move, rows, MLflow)
        self.tip = self.keeper.keep_or_restore(rec, self.tip)
        self.keeper.record(cand)
        if cand.baseline and rec.kept:
            exact = self._floor(rec.samples)
            if exact is not None:
                self.out(self.keeper.exact_note(*exact))
        if cand.baseline and not rec.kept:
            self.stop = self.keeper.baseline_failed(rec)

    def _floor(self, samples: list) -> tuple[list[float], float] | None:
        """Baseline runs that all gave one value: the judge's min_delta becomes one printed
        unit for the rest of the night (again on every resume)."""
        exact = exact_runs(samples)
        if exact is not None:
            self.config = with_floor(self.config, exact[1])
        return exact

    # -- stopping ---------------------------------------------------------------------

    def _drop_proposals(self, wait: bool) -> None:
        """Proposals made but not started when the loop stops: their cost is journalled."""
        for n, proposal in self.proposals.drop_all(wait):
            cost = proposal.usage.cost_usd if proposal else 0.0
            self._paid(cost)
            self.parts.setup.journal.write("drop", iteration=n, cost_usd=cost,
                                          description=proposal.description if proposal else "")
        # candidates whose change did not apply, waiting to be proposed again: no time now
        for cand in self.flight.awaiting():
            step = self.flight.answered(cand.iteration)
            if wait and step is not None:
                self.carry_out(cand, cand.replayed(
                    None, self.tip, step.verdict, step.why, repeats=step.repeats,
                    cannot_ask="the loop stopped before it was proposed again"))

    def interrupted(self) -> None:
        """Ctrl-C / SIGTERM: kill every run in flight, roll back every open step."""
        self.sched.drop_all()
        self.sched.cancel_all()
        self.proposals.cancel_all()          # an LLM request in flight ends now
        self.parts.backend.close()
        self._drop_proposals(wait=False)
        for cand in self.flight.by_iteration():   # the redo will reuse attempt-<n>
            abandon(self.parts, cand.iteration, cand.rec.time,
                    "" if cand.baseline else cand.rec.commit, cand.rec.run_id)
        self.flight.clear()
        self.parts.setup.workspace.restore()
