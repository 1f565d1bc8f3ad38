"""Where the engine's time goes per iteration: a breakdown of benchmarks/overhead.py's loop.

Runs the same real loop (git worktree, journal, results.tsv, MLflow SQLite store, mutate
proposer, one slot, the sandbox when bwrap works) on the same trivial task, with timers
around the engine's steps; prints, per iteration (means over the iterations after the
first WARM ones, which pay MLflow's import and store set-up):

- the serial gap: from one run's process exiting to the next one's being spawned (what a
  one-slot night waits between runs), and overhead.py's figure for the same night;
- each step's own time (time in the steps it calls is theirs), on the main thread and on
  the slot's thread, and each git subcommand's calls and time.

    python benchmarks/profile_iteration.py                 # 40 iterations
    python benchmarks/profile_iteration.py --iterations 60 --cprofile 25

Only measures: the engine runs unchanged (the timers wrap functions, they change nothing
they call)."""
from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import make_repo  # noqa: E402

import loop  # noqa: E402
from loop.engine import night, records, scheduler  # noqa: E402
from loop.engine.engine import Engine  # noqa: E402
from loop.repo import gitsafe, pristine, workspace  # noqa: E402
from loop.run import grading, process, runner  # noqa: E402
from loop.run.backends import local  # noqa: E402
from loop.setup.config import Config, JudgeConfig  # noqa: E402
from loop.state import integrity, journal, results, tracking  # noqa: E402
from loop.ui import progress  # noqa: E402

WARM = 3          # iterations not counted (MLflow's import and first writes)


