"""Start-up: seconds from `autoresearch run` to the loop's first lines, on a fresh tag.

A new tag in a new repo with a new SQLite store (the worst case: MLflow creates its
tables), a toy task whose run takes ~0 s, `--iterations 0`: the times at which the banner
line, the baseline's `running` line and its result line appear, and the process exit.
`--code DIR` measures another checkout of the engine (e.g. an older version) the same way.

    python benchmarks/startup.py --repeats 5 [--code ../other-checkout]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = ("name: quick\neditable: [train.py]\nrun: python train.py\n"
        "metric: {name: score, direction: minimize}\ntime_budget_s: 10\n")


def one(code: Path) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="startup-"))
    repo = tmp / "repo"
    (repo / "task").mkdir(parents=True)
    (repo / "task" / "task.yaml").write_text(TASK)
    (repo / "task" / "train.py").write_text("print('score: 1.0')\n")
    (repo / "program.md").write_text("x\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=S", "-c", "user.email=s@e", "commit", "-qm", "t"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(code),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlflow.db'}"}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "loop", "run", "--task", "task", "--tag", "s",
                             "--iterations", "0", "--judge", "strict"], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks = {}
    for line in proc.stdout:
        now = time.monotonic() - start
        if line.startswith("autoresearch: tag"):
            marks.setdefault("banner", now)
        elif line.startswith("[  0/") and "running" in line:
            marks.setdefault("baseline running", now)
        elif line.startswith("[  0/"):
            marks.setdefault("baseline result", now)
    proc.wait()
    marks["exit"] = time.monotonic() - start
    return marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--code", type=Path, default=ROOT, help="the engine checkout to measure")
    args = ap.parse_args()
    runs = [one(args.code.resolve()) for _ in range(args.repeats)]
    print(f"| moment (median of {args.repeats}, s) | {args.code.resolve().name} |\n|---|---:|")
    for key in ("banner", "baseline running", "baseline result", "exit"):
        values = [r[key] for r in runs if key in r]
        if values:
            print(f"| {key} | {statistics.median(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
