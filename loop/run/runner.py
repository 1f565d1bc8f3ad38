"""An experiment run: its training step, then its grading step, and what they say.

Takes a `RunSpec` (loop/run/spec.py: built once for every backend and check-task) and runs
its steps in order through loop/run/process.py (which spawns, confines, time-boxes and
reaps); here is only the experiment's logic: which step runs when, where the metric comes
from, and the status and one-line reason of the run. Knows nothing about git.
Call `run_experiment` from a thread that lives until it returns (see process.py)."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from loop.run.early_stop import Watcher
from loop.run.process import Ended, data_cache, describe_exit, execute
from loop.run.spec import GradeStep, RunSpec
from loop.words import Status

OOM_SIGNS = ("MemoryError", "Cannot allocate memory", "can't allocate memory",
             "std::bad_alloc", "out of memory")


@dataclass
class RunResult:
    status: Status               # Status.OK, Status.STOPPED or a failure (loop/words.py)
    metric: float | None
    returncode: int | None
    wall_s: float
    memory_gb: float | None
    log_path: Path
    detail: str = ""             # one line: why this status
    curve: list = field(default_factory=list)   # [[share of the budget, loss], ...]


def read_tail(path: Path, max_bytes: int = 200_000) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - max_bytes))
        return f.read().decode("utf-8", "replace")


def classify(returncode: int | None, timed_out: bool,
             metric: float | None) -> tuple[Status, str]:
    """Status and a one-line reason from how the command ended and what it printed."""
    if timed_out:
        return Status.TIMEOUT, "killed at the time budget"
    if metric is not None and not math.isfinite(metric):
        return Status.DIVERGED, f"metric is {metric}"
    if returncode != 0:
        return Status.CRASH, describe_exit(returncode)
    if metric is None:
        return Status.NO_METRIC, "exited 0 but printed no metric"
    return Status.OK, ""


_STEP = re.compile(r"\b(step|iter(?:ation)?|it|epoch)\b\s*[:=#]?\s*(\d+)", re.I)


def at_the_box(name: str, metric: float, line: int, text: str) -> tuple[Status, str]:
    """A run killed at the time box whose task says `on_timeout: last`: measured by the
    last value it printed (its last evaluation), said so in its reason. A NaN is diverged."""
    step = _STEP.search(text)
    where = f"line {line}" + (f", {step[1].lower()} {step[2]}" if step else "")
    said = f"{name} {metric:.6g} at the time box (last printed value, {where})"
    return (Status.OK if math.isfinite(metric) else Status.DIVERGED), said


def grader_error(grade_log: str, fallback: str) -> str:
    """A failed grader's reason: its last `error: ...` line (else its last line), so a refused
    submission reads as the grader's word, not as `exit code 1`."""
    lines = [line.strip() for line in grade_log.splitlines() if line.strip()]
    said = [line for line in lines if line.lower().startswith("error")] or lines[-1:]
    return f"grader: {said[-1][:300]} ({fallback})" if said else fallback


def handover_error(log: str, fallback: str) -> str:
    """A training step that could not hand its model over (loop/run/graders/handover.py) says
    why in one `handover: ...` line: that line is the crash reason."""
    said = [line.strip() for line in log.splitlines() if line.startswith("handover: ")
            and not line.startswith("handover: model exported")]
    return f"{said[-1][:300]} ({fallback})" if said else fallback


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(: .*)?$")


