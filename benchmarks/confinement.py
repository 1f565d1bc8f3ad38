"""What confining a run costs: wall time per run of a trivial command, and of a run that
floods its output, with the bwrap sandbox and without it (loop/run/reap.py).

    python benchmarks/confinement.py              # 20 runs per mode
    python benchmarks/confinement.py --runs 50
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.run import sandbox  # noqa: E402
from loop.run.process import Limits, execute, experiment_env  # noqa: E402
from loop.run.runner import run_experiment  # noqa: E402
from loop.run.spec import RunSpec  # noqa: E402

FLOOD = ("import sys\nline = 'x' * 99 + '\\n'\nfor _ in range(2_000_000): sys.stdout.write(line)\n"
         "print('score: 1.0')\n")     # 200 MB


def per_run(mode: str, runs: int, folder: Path) -> float:
    times = []
    for _ in range(runs):
        start = time.monotonic()
        if mode == "plain":                      # reference: an unconfined subprocess
            subprocess.run(["/bin/sh", "-c", "true"], cwd=folder)
        else:
            execute("true", folder, experiment_env(), 30, folder / "log", limits=Limits(mode))
        times.append(time.monotonic() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    modes = ["off"] + ([] if sandbox.unavailable() else ["required"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "flood.py").write_text(FLOOD)
        print(f"{'mode':<10} {'trivial run (median)':>22} {'200 MB flood':>14} {'kept log':>10}")
        print(f"{'plain':<10} {per_run('plain', args.runs, folder) * 1000:>19.0f} ms")
        for mode in modes:
            trivial = per_run(mode, args.runs, folder)
            start = time.monotonic()
            res = run_experiment(RunSpec(f"{sys.executable} flood.py", folder,
                                         experiment_env(), 600, folder / "flood.log",
                                         r"^score:\s*([0-9.]+)", limits=Limits(mode)))
            flood = time.monotonic() - start
            assert res.metric == 1.0, res
            size = (folder / "flood.log").stat().st_size / 2**20
            name = "bwrap" if mode == "required" else "reaper"
            print(f"{name:<10} {trivial * 1000:>19.0f} ms {flood:>12.1f} s {size:>7.1f} MB")


if __name__ == "__main__":
    main()
