"""Where the default task's run-to-run spread comes from on a CPU: the machine's speed under a
time box, or the seed. Runs experiments/tinylm/train.py by hand (no engine) for a few seeds
under each budget kind (prepare.Budget: `time`, karpathy's box; `work`, training FLOPs, the
CPU default), optionally beside a busy process on one of the cores (`--hog`: what another
job, a second slot or a browser does to a time box), and prints steps, seconds and val_bpb.

    python benchmarks/tinylm_noise.py [--seeds 0 1 2] [--kinds work time] [--hog] [--budget 60]

Each run takes about the budget (60 s by default on a quiet 2-core machine; longer under
--hog for `work`, which waits for its FLOPs). The table in docs/performance.md was made so.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TINYLM = Path(__file__).resolve().parents[1] / "experiments" / "tinylm"


def run(seed: int, kind: str, budget: float, cache: str) -> dict[str, str]:
    env = {**os.environ, "AUTORESEARCH_SEED": str(seed), "AUTORESEARCH_BUDGET": kind,
           "AUTORESEARCH_TIME_BUDGET": str(budget), "AUTORESEARCH_CACHE": cache}
    out = subprocess.run([sys.executable, "train.py"], cwd=TINYLM, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"train.py failed (seed {seed}, {kind}): {out.stderr[-500:]}")
    lines = [line.split(":", 1) for line in out.stdout.split("---")[-1].splitlines()]
    return {k.strip(): v.strip() for k, v in (x for x in lines if len(x) == 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--kinds", nargs="+", default=["work", "time"], choices=["work", "time"])
    ap.add_argument("--hog", action="store_true", help="a busy process beside each run")
    ap.add_argument("--budget", type=float, default=60.0)
    args = ap.parse_args()
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
    try:
        with tempfile.TemporaryDirectory() as cache:
            print(f"{'budget':6} {'seed':>4} {'steps':>6} {'train s':>8} {'val_bpb':>8}  end")
            for kind in args.kinds:
                bpb = []
                for seed in args.seeds:
                    r = run(seed, kind, args.budget, cache)
                    bpb.append(float(r["val_bpb"]))
                    print(f"{kind:6} {seed:4d} {r['num_steps']:>6} {r['training_seconds']:>8} "
                          f"{r['val_bpb']:>8}  {r['budget']}", flush=True)
                spread = statistics.stdev(bpb) if len(bpb) > 1 else 0.0
                print(f"{kind:6} mean {statistics.mean(bpb):.4f}, sd {spread:.4f} "
                      f"over {len(bpb)} seeds{' (beside a busy process)' if hog else ''}")
    finally:
        if hog:
            hog.kill()


if __name__ == "__main__":
    main()