class Meter:
    """Self time per (thread, step): a step's time minus the time of the steps inside it."""

    def __init__(self):
        self.on = False
        self.self_s: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self.local = threading.local()
        self.exits: list[float] = []     # execute() returned: a run's process was reaped
        self.spawns: list[float] = []    # execute() was called: a run's process is next
        self.counted_from = 0.0
        self.in_gap = False              # between a run's exit and the next run's spawn
        self.gap_s: dict[tuple[str, str], float] = defaultdict(float)
        self.timeline: list[tuple[float, float, str, str]] = []   # (start, end, thread, step)

    def reset(self) -> None:
        self.self_s.clear()
        self.calls.clear()
        self.on = True

    def timed(self, step, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            name = step(args) if callable(step) else step
            stack = self.local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            started = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent = time.perf_counter() - started
                inner = stack.pop()
                if stack:
                    stack[-1] += spent
                if self.on:
                    key = (thread_kind(), name)
                    self.self_s[key] += spent - inner
                    self.calls[key] += 1
                    if self.in_gap:
                        self.gap_s[key] += spent - inner
                    self.timeline.append((started, started + spent, key[0], name))
        return wrapper


def thread_kind() -> str:
    name = threading.current_thread().name
    return "main" if name == "MainThread" else "slot" if name.startswith("slot-") else "other"


def patch(meter: Meter, owner, attr: str, step) -> None:
    """Wrap owner.attr, and every loop module's reference to the same function (a step the
    code no longer has is left out, said on stderr)."""
    fn = getattr(owner, attr, None)
    if fn is None:
        print(f"note: {getattr(owner, '__name__', owner)}.{attr} not found: not timed",
              file=sys.stderr)
        return
    wrapped = meter.timed(step, fn)
    setattr(owner, attr, wrapped)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("loop.") and mod.__dict__.get(attr) is fn:
            setattr(mod, attr, wrapped)


def instrument(meter: Meter) -> None:
    git_step = lambda a: f"git {a[0][0]}"   # noqa: E731  (args of run_git: the argv first)
    patch(meter, gitsafe, "run_git", git_step)
    steps = [
        (gitsafe.RepoGuard, "_restore_files", "config guard: compare .git/config, hooks"),
        (gitsafe.RepoGuard, "_refs", "ref guard: list refs"),
        (pristine, "sweep", "pristine sweep (walk)"),
        (workspace.Workspace, "stage_on", "stage the proposal"),
        (workspace.Workspace, "diff", "diff of the attempt"),
        (workspace.Workspace, "restore", "restore the worktree"),
        (workspace.Workspace, "materialize", "materialize the attempt"),
        (integrity.StateGuard, "after_run", "tamper check (after a run)"),
        (journal.Journal, "write", "journal write"),
        (journal.Journal, "verify", "journal verify"),
        (results, "append_result", "results.tsv"),
        (results, "write_results", "results.tsv"),
        (tracking.Tracker, "start_iteration", "MLflow: create the run (serial)"),
        (tracking.Tracker, "resolve", "MLflow: resolve a pending id"),
        (records.RecordSink, "flush", "MLflow: log records (beside the run)"),
        (scheduler.Scheduler, "next_event", "waiting for an event"),
        (scheduler.Scheduler, "dispatch", "dispatch (start a slot thread)"),
        (night.Loop, "ask", "proposal context (prompt.build)"),
        (night.Loop, "_plan", "plan: other"),
        (night.Loop, "_start", "start a candidate: other"),
        (night.Loop, "_handle", "handle a run's end: other"),
        (night.Loop, "_finish", "finish an iteration: other"),
        (grading.Guard, "check_folder", "protected files: hash"),
        (grading.Guard, "check_inputs", "inputs: check"),
        (process, "execute", "spawn, sandbox, wait, reap (less the run's wall)"),
        (runner, "run_experiment", "run: other"),
        (local.LocalBackend, "_work", "slot: other"),
    ]
    for cls in (progress.Progress, progress.LiveProgress):
        for name in ("run_started", "run_finished", "iteration_done", "proposing"):
            if name in cls.__dict__:
                steps.append((cls, name, "progress panel"))
    for owner, attr, step in steps:
        patch(meter, owner, attr, step)
    timed_execute = process.execute

    def execute(*a, **kw):               # a run's (or grader's) process: its start and end
        meter.spawns.append(time.perf_counter())
        meter.in_gap = False
        try:
            return timed_execute(*a, **kw)
        finally:
            meter.exits.append(time.perf_counter())
            meter.in_gap = True
    for mod in (process, runner):
        mod.execute = execute
    real_write = journal.Journal.write

    def write(self, event, **data):       # counting starts after the WARM-th iteration
        real_write(self, event, **data)
        if event == "end" and data.get("iteration") == WARM:
            meter.reset()
            meter.counted_from = time.perf_counter()
        if event == "end" and data.get("iteration", -1) > WARM:
            meter.last = time.perf_counter()
    journal.Journal.write = write
    assert loop


def run_night(iterations: int, meter: Meter, profile: cProfile.Profile | None):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        make_repo(root)
        cfg = Config(task="task", tag="bench", iterations=iterations, base_dir=root,
                     max_consecutive_failures=10**6, judge=JudgeConfig(rule="strict"))
        cfg.tracking.uri = f"sqlite:///{tmp}/mlflow.db"
        eng = Engine(cfg, out=lambda s: None)
        if profile:
            profile.enable()
        eng.run()
        if profile:
            profile.disable()
        events = [json.loads(line) for line in open(root / ".autoresearch/bench/journal.jsonl")]
        return events, eng.setup.sandbox


def overhead_ms(events: list[dict], first: int) -> float:
    """overhead.py's figure: between two `tracked` events, less the run's wall time."""
    tracked = {e["iteration"]: e["time"] for e in events if e["event"] == "tracked"}
    ends = {e["iteration"]: e["wall_s"] for e in events if e["event"] == "end"}
    gaps = [tracked[n] - tracked[n - 1] - ends[n] for n in sorted(tracked)
            if n > first and n - 1 in tracked and n in ends]
    return statistics.median(gaps) * 1000


def serial_gaps_ms(meter: Meter, since: float) -> float:
    """Median time from a run's execute() returning to the next run's execute() call."""
    gaps = [s - e for e, s in zip(meter.exits, meter.spawns[1:]) if e >= since and s > e]
    return statistics.median(gaps) * 1000 if gaps else float("nan")


def report(meter: Meter, counted: int, events, sandbox: str) -> None:
    runs = [e["wall_s"] for e in events if e["event"] == "end" and e["iteration"] > WARM]
    run_ms = statistics.mean(runs) * 1000
    per = lambda s: s * 1000 / counted   # noqa: E731
    print(f"iterations counted: {counted} (after the first {WARM}), sandbox: {sandbox}, "
          f"cpus: {os.cpu_count()}, mean run wall {run_ms:.0f} ms")
    print(f"serial gap, a run's exit to the next run's spawn (median): "
          f"{serial_gaps_ms(meter, meter.counted_from):.0f} ms")
    print(f"overhead.py's figure (median, tracked to tracked less the run): "
          f"{overhead_ms(events, WARM):.0f} ms")
    execute = ("slot", "spawn, sandbox, wait, reap (less the run's wall)")
    if execute in meter.self_s:   # the run itself is not the engine's time
        meter.self_s[execute] -= sum(runs[:counted])
    for kind in ("main", "slot", "other"):
        rows = [(k[1], s, meter.calls[k]) for k, s in meter.self_s.items() if k[0] == kind]
        if not rows:
            continue
        busy = sum(s for name, s, _ in rows if name != "waiting for an event")
        print(f"\n{kind} thread: {per(busy):.1f} ms busy per iteration")
        print("| step (own time) | calls/iter | ms/iter |")
        print("|---|---:|---:|")
        for name, s, n in sorted(rows, key=lambda r: -r[1]):
            print(f"| {name} | {n / counted:.1f} | {per(s):.1f} |")
    print("\nin the serial gap (a run's exit to the next run's spawn), own time per iteration:")
    print("| thread | step | ms/iter |")
    print("|---|---|---:|")
    for (kind, name), s in sorted(meter.gap_s.items(), key=lambda kv: -kv[1]):
        if per(s) >= 0.5 and name != "waiting for an event":
            print(f"| {kind} | {name} | {per(s):.1f} |")
    git = defaultdict(lambda: [0, 0.0])
    for (kind, name), s in meter.self_s.items():
        if name.startswith("git "):
            git[kind][0] += meter.calls[(kind, name)]
            git[kind][1] += s
    for kind, (n, s) in sorted(git.items()):
        print(f"git on the {kind} thread: {n / counted:.1f} calls, {per(s):.1f} ms per iteration")


def timeline(meter: Meter, which: int) -> None:
    """Every timed step (own and nested) from the which-th counted run's exit to the next
    run's spawn, in ms from that exit."""
    exits = [e for e in meter.exits if e >= meter.counted_from]
    if which + 1 >= len(exits):
        return
    t0 = exits[which]
    t1 = min((s for s in meter.spawns if s > t0), default=t0)
    print(f"\ntimeline of one gap ({(t1 - t0) * 1000:.0f} ms), ms from the run's exit:")
    for start, end, kind, name in sorted(meter.timeline):
        if t0 <= start <= t1:
            print(f"  {(start - t0) * 1000:6.1f} {(end - start) * 1000:6.1f}  {kind:5} {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--timeline", action="store_true",
                    help="also print every step of one gap between two runs, in order")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N",
                    help="also print cProfile's top N functions (main thread, cumulative)")
    args = ap.parse_args()
    if args.iterations <= WARM + 2:
        ap.error(f"--iterations must be over {WARM + 2}")
    meter = Meter()
    instrument(meter)
    profile = cProfile.Profile() if args.cprofile else None
    events, sandbox = run_night(args.iterations, meter, profile)
    report(meter, args.iterations - WARM, events, sandbox)
    if args.timeline:
        timeline(meter, (args.iterations - WARM) // 2)
    if profile:
        print()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.cprofile)


if __name__ == "__main__":
    main()
