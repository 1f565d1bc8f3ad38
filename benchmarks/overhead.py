"""The engine's own wall time per iteration, outside the experiment subprocess.

Runs the real loop (git worktree, journal, results.tsv, MLflow SQLite store, mutate proposer)
on a trivial task in a temp repo, and reports, per iteration, the wall time between two
finished iterations minus the experiment's own wall time: git, tracking and bookkeeping.

    python benchmarks/overhead.py                 # 200 iterations
    python benchmarks/overhead.py --iterations 50
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.setup.config import Config, JudgeConfig  # noqa: E402
from loop.engine.engine import Engine  # noqa: E402

N_CONSTANTS = 60   # enough distinct mutations for hundreds of iterations


def make_repo(root: Path) -> None:
    task = root / "task"
    task.mkdir(parents=True)
    consts = "\n".join(f"C{i} = {i + 1}" for i in range(N_CONSTANTS))
    (task / "train.py").write_text(
        f"{consts}\nprint('score:', sum((globals()[f'C{{i}}'] - 7) ** 2 "
        f"for i in range({N_CONSTANTS})))\n")
    (task / "task.yaml").write_text(
        "name: trivial\neditable: [train.py]\nrun: python train.py\n"
        "metric: {name: score, direction: minimize}\ntime_budget_s: 10\ngrace_s: 5\n")
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "task"]):
        subprocess.run(["git", *args], cwd=root, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        make_repo(root)
        cfg = Config(task="task", tag="bench", iterations=args.iterations, base_dir=root,
                     max_consecutive_failures=10**6, judge=JudgeConfig(rule="strict"))
        cfg.tracking.uri = f"sqlite:///{tmp}/mlflow.db"
        started = time.monotonic()
        Engine(cfg, out=lambda s: None).run()
        total = time.monotonic() - started
        events = [json.loads(l) for l in open(root / ".autoresearch/bench/journal.jsonl")]
    tracked = {e["iteration"]: e["time"] for e in events if e["event"] == "tracked"}
    ends = {e["iteration"]: e for e in events if e["event"] == "end"}
    overhead = {}
    for n in range(2, args.iterations + 1):   # from the previous iteration's end to this one's
        overhead[n] = tracked[n] - tracked[n - 1] - ends[n]["wall_s"]
    experiment = statistics.median(ends[n]["wall_s"] for n in overhead)

    def med(lo, hi):
        vals = [overhead[n] for n in range(lo, hi + 1) if n in overhead]
        return statistics.median(vals)

    print(f"iterations: {args.iterations}, total wall {total:.1f}s, "
          f"median experiment subprocess {experiment * 1000:.0f} ms, cpus {os.cpu_count()}")
    print("| iterations | median engine overhead per iteration |")
    print("|---|---:|")
    windows = [(2, 21), (10, 30)]
    if args.iterations >= 100:
        windows += [(90, 110)]
    windows += [(max(2, args.iterations - 19), args.iterations)]
    for lo, hi in windows:
        print(f"| {lo}-{hi} | {med(lo, hi) * 1000:.0f} ms |")
    growth = med(max(2, args.iterations - 19), args.iterations) / med(10, 30)
    print(f"growth, last 20 vs iterations 10-30: x{growth:.2f}")
    verdict = "met" if med(2, 21) < 0.3 and growth < 1.5 else "NOT met"
    print(f"target (< 300 ms per iteration, flat): {verdict}")


if __name__ == "__main__":
    main()
