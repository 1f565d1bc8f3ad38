"""The Slurm backend on the one-node cluster of tests/slurm/start.sh: what a job costs a run,
and runs per hour at 1 and 2 slots against the local backend (benchmarks/throughput.py's
sleeping task: each run sleeps its budget, so the machine's cores are not the limit).

    tests/slurm/start.sh && export SLURM_CONF=/tmp/autoresearch-slurm/etc/slurm.conf
    python benchmarks/slurm.py overhead [--jobs 10]
    python benchmarks/slurm.py rate [--budget 2] [--slots 1,2] [--per-slot 6]
    python benchmarks/slurm.py start [--jobs 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import loop, run_rate  # noqa: E402


def started_at() -> float:
    """Runs in the job: when its Python function began."""
    return time.time()


def overhead(args) -> None:
    """One job at a time, as a slot does: submit -> the job's function starts (sbatch, the
    scheduler, srun, Python and submitit's start-up), and submit -> its result seen by the
    head (the backend looks every 0.5 s)."""
    import submitit
    with tempfile.TemporaryDirectory() as tmp:
        ex = submitit.SlurmExecutor(folder=tmp, max_num_timeout=0)
        ex.update_parameters(time=5, job_name="autoresearch-bench", signal_delay_s=0)
        to_start, to_result = [], []
        for _ in range(args.jobs):
            t0 = time.time()
            job = ex.submit(started_at)
            while not job.paths.result_pickle.exists():
                time.sleep(0.5)
            seen = time.time()
            to_start.append(job.result() - t0)
            to_result.append(seen - t0)
    print("| jobs | submit to start, median (min-max) | submit to result seen, median |")
    print("|---:|---:|---:|")
    print(f"| {args.jobs} | {statistics.median(to_start):.2f} s ({min(to_start):.2f}-"
          f"{max(to_start):.2f}) | {statistics.median(to_result):.2f} s |")


def rate(args) -> None:
    print("| backend | slots | runs counted | mean run wall | runs/hour | limit |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for slots in (int(s) for s in args.slots.split(",")):
            for backend in ("local", "slurm"):
                res = loop(Path(tmp), slots, args.budget, max(6, args.per_slot * slots),
                           "strict", backend)
                per_hour, runs, wall = run_rate(res)
                print(f"| {backend} | {slots} | {runs} | {wall:.2f} s | {per_hour:.0f} | "
                      f"{3600 / args.budget * slots:.0f} |", flush=True)


def start(args) -> None:
    """The backend's start with and without data outside git to check on a node (the
    tests' graded task: a private folder): the probe job of loop/run/backends/reach.py."""
    from dataclasses import replace
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from graded_toy import make_graded_repo
    from loop.run.backends.slurm import SlurmBackend
    from loop.run.grading import Guard
    from loop.setup.task import load_task
    print("| task | backend starts | median | range |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        repo, _ = make_graded_repo(Path(tmp))
        graded = load_task(repo / "task")
        for label, task in (("no data outside git", replace(graded, evaluate="", private="")),
                            ("a private folder", graded)):
            guard, took = Guard(task, repo / "task"), []
            for i in range(args.jobs):
                t0 = time.monotonic()
                SlurmBackend(None, task, "task", guard, 1, Path(tmp) / f"{label}{i}").close()
                took.append(time.monotonic() - t0)
            print(f"| {label} | {args.jobs} | {statistics.median(took):.2f} s | "
                  f"{min(took):.2f}-{max(took):.2f} s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["overhead", "rate", "start"])
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--slots", default="1,2")
    ap.add_argument("--per-slot", type=int, default=6, help="iterations per slot")
    args = ap.parse_args()
    {"overhead": overhead, "rate": rate, "start": start}[args.what](args)


if __name__ == "__main__":
    main()
