"""The loop: baseline, then propose -> apply -> run -> judge -> keep or restore -> log.

Resume: the journal is the truth. On start the engine replays it, rolls back a step that
was cut off, finishes a keep whose branch move was lost, and brings results.tsv and MLflow
up to date; then it carries on from the next iteration."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path

from loop import grading, judge as judging
from loop.config import Config
from loop.errors import UsageError
from loop.journal import Journal, Record, TagLock, record_dict, replay
from loop.proposers.base import Attempt, Context, Proposal, ProposerFatal, make_proposer
from loop import sandbox
from loop.runner import (OK, Limits, RunResult, experiment_env, kill_marked, read_tail,
                         run_experiment)
from loop.scoreboard import BASELINE, Scoreboard
from loop.progress import Progress, planned_runs
from loop.status import commit_message, kept_changes, num, plural, resume_line
from loop.task import Task, load_task
from loop.faults import disk_full_message, is_disk_full, log_says_disk_full
from loop.gitsafe import DiskFull
from loop.integrity import StateGuard
from loop.preflight import check_run_command, check_same_task
from loop.tracking import (Tracker, append_result, resolve_uri, results_text, store_paths,
                           write_results)
from loop.workspace import Workspace, worktree_path

REMEASURE_RUN = 100    # run numbers from here on are re-measurements of the best state
FAILURES = ("crash", "timeout", "diverged", "no_metric", "bad_edit")


@dataclass
class Stop:
    reason: str           # iterations | wall_clock | failures | cost | stop_file | proposer | baseline
    message: str
    exit_code: int = 0


def default_tag() -> str:
    return time.strftime("%b%d").lower()


def state_dir(repo_root: Path, tag: str) -> Path:
    return repo_root / ".autoresearch" / tag


class Engine:
    def __init__(self, config: Config, out=print, proposer=None, progress=None):
        self.config = config
        self.out = out
        self.progress = progress or Progress(out)    # run/iteration lines, or a live panel
        user_task = load_task(config.resolve(config.task))        # clear errors first
        self.repo_root = Workspace.find_repo_root(user_task.root)
        self.task_rel = user_task.root.relative_to(self.repo_root).as_posix()
        self.tag = config.tag or default_tag()
        self.dir = state_dir(self.repo_root, self.tag)
        self.journal = Journal(self.dir / "journal.jsonl")
        self.results_path = self.dir / "results.tsv"
        self.workspace = Workspace(self.repo_root, self.tag,
                                   worktree_path(self.repo_root, self.tag))
        self.state_guard = StateGuard(self.workspace, self.journal, self.results_path, lambda: (
            results_text(self.task.metric.name, self.records) if self.results_path.exists()
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
        params = {"task": task.name, "task_path": self.task_rel, "branch": self.workspace.branch,
                  "proposer": self.config.proposer.kind, "model": self.config.proposer.model,
                  "judge": self.config.judge.rule, "metric": task.metric.name,
                  "direction": task.metric.direction, "time_budget_s": task.time_budget_s,
                  "seed": self.config.seed, "sandbox": self.sandbox}
        if not state.start:         # journalled before MLflow creates anything (resume-safe)
            self.journal.write("start", tag=self.tag, branch=self.workspace.branch,
                               base_commit=self.workspace.tip(), task=self.task_rel,
                               metric=task.metric.name, direction=task.metric.direction,
                               tracking_uri=uri, experiment=experiment, parent_run_id=None)
        by_iter = {r.iteration: r for r in state.records}
        self.tracker = Tracker(
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
        if state.open_begin:                  # a step cut off mid-way: roll it back
            b = state.open_begin
            self.out(f"resume: iteration {b['iteration']} was interrupted; redoing it")
            if b.get("run_id") and kill_marked(f"AUTORESEARCH_RUN_ID={b['run_id']}"):
                self.out("resume: killed the experiment processes the interrupted step left")
            if b.get("commit"):
                self._keep_interrupted(b)
            if b.get("run_id"):
                self.tracker.abandon(b["run_id"])
            self.journal.write("abandon", iteration=b["iteration"])
        self.records = state.records
        for rec in self.records:
            if rec.kept and rec.commit != rec.parent and self.workspace.tip() == rec.parent:
                self.workspace.advance(rec.commit, rec.parent)   # the keep's ref move was lost
                self.workspace.keep_ref(f"attempt-{rec.iteration}", rec.commit)
        self.workspace.restore()
        remeasures = {}
        for e in state.remeasures:
            remeasures.setdefault(e["iteration"], []).append(e["value"])
        for rec in self.records:     # replay every measurement in the order it was made
            for value in remeasures.pop(rec.iteration, []):
                self.score.remeasured(value)
            self.score.add(rec)
            self.cost += rec.usage.get("cost_usd", 0.0)
        for values in remeasures.values():      # runs of the best after the last record
            for value in values:
                self.score.remeasured(value)
        write_results(self.results_path, self.task.metric.name, self.records)
        by_iter = {r.iteration: r for r in self.records}
        for n in state.untracked:                 # MLflow missed these: log them now
            rec = by_iter[n]
            patch = self.workspace.diff(rec.parent, rec.commit)[0] if rec.attempt_ref else ""
            self._track(rec, patch)
        if self.records:
            self.out(resume_line(self.tag, self.records, self.task.metric.name,
                                 self.score.best_value()))

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
        """Stop cleanly: the journal (if it can still be written) says why; whatever step
        was open is rolled back and redone on resume, as after a kill."""
        stop = Stop("disk_full", disk_full_message(exc), 1)
        try:
            self.journal.write("stop", reason=stop.reason, message=stop.message)
        except OSError:
            pass
        for cleanup in (self.workspace.restore,
                        lambda: hasattr(self, "tracker") and self.tracker.close("FAILED", 5.0)):
            try:
                cleanup()
            except Exception:
                pass
        return stop

    def _run(self) -> Stop:
        self._install_signals()
        self._open()
        started = time.monotonic()
        stop = None
        try:
            while stop is None:
                n = len(self.records)
                stop = self._should_stop(n, started)
                if stop is None:
                    stop = self._iteration(n)
        except KeyboardInterrupt:
            self._interrupted()
            self.tracker.close("KILLED")
            return Stop("interrupted", "interrupted: experiment killed, worktree restored", 130)
        except ProposerFatal as exc:
            stop = Stop("proposer", f"stopped: {exc}", 1)
        self.journal.write("stop", reason=stop.reason, message=stop.message)
        self.tracker.close("FINISHED" if stop.exit_code == 0 else "FAILED")
        return stop

    def _should_stop(self, n: int, started: float) -> Stop | None:
        cfg = self.config
        if n > cfg.iterations:
            return Stop("iterations", f"done: {plural(cfg.iterations, 'iteration')} after the "
                                      f"baseline")
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

    def _iteration(self, n: int) -> Stop | None:
        program, program_sha = self._program()
        self._note_steering(n, program_sha)
        tip = self.workspace.tip()
        baseline = self.score.best is None    # also after a failed baseline, on resume
        if self.score.needs_remeasure(self.config.judge):
            self._remeasure_best(n, tip)
        if baseline:
            proposal, problem = Proposal(BASELINE), None
        else:
            try:
                proposal = self.proposer.propose(self._context(n, program))
            except (ProposerFatal, KeyboardInterrupt):
                raise
            except Exception as exc:     # a proposer bug costs an iteration, not the night
                proposal = Proposal("proposer error", error=f"proposer raised "
                                    f"{type(exc).__name__}: {exc}")
            problem = proposal.error or self._check(proposal)
        self.cost += proposal.usage.cost_usd
        run_id = self.tracker.start_iteration(self.tag, n)
        commit = tip if baseline else ("" if problem else
                                       self.workspace.stage(self.task_rel, proposal.files,
                                                            proposal.description))
        self.journal.write("begin", iteration=n, run_id=run_id, parent=tip, commit=commit,
                           description=proposal.description)
        rec = Record(iteration=n, status="bad_edit", description=proposal.description,
                     reason=problem or "", parent=tip, run_id=run_id, commit=commit,
                     program_sha=program_sha, seed=self.config.seed, time=time.time(),
                     best_before=self.score.best_value(), usage=vars(proposal.usage).copy())
        if commit and not baseline:
            rec.attempt_ref = self.workspace.keep_ref(f"attempt-{n}", commit)
            patch, rec.lines_added, rec.lines_removed = self.workspace.diff(tip, commit)
        else:
            patch = ""
        if not problem:
            self._measure_and_judge(rec, baseline)
        self._finish(rec, tip)
        self._track(rec, patch, proposal)
        self.progress.iteration_done(rec, self.task.metric, self.config.iterations)
        if baseline and rec.status != "keep":
            return Stop("baseline", f"stopped: the baseline failed ({rec.status}: {rec.reason}); "
                                    f"see {self._log_path(n, 0)}", 1)
        return None

    def _measure_and_judge(self, rec: Record, baseline: bool) -> None:
        """Run the attempt (the baseline R times), judging after each run; `rerun` = again."""
        cfg = self.config.judge
        while True:
            result = self._run_once(rec, len(rec.samples))
            if result.status != OK:
                rec.status, rec.reason = result.status, result.detail
                return
            rec.samples.append(result.metric)
            if not baseline or not judging.should_remeasure_best(rec.samples, cfg):
                break
        if baseline:
            rec.status, rec.reason = "keep", "baseline"
            return
        while True:
            verdict = self.score.judge(rec, self.task.metric.direction, cfg)
            if verdict.action != judging.RERUN:
                break
            # also_best: a run of the best right before, so both are measured in one period
            best_run = self._remeasure_best(rec.iteration, rec.parent) \
                if verdict.also_best else None
            again = self._run_once(rec, len(rec.samples))
            if again.status != OK:
                verdict = judging.Verdict(judging.DISCARD, f"confirmation run: {again.status}",
                                          verdict.stats)
                break
            rec.samples.append(again.metric)
            if best_run is not None:
                rec.pairs.append([again.metric, best_run])
        rec.status, rec.reason, rec.stats = verdict.action, verdict.reason, verdict.stats

    def _run_once(self, rec: Record, k: int) -> RunResult:
        n, task = rec.iteration, self.task
        run_dir = self.dir / "runs" / f"{n:04d}-{k}"
        artifacts = grading.fresh_dir(run_dir / "artifacts")
        env = experiment_env({**grading.task_env(task),
                              "AUTORESEARCH_SEED": str(self._seed(n, k)),
                              "AUTORESEARCH_TIME_BUDGET": f"{task.time_budget_s:g}",
                              "AUTORESEARCH_ARTIFACT_DIR": str(artifacts),
                              "AUTORESEARCH_ITERATION": str(n),
                              "AUTORESEARCH_RUN_ID": rec.run_id})
        if k > 0:          # a confirmation run starts from the attempt's files, not the last run's
            self.workspace.materialize(rec.commit)
        cwd = self.workspace.worktree / self.task_rel
        grader = run_dir / "grader"

        def before_grading():  # the run has ended; the grader's copy is made only now
            kill_marked(f"AUTORESEARCH_RUN_ID={rec.run_id}")
            return self.guard.before_grading(
                cwd, artifacts, lambda: self.workspace.export(rec.commit, self.task_rel, grader))
        self.progress.run_started(0, rec, k, planned_runs(self.config.judge, rec.description
                                                          == BASELINE), task.time_budget_s,
                                  self.config.iterations)
        before = self.state_guard.before_run()
        result = run_experiment(task.run, cwd, env, task.time_budget_s + task.grace_s,
                                self._log_path(n, k), task.metric.pattern, task.memory_pattern,
                                task.evaluate, grader / self.task_rel, task.grace_s,
                                self.guard.grader_env(env), before_grading, self.limits)
        self.progress.run_finished(0)
        grading.remove(grader)                      # a copy of the task folder per run adds up
        if result.status != OK and log_says_disk_full(result.log_path):
            raise DiskFull(f"a write of the experiment failed, see {result.log_path}")
        rec.wall_s += result.wall_s
        if task.throughput_pattern and result.status == OK:   # the machine's speed, per run
            rec.throughput.append(task.throughput(read_tail(self._log_path(n, k))))
        if result.memory_gb is not None:
            rec.memory_gb = max(rec.memory_gb or 0.0, result.memory_gb)
        tampered = self.state_guard.after_run(before, f"{n}-{k}") \
            or grading.check_branch(self.workspace, rec.parent, n)
        problem = self.guard.check_folder(cwd)
        if tampered or problem:
            result.status, result.metric = "crash", None
            result.detail = tampered or f"tampered: the run {problem}"
        return result

    def _finish(self, rec: Record, tip: str) -> None:
        """Settle the git side, journal the record, then move the branch (resume-safe order)."""
        metric = self.task.metric
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
        if rec.kept and rec.commit != tip:
            self.workspace.advance(rec.commit, tip)
        self.workspace.restore()
        if not rec.kept:   # a discarded attempt's checkpoints are not worth the disk
            for run_dir in (self.dir / "runs").glob(f"{rec.iteration:04d}-*"):
                shutil.rmtree(run_dir, ignore_errors=True)
        self.records.append(rec)
        append_result(self.results_path, metric.name, rec, self.records)

    def _track(self, rec: Record, patch: str = "", proposal: Proposal | None = None) -> None:
        """Project a finished record into MLflow, then journal that it is there."""
        artifacts = {"run.log": self._log_path(rec.iteration, 0)}
        for k in range(1, len(rec.samples)):
            artifacts[f"run{k}.log"] = self._log_path(rec.iteration, k)
        if patch:
            artifacts["diff.txt"] = patch    # .txt: the MLflow UI previews it, not .patch
        if proposal and self.config.proposer.log_prompts:
            artifacts.update(proposal.artifacts)
        params = {"iteration": rec.iteration, "parent_commit": rec.parent,
                  "program_sha": rec.program_sha, "seed": rec.seed,
                  "proposer": self.config.proposer.kind, "model": self.config.proposer.model,
                  "time_budget_s": self.task.time_budget_s}
        tags = {"git.branch": self.workspace.branch, "iteration": rec.iteration,
                "program_sha": rec.program_sha}
        if rec.description == BASELINE and rec.kept:
            tags["status"] = "baseline"   # not a kept change: `status=keep` runs = branch commits
        # queued and retried when MLflow is busy; journals `tracked` once it is in
        self.tracker.finish_iteration(rec, self.task.metric.name, params, tags, artifacts,
                                      kept_changes(self.records))

    def _tracked(self, n: int, run_id: str) -> None:
        """An iteration is in MLflow; a run created late replaces its pending id."""
        self.journal.write("tracked", iteration=n, run_id=run_id)
        for rec in self.records:
            if rec.iteration == n and rec.run_id != run_id:
                rec.run_id = run_id
                write_results(self.results_path, self.task.metric.name, self.records)

    def _remeasure_best(self, n: int, tip: str) -> float | None:
        """Run the best state once more (new seed): its mean corrects a lucky keep, and the
        runs refresh the noise estimate. Journalled, logged on the parent run; not a row."""
        probe = Record(iteration=n, status="remeasure", description="re-measure the best",
                       commit=tip, parent=tip, run_id=self.tracker.parent_id or "")
        result = self._run_once(probe, REMEASURE_RUN + len(self.score.best_samples))
        self.workspace.restore()
        value = result.metric if result.status == OK else None
        self.journal.write("remeasure", iteration=n, commit=tip, value=value,
                           status=result.status)
        self.score.remeasured(value)
        if value is None:
            self.out(f"note: re-measuring the best failed ({result.status}: {result.detail})")
            return None
        runs, best = len(self.score.best_samples), self.score.best_value()
        self.tracker.log_best(self.task.metric.name, best, runs, n)
        self.out(f"      re-measured the best: {num(value)}; best is now the mean of "
                 f"{runs} runs, {num(best)}")
        return value

    # -- helpers --------------------------------------------------------------------
    def _seed(self, n: int, k: int) -> int:
        """A fresh, reproducible seed for run k of iteration n ($AUTORESEARCH_SEED)."""
        return self.config.seed + 1000 * n + k

    def best_value(self) -> float | None:
        return self.score.best_value()

    def _log_path(self, n: int, k: int) -> Path:
        name = (f"iter-{n:04d}.log" if k == 0 else f"iter-{n:04d}-run{k}.log"
                if k < REMEASURE_RUN else f"iter-{n:04d}-best{k - REMEASURE_RUN}.log")
        return self.dir / "logs" / name

    def _program(self) -> tuple[str, str]:
        try:
            text = self.program_path.read_text()
        except OSError:
            return "", "none"
        return text, hashlib.sha256(text.encode()).hexdigest()[:12]

    def _context(self, n: int, program: str) -> Context:
        files = self.workspace.read_files(self.task_rel, self.task.editable_files(
            self.workspace.worktree / self.task_rel))
        failures = [r for r in self.records if r.status in FAILURES][-2:]
        history = [Attempt(r.iteration, r.description, r.status, r.metric, r.delta, r.reason,
                           self._tail(r) if r in failures else "")
                   for r in self.records if r.description != BASELINE]
        return Context(n, self.task, files, program, history, self.score.best_value(),
                       self.config.seed + n, judging.estimate_noise(self.score.history))

    def _tail(self, rec: Record) -> str:
        path = self._log_path(rec.iteration, 0)
        return read_tail(path, 3000) if path.exists() else ""

    def _check(self, proposal: Proposal) -> str | None:
        if not proposal.files:
            return "the proposal changes nothing"
        for rel in proposal.files:
            reason = self.task.check_edit_path(rel)
            if reason:
                return reason
            if "\x00" in proposal.files[rel]:
                return f"{rel}: binary content"
        current = self.workspace.read_files(
            self.task_rel, [p for p in proposal.files
                            if (self.workspace.worktree / self.task_rel / p).exists()])
        if all(current.get(p) == t for p, t in proposal.files.items()):
            return "the edit changes nothing"
        return None

    def _interrupted(self) -> None:
        state = replay(self.journal.events())
        if state.open_begin and state.open_begin.get("commit"):
            self._keep_interrupted(state.open_begin)   # the redo will reuse attempt-<n>
        if state.open_begin and state.open_begin.get("run_id"):
            self.tracker.abandon(state.open_begin["run_id"])
            self.journal.write("abandon", iteration=state.open_begin["iteration"])
        self.workspace.restore()

    def _keep_interrupted(self, begin: dict) -> None:
        self.workspace.keep_ref(f"interrupted-{begin['iteration']}-{int(begin['time'])}",
                                begin["commit"])

    def _note_steering(self, n: int, sha: str) -> None:
        """One line when program.md changed since the last iteration that read it."""
        last = getattr(self, "_program_sha", None) or next(
            (r.program_sha for r in reversed(self.records) if r.program_sha), None)
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