def exception_error(log: str, fallback: str) -> str:
    """A Python crash's reason: the exception line that ends the log's last traceback
    (`NameError: name 'np' is not defined`), so the journal says what broke, not only
    `exit code 1`."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return fallback
    for line in lines[starts[-1] + 1:]:
        if line and not line[0].isspace() and _EXCEPTION.match(line.rstrip()):
            return f"{' '.join(line.split())[:300]} ({fallback})"
    return fallback


def run_experiment(spec: RunSpec,
                   after_run: Callable[[], tuple[str, str] | None] | None = None) -> RunResult:
    """Run the spec's training step and, when it has one, its grading step after it.
    With a grading step, the metric comes from the grader's output only.

    `after_run()`, called once the training step has exited 0, makes the checks that
    stand between training and grading (see loop/run/grading.py); it returns None, or a
    (status, reason) that ends the run there.

    Confinement: the training step may write its folder and the artifact folder, and fill
    the data cache (process.data_cache); the paths only the grader is told of
    (`spec.hidden`, e.g. the private data) are hidden from it. The grader may write its own
    folder and the artifact folder, and reads those paths."""
    limits, patterns, log_path = spec.limits, spec.patterns, spec.log_path
    artifacts = [spec.artifacts] if spec.artifacts else []
    watch = Watcher.make(spec.progress_pattern, spec.budget_s or spec.timeout_s,
                         spec.stop_rule) if spec.progress_pattern else None
    train = execute(spec.command, spec.folder, spec.env, spec.timeout_s, log_path,
                    patterns=patterns, limits=limits,
                    writable=[*artifacts, *data_cache(spec.env)], hidden=spec.hidden,
                    readonly=spec.software, watch=watch)
    returncode, timed_out, wall = train.returncode, train.timed_out, train.wall_s
    memory = train.output.value("memory")
    curve = watch.curve() if watch else []
    if train.stopped:        # no final metric: a truncated run's number is never judged
        with open(log_path, "a") as log:
            log.write(f"\n=== {Status.STOPPED}: {train.stopped} ===\n")
        return RunResult(Status.STOPPED, None, None, wall,
                         None if memory is None else memory / 1024.0, log_path, train.stopped,
                         curve)
    # With a grading step the script's own print is never the metric (not even a NaN it
    # printed, which would read as "diverged")
    metric = None if spec.grade else train.output.value("metric")
    if after_run is not None and returncode == 0 and not timed_out:
        stopped = after_run()
        if stopped:
            with open(log_path, "a") as log:
                log.write(f"\n=== {stopped[0]}: {stopped[1]} ===\n")
            return RunResult(Status(stopped[0]), None, returncode, wall,
                             None if memory is None else memory / 1024.0, log_path, stopped[1])
    step = spec.grade if returncode == 0 and not timed_out else None
    if step is not None:
        grade = _grade(spec, step, artifacts)
        returncode, timed_out = grade.returncode, grade.timed_out
        wall += grade.wall_s
        metric = grade.output.value("metric")
        memory = memory if memory is not None else grade.output.value("memory")
    status, detail = _verdict(spec, step, train, returncode, timed_out, metric)
    return RunResult(status, metric if status in (Status.OK, Status.DIVERGED) else None,
                     returncode, wall, None if memory is None else memory / 1024.0, log_path,
                     detail, curve)


def _grade(spec: RunSpec, step: GradeStep, artifacts: list) -> Ended:
    """The grading step, confined as run_experiment says; its output appended to the run's
    log, marked."""
    grade = execute(step.command, step.folder, step.env, step.timeout_s, spec.grade_log,
                    patterns=spec.patterns, limits=spec.limits,
                    writable=[*artifacts, step.folder],
                    readonly=[*spec.hidden, *spec.software], own_compile_cache=True)
    with open(spec.log_path, "a") as log:       # one log per run, the grader's part marked
        log.write(f"\n=== evaluate: {step.command} ===\n"
                  f"{read_tail(spec.grade_log, 2 * 2**20)}")
    return grade


def _verdict(spec: RunSpec, step: GradeStep | None, train: Ended, returncode: int | None,
             timed_out: bool, metric: float | None) -> tuple[Status, str]:
    """The run's status and why, from how its last step ended and what it printed: the
    grader's error, the handed-over exception, the memory limit named where they apply."""
    log_path, limits = spec.log_path, spec.limits
    status, detail = classify(returncode, timed_out, metric)
    if status == Status.TIMEOUT and step is None and spec.on_timeout == "last" \
            and metric is not None:
        status, detail = at_the_box(spec.metric_name, metric, *train.output.line_of("metric"))
    if step is not None and status == Status.TIMEOUT:   # training had finished: the grader ran out
        detail = f"grading timed out: the grader ran past grade_timeout_s " \
                 f"({step.timeout_s:g}s) after training finished in {train.wall_s:.0f}s"
    if step is not None and status == Status.CRASH:
        detail = grader_error(read_tail(spec.grade_log), detail)
    elif status == Status.CRASH:
        tail = read_tail(log_path)
        said = handover_error(tail, detail)
        detail = said if said != detail else exception_error(tail, detail)
    if status == Status.CRASH and limits.memory_limit_gb and (train.out_of_memory or
                                                       _mentions_oom(log_path)):
        detail = f"out of memory: the run hit memory_limit_gb={limits.memory_limit_gb:g} " \
                 f"({detail})"
    return status, detail


def _mentions_oom(log_path: Path) -> bool:
    tail = read_tail(log_path, 20_000)
    return any(sign in tail for sign in OOM_SIGNS)
