"""Set-up, resume and interruption for the engine: make git, results.tsv and MLflow agree
with the journal before the loop goes on, and leave them agreeing when it is stopped.

A mixin of `loop.engine.Engine` (it uses the engine's fields); kept apart so that engine.py
reads as the loop."""
from __future__ import annotations

import hashlib
import signal
from dataclasses import replace

from loop import grading
from loop.backends import make_backend
from loop.errors import UsageError
from loop.journal import Record, replay
from loop.preflight import check_same_task
from loop.runner import kill_marked
from loop.scheduler import ProposalQueue, Scheduler, slot_envs
from loop.task import Task, load_task
from loop.tracking import Tracker, resolve_uri, store_paths, write_results
from loop.words import resume_line


class Recovery:
    # -- set-up and resume ---------------------------------------------------------
    def _check_committed(self, task: Task) -> None:
        if self.workspace.branch_exists():
            return
        if not self.workspace.committed(f"{self.task_rel}/task.yaml".lstrip("/")):
            raise UsageError(f"{self.task_rel or '.'}/task.yaml is not committed: the loop runs "
                             f"on a branch from HEAD, so commit the task first")
        dirty = self.workspace.git.status("--porcelain", "--", task.root.as_posix())
        if dirty:
            self.out(f"note: uncommitted changes under {self.task_rel or '.'} are not part of "
                     f"this run (the branch starts at HEAD)")

    def _open(self) -> None:
        state = replay(self.journal.load())
        check_same_task(state.start, self.task_rel, self.user_task.metric.name,
                        self.user_task.metric.direction, self.tag)
        for note in self.journal.notes:
            self.out(f"resume: {note}")
        self.workspace.open()
        wt_task = self.workspace.worktree / self.task_rel
        task = load_task(wt_task, origin=self.repo_root / self.task_rel)
        if self.config.time_budget_s:
            task = replace(task, time_budget_s=self.config.time_budget_s)
        self.task = task
        self.guard = grading.Guard.at_commit(task, self.workspace, self.task_rel,
                                             self.dir / "pristine")  # what grading trusts
        start = state.start or {}
        uri = resolve_uri(self.config.tracking.uri or start.get("tracking_uri"))
        experiment = self.config.tracking.experiment or start.get("experiment") \
            or f"autoresearch/{task.name}"
        for path in store_paths(uri):       # keep the store out of the user's `git status`
            self.workspace.ignore_path(path)
        self.tip = self.workspace.tip()
        envs = slot_envs(self.config.workers, self.config.devices) \
            if self.config.backend == "local" else [{}] * self.config.workers  # Ray: per node
        self.backend = make_backend(self.config.backend, workspace=self.workspace, task=task,
                                    task_rel=self.task_rel, guard=self.guard, slot_envs=envs,
                                    slot_root=self.repo_root / ".autoresearch" / ".slots" / self.tag,
                                    limits=self.limits)   # out of the state folder
        self.sched = Scheduler(self.backend)
        self.sched.on_start = self._started
        self.proposals = ProposalQueue(self.proposer, self.config.proposer.concurrency,
                                       self.sched.events)
        params = {"task": task.name, "task_path": self.task_rel, "branch": self.workspace.branch,
                  "proposer": self.config.proposer.kind, "model": self.config.proposer.model,
                  "judge": self.config.judge.rule, "metric": task.metric.name,
                  "direction": task.metric.direction, "time_budget_s": task.time_budget_s,
                  "seed": self.config.seed, "workers": self.config.workers,
                  "backend": self.config.backend, "sandbox": self.sandbox}
        if not state.start:         # journalled before MLflow creates anything (resume-safe)
            self.journal.write("start", tag=self.tag, branch=self.workspace.branch,
                               base_commit=self.workspace.tip(), task=self.task_rel,
                               metric=task.metric.name, direction=task.metric.direction,
                               tracking_uri=uri, experiment=experiment, parent_run_id=None)
        by_iter = {r.iteration: r for r in state.records}
        self.tracker = Tracker(    # opens MLflow in the background; writes queue and retry
            uri, experiment, self.tag, hashlib.sha256(str(self.dir).encode()).hexdigest()[:12],
            parent_run_id=start.get("parent_run_id"), params=params,
            parent_tags={"git.branch": self.workspace.branch, "sandbox": self.sandbox},
            known_run_ids=[by_iter[n].run_id for n in state.untracked],
            on_parent=lambda run_id: self.journal.write("start_tracking", parent_run_id=run_id),
            on_tracked=self._tracked,
            warn=self.out)
        self._recover(state)

    def _recover(self, state) -> None:
        """Make git, results.tsv and MLflow agree with the journal before going on."""
        for n, b in sorted(state.open_begins.items()):   # steps cut off: roll each back
            self.out(f"resume: iteration {n} was interrupted; redoing it")
            if b.get("run_id") and kill_marked(f"AUTORESEARCH_RUN_ID={b['run_id']}"):
                self.out("resume: killed the experiment processes the interrupted step left")
            if b.get("commit"):
                self._keep_interrupted(b)
            if b.get("run_id"):
                self.tracker.abandon(b["run_id"])
            self.journal.write("abandon", iteration=n)
        parent_id = (state.start or {}).get("parent_run_id")
        if parent_id and kill_marked(f"AUTORESEARCH_RUN_ID={parent_id}"):
            self.out("resume: killed re-runs of the best the interrupted loop left")
        self.records = state.records
        for rec in self.records:
            if rec.kept and rec.commit != rec.parent and self.workspace.tip() == rec.parent:
                self.workspace.advance(rec.commit, rec.parent)   # the keep's ref move was lost
                self.workspace.keep_ref(f"attempt-{rec.iteration}", rec.commit)
        self.tip = self.workspace.tip()
        self.workspace.restore()
        for item in state.measured:   # every measurement again, in the order it was made
            if isinstance(item, Record):
                self.score.add(item)
                self.cost += item.usage.get("cost_usd", 0.0)
            else:
                self.score.remeasured(item.get("value"))
        self.cost += state.dropped_cost
        by_iter = {r.iteration: r for r in self.records}
        while self.rows_written in by_iter:
            self.rows_written += 1
        write_results(self.results_path, self.task.metric.name, self._rows())
        for n in state.untracked:                 # MLflow missed these: log them now
            rec = by_iter[n]
            patch = self.workspace.diff(rec.parent, rec.commit)[0] if rec.attempt_ref else ""
            self._track(rec, patch)
        if self.records:
            self.out(resume_line(self.tag, self.records, self.task.metric.name,
                                 self.score.best_value()))

    def _drop_proposals(self, wait: bool) -> None:
        """Proposals made but not started when the loop stops: their cost is journalled."""
        for n, proposal in self.proposals.drop_all(wait):
            cost = proposal.usage.cost_usd if proposal else 0.0
            self.cost += cost
            self.journal.write("drop", iteration=n, cost_usd=cost,
                               description=proposal.description if proposal else "")

    def _interrupted(self) -> None:
        """Ctrl-C / SIGTERM: kill every run in flight, roll back every open step."""
        self.sched.drop(lambda j: False)
        self.sched.cancel(lambda j: True)
        self.backend.close()
        self._drop_proposals(wait=False)
        for n, cand in sorted(self.cands.items()):
            if cand.rec.commit and not cand.baseline:    # the redo will reuse attempt-<n>
                self._keep_interrupted({"iteration": n, "time": cand.rec.time,
                                        "commit": cand.rec.commit})
            if cand.rec.run_id:
                self.tracker.abandon(cand.rec.run_id)
            self.journal.write("abandon", iteration=n)
        self.cands.clear()
        self.workspace.restore()

    def _keep_interrupted(self, begin: dict) -> None:
        self.workspace.keep_ref(f"interrupted-{begin['iteration']}-{int(begin['time'])}",
                                begin["commit"])

    def _note_steering(self, n: int, sha: str) -> None:
        """One line when program.md changed since the last iteration that read it."""
        last = self._program_sha or next(
            (r.program_sha for r in sorted(self.records, key=lambda r: -r.iteration)
             if r.program_sha), None)
        self._program_sha = sha
        if last and sha != last:
            who = (" (the mutate proposer does not read it)"
                   if self.config.proposer.kind == "mutate" else "")
            self.out(f"steering: {self.program_path.name} changed ({last} -> {sha}); "
                     f"iteration {n} is the first to use it{who}")

    @staticmethod
    def _install_signals() -> None:
        """SIGTERM (a scheduler, `kill`) and SIGHUP (the terminal closed) stop like Ctrl-C:
        cleanly, nothing lost."""
        def handler(signum, frame):
            raise KeyboardInterrupt
        try:
            signal.signal(signal.SIGTERM, handler)
            signal.signal(signal.SIGHUP, handler)
        except ValueError:
            pass  # not the main thread (tests): Ctrl-C handling still applies
