"""A run as the loop sees it: the line that says it began, what its end means once checked
(a full disk stops the night; state it tampered with is undone and makes it a crash), what
a candidate's run adds to its record besides the metric, and a run of the best joining the
best's runs. Decides no keep: the state machine and the judge do."""
from __future__ import annotations

from loop.engine.lifecycle import Candidate
from loop.engine.parts import LoopParts
from loop.engine.progress import Phase
from loop.judge import judge as judging
from loop.repo.gitsafe import DiskFull, RefSnapshot
from loop.run.backends.base import grader_folder
from loop.run.faults import log_says_disk_full
from loop.run.runner import RunResult, read_tail
from loop.run.spec import RunJob
from loop.setup.config import Config
from loop.record import Record
from loop.untrusted import REASON_MAX, one_line
from loop.words import RunKind, Status, baseline_retry, failed_baseline, number_text


def announce(parts: LoopParts, config: Config, job: RunJob, cand: Candidate | None) -> None:
    """A run got a slot: the console or panel says so (which run, and why when it is not
    what it looks like)."""
    note, k = "", job.key.number
    if job.key.kind is RunKind.CANDIDATE and cand is not None:
        rec, planned = cand.rec, judging.max_runs(config.judge, cand.baseline)
        k -= cand.first_on_base               # runs on its current base: a replay starts anew
        failed = failed_baseline(parts.sink.records) if cand.baseline else None
        if failed is not None and k == 0:
            note = f"run again: {baseline_retry(failed)}"
        elif cand.replayed_onto and k == 0:
            note = f"replayed onto the new best {cand.replayed_onto[:7]}"
    else:
        rec, planned = Record(iteration=job.iteration, status="remeasure",
                              description="re-measure the best"), None
        if job.key.kind is RunKind.PAIR:
            note = f"beside iteration {job.iteration}'s run, paired"
    task = parts.task
    probe = grader_folder(job.run_dir).exists if config.backend == "local" else None
    phase = Phase(task.grade_timeout_s if task.grade_command else None, probe)
    parts.setup.progress.run_started(job.lane, rec, k, planned,
                                    task.time_budget_s + task.grace_s, config.iterations,
                                    note=note, phase=phase)


def check_ended(parts: LoopParts, job: RunJob, result: RunResult, snapshot: RefSnapshot | None,
                tip: str) -> float | None:
    """Every check at this run's end (what one leaves would be blamed on the next run); the
    run's value, None when it failed. A run that wrote the disk full stops the night."""
    if result.status != Status.OK and log_says_disk_full(result.log_path):
        raise DiskFull(f"a write of the experiment failed, see {result.log_path}")
    tampered = parts.state_guard.after_run(snapshot, f"{job.iteration}-{job.key.number}",
                                           keep_watching=True, tip=tip)
    if tampered:
        found = result.detail.startswith("tampered: ")    # its task folder, its worktree
        tampered += "; " + result.detail.removeprefix("tampered: ") if found else ""
        result.status, result.metric, result.detail = Status.CRASH, None, tampered
    result.detail = one_line(result.detail, REASON_MAX)   # built from the run's output
    return result.metric if result.status == Status.OK else None


def measured(parts: LoopParts, rec: Record, job: RunJob, result: RunResult) -> None:
    """What a run of the candidate says besides its metric: time, memory, throughput."""
    if parts.task.throughput_pattern and result.status == Status.OK:   # the machine's speed
        rec.throughput.append(parts.task.throughput(read_tail(job.log_path)))
    rec.wall_s += result.wall_s
    if result.memory_gb is not None:
        rec.memory_gb = max(rec.memory_gb or 0.0, result.memory_gb)


def best_measured(parts: LoopParts, job: RunJob, result: RunResult, value: float | None) -> None:
    """A run of the best ended (a re-run, or one beside a candidate): journal it, and it
    joins the best's runs."""
    score, out = parts.score, parts.setup.out
    curve = result.curve if value is not None else []
    parts.setup.journal.write("remeasure", iteration=job.iteration, commit=job.commit,
                             value=value, status=result.status,
                             **({"curve": curve} if curve else {}))
    score.remeasured(value, curve)
    if value is None:
        out(f"note: re-measuring the best failed ({result.status}: {result.detail})")
    else:
        runs, best = len(score.best_samples), score.best_value()
        assert best is not None   # value just joined the best's runs
        parts.tracker.log_best(parts.task.metric.name, best, runs, job.iteration)
        parts.setup.progress.best_measured(best)
        out(f"      re-measured the best: {number_text(value)}; best is now the mean of "
            f"{runs} runs, {number_text(best)}")
