"""Throughput of the N-slot loop: experiments per hour against the limit, idle slot time
with a slow LLM server, overhead per run at 8 slots, and the Ray backend in local mode.

Every run of the task sleeps its budget and prints a (seeded, noisy) metric, so the
machine's cores are not the bottleneck; the limit is 3600 / budget x slots runs per hour.
A "run" is every experiment run: first runs, confirmation runs, baseline repeats, re-runs.

    python benchmarks/throughput.py scaling [--budget 2] [--slots 1,2,4,8]
    python benchmarks/throughput.py llm     [--budget 2] [--slots 4] [--delay 0.5]
    python benchmarks/throughput.py overhead [--runs 300] [--slots 8] [--budget 0.5]
    python benchmarks/throughput.py ray     [--budget 2] [--slots 1,4,8,16]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from loop.setup.config import Config, JudgeConfig, ProposerConfig  # noqa: E402
from loop.engine.engine import Engine  # noqa: E402

N_CONSTANTS = 40
SLEEP_TRAIN = """\
import os, random, time
{consts}
time.sleep(float(os.environ["AUTORESEARCH_TIME_BUDGET"]))
noise = random.Random(int(os.environ["AUTORESEARCH_SEED"])).gauss(0, 0.5)
print("score:", sum((v - 7) ** 2 for k, v in list(globals().items()) if k[:1] == "C") + noise)
"""


def consts(values) -> str:
    """One constant per line with a blank line between: a layout from when replays were git
    3-way merges, which conflict on adjacent lines (replays now set the constants again,
    docs/design.md "The replay rule"); kept so that numbers stay comparable."""
    return "\n\n".join(f"C{i} = {v}" for i, v in enumerate(values))


def make_repo(root: Path, budget: float) -> None:
    task = root / "task"
    task.mkdir(parents=True)
    (task / "train.py").write_text(SLEEP_TRAIN.format(consts=consts(range(1, N_CONSTANTS + 1))))
    (task / "task.yaml").write_text(
        "name: sleeper\neditable: [train.py]\nrun: python train.py\n"
        f"metric: {{name: score, direction: minimize}}\ntime_budget_s: {budget}\ngrace_s: 20\n")
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "task"]):
        subprocess.run(["git", *args], cwd=root, check=True)


def loop(tmp: Path, slots: int, budget: float, iterations: int, rule: str = "strict",
         backend: str = "local", proposer: ProposerConfig | None = None) -> dict:
    root = tmp / f"repo-{rule}-{backend}-{slots}-{time.monotonic_ns()}"
    make_repo(root, budget)
    cfg = Config(task="task", tag="bench", iterations=iterations, base_dir=root,
                 workers=slots, backend=backend, max_consecutive_failures=10**6,
                 judge=JudgeConfig(rule=rule), proposer=proposer or ProposerConfig())
    cfg.tracking.uri = f"sqlite:///{root}/mlflow.db"
    started = time.monotonic()
    Engine(cfg, out=lambda s: None).run()
    wall = time.monotonic() - started
    state = root / ".autoresearch" / "bench"
    events = [json.loads(line) for line in open(state / "journal.jsonl")]
    logs = [p for p in (state / "logs").glob("iter-*.log") if not p.name.endswith(".grade.log")]
    spans = sorted(p.stat().st_mtime for p in logs)
    return {"events": events, "wall": wall, "runs": len(logs), "logs": logs, "spans": spans}


def run_rate(result: dict) -> tuple[float, int, float]:
    """Runs per hour in the steady state: from the first candidate's start to the last
    candidate's start (the baseline, start-up and the final drain, when no new work starts,
    are left out: an overnight loop is all steady state). A run counts when its log was
    last written (every run has one: first runs, confirmations, re-runs of the best), not
    by `tracked` lines, which wait while MLflow's writes are held for a busy moment.
    Also the mean wall of a run."""
    ev = result["events"]
    begins = [e["time"] for e in ev if e["event"] == "begin" and e["iteration"] > 0]
    t0, t1 = min(begins), max(begins)
    runs = sum(1 for t in result["spans"] if t0 <= t <= t1)
    ends = [e for e in ev if e["event"] == "end" and e["iteration"] > 0]
    walls = sum(e["wall_s"] for e in ends)
    count = sum(max(1, len(e["samples"])) for e in ends)
    return runs * 3600 / (t1 - t0), runs, walls / max(1, count)


def scaling(args, backend="local") -> None:
    slots_list = [int(s) for s in args.slots.split(",")]
    print("| backend | judge | slots | runs counted | mean run wall | runs/hour | limit | "
          "share of limit |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for rule in args.rules.split(","):
            for slots in slots_list:
                res = loop(Path(tmp), slots, args.budget, max(6, args.per_slot * slots), rule,
                           backend)
                rate, runs, wall = run_rate(res)
                limit = 3600 / args.budget * slots
                print(f"| {backend} | {rule} | {slots} | {runs} | {wall:.2f} s | {rate:.0f} | "
                      f"{limit:.0f} | {rate / limit:.2f} |", flush=True)


def llm(args) -> None:
    """Slot idle share with an OpenAI-compatible server answering after `delay` seconds."""
    from openai_server import OpenAIServer, Reply
    import random
    rng = random.Random(0)
    server = OpenAIServer().start()
    replies = []
    for i in range(args.iterations + 20):     # each changes another constant, by one line
        c = i % N_CONSTANTS
        new = rng.choice([v for v in range(1, 14) if v != c + 1])
        replies.append(Reply(f"Description: set C{c} to {new}\n\ntrain.py\n```python\n"
                             f"<<<<<<< SEARCH\nC{c} = {c + 1}\n=======\nC{c} = {new}\n"
                             f">>>>>>> REPLACE\n```\n", delay_s=args.delay))
    server.script(*replies)
    slots = int(args.slots.split(",")[0])
    proposer = ProposerConfig(kind="llm", model="bench", base_url=server.base_url,
                              concurrency=args.concurrency, log_prompts=False)
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    with tempfile.TemporaryDirectory() as tmp:
        res = loop(Path(tmp), slots, args.budget, args.iterations, "strict", "local", proposer)
    server.stop()
    ev = res["events"]
    t0 = min(e["time"] for e in ev if e["event"] == "begin" and e["iteration"] > 0)
    t1 = max(e["time"] for e in ev if e["event"] == "tracked")
    busy = sum(e["wall_s"] for e in ev if e["event"] == "end" and e["iteration"] > 0)
    idle = 1 - busy / (slots * (t1 - t0))
    print("| slots | LLM delay | budget | concurrency | proposals | slot time idle |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {slots} | {args.delay:g} s | {args.budget:g} s | {args.concurrency} | "
          f"{len(server.requests)} | {idle * 100:.1f} % |")


def overhead(args) -> None:
    """Engine time per finished run at N slots: wall per run minus budget/slots, first 50
    runs against the last 50 (by end time)."""
    slots = int(args.slots.split(",")[0])
    with tempfile.TemporaryDirectory() as tmp:
        res = loop(Path(tmp), slots, args.budget, args.runs, "strict")
    ends = sorted(e["time"] for e in res["events"]
                  if e["event"] == "tracked" and e["iteration"] > 0)
    ideal = args.budget / slots

    def per_run(window):
        return (window[-1] - window[0]) / (len(window) - 1) - ideal
    first, last = per_run(ends[:50]), per_run(ends[-50:])
    print("| slots | runs | budget | overhead per run, first 50 | last 50 | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {slots} | {len(ends)} | {args.budget:g} s | {first * 1000:.0f} ms | "
          f"{last * 1000:.0f} ms | {last / first if first > 0 else float('nan'):.2f} |")


def ray_local(args) -> None:
    import ray
    ray.init(num_cpus=16, num_gpus=16, include_dashboard=False, log_to_driver=False)
    try:
        scaling(args, backend="ray")
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["scaling", "llm", "overhead", "ray"])
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--slots", default="1,2,4,8")
    ap.add_argument("--rules", default="strict,noise")
    ap.add_argument("--per-slot", type=int, default=6, help="iterations per slot")
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    {"scaling": scaling, "llm": llm, "overhead": overhead, "ray": ray_local}[args.what](args)


if __name__ == "__main__":
    main()
