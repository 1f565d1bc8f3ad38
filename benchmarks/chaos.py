"""Chaos: SIGKILL the orchestrator at random moments, resume, and check that nothing is lost.

One loop (tag `chaos`) on a fast toy task is killed --kills times at a random moment of
its life; after each kill a short resume (it recovers, then stops at once) is run to the
end and the invariants are checked. Further --first-start kills each hit a new tag within
its first seconds (MLflow importing and creating its store, the parent run, the baseline).

Invariants, after every resume:
  rows      results.tsv has one row per iteration 0..n-1, no duplicate, as the journal says
  commits   the branch's kept commits == keep rows (baseline excluded)
  mlflow    one live (not deleted) MLflow child run per iteration, and no run RUNNING
  procs     no experiment process alive
  lock      the tag's lock is not held
  user      the user's checkout is clean and `main` unchanged

Each kill is classified by where it landed: from the journal's last event and the
orchestrator's last output line.

    python benchmarks/chaos.py --kills 100 --first-start 12 [--seed 0] [--workers 3]
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = """\
name: chaos
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 10
grace_s: 5
"""
N_CONSTANTS = 60
TRAIN = "import time\n" + "".join(f"C{i} = {1.0 + (i % 7) * 0.5}\n" for i in range(N_CONSTANTS)) \
    + f"VALUES = [{', '.join(f'C{i}' for i in range(N_CONSTANTS))}]\n" + """\
time.sleep(0.4)          # long enough for kills to land mid-experiment
score = sum((v - (1.3 + (i % 5))) ** 2 for i, v in enumerate(VALUES))
print(f"score: {score:.6f}")
"""
# many constants, so that the mutate proposer does not run out of changes in a long loop;
# failures in a row never stop it (the loop must run through every kill)
CONFIG = "max_consecutive_failures: 100000\nprogram: program.md\n"


def sh(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path) -> Path:
    task = root / "task"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(TASK)
    (task / "train.py").write_text(TRAIN)
    (task / "grade.py").write_text("# protected\n")
    (root / "program.md").write_text("Minimize the score.\n")
    (root / "chaos.yaml").write_text(CONFIG)
    sh(root, "init", "-q", "-b", "main")
    sh(root, "add", "-A")
    sh(root, "-c", "user.name=C", "-c", "user.email=c@e", "commit", "-qm", "task")
    return root


WORKERS = 1      # --workers: slots, so that a kill can land with several runs in flight


def cli(repo: Path, tag: str, iterations: int, env: dict, **kw):
    return subprocess.Popen([sys.executable, "-m", "loop", "run", "--config", "chaos.yaml",
                             "--task", "task", "--tag", tag,
                             "--iterations", str(iterations), "--judge", "strict",
                             "--workers", str(WORKERS)],
                            cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def journal(repo: Path, tag: str) -> list[dict]:
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append({"event": "torn"})
    return out


def phase(events: list[dict], last_line: str) -> str:
    """Where the kill landed, as far as the journal and the console tell."""
    if not any(e.get("event") == "start" for e in events):
        return "start-up (before the journal's start)"
    last = events[-1].get("event")
    if last in ("start", "start_tracking", "abandon") or not last_line.startswith("["):
        return "start-up / resume"
    if last == "begin":
        return "experiment, grading, judging" if "running" in last_line else \
            "staging (attempt commit)"
    if last == "end":
        return "after a record: git moves, results.tsv, MLflow"
    if last == "remeasure":
        return "re-measure of the best"
    return "proposal (between iterations)"


def experiments_alive(repo: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            env = open(f"/proc/{entry}/environ", "rb").read()
        except OSError:
            continue
        if cwd.startswith(str(repo)) and b"AUTORESEARCH_RUN_ID=" in env:
            found.append(int(entry))
    return found


def check(repo: Path, tag: str, uri: str, main: str) -> list[str]:
    from mlflow.tracking import MlflowClient
    bad = []
    tsv = repo / ".autoresearch" / tag / "results.tsv"
    rows = [r.split("\t") for r in tsv.read_text().splitlines()[1:]] if tsv.exists() else []
    iters = [int(r[5]) for r in rows]
    ends = {e["iteration"] for e in journal(repo, tag) if e.get("event") == "end"}
    if iters != list(range(len(rows))) or set(iters) != ends:
        bad.append(f"rows: {iters} vs journal {sorted(ends)}")
    keeps = sum(1 for r in rows[1:] if r[3] == "keep")
    base = sh(repo, "rev-parse", "main")
    kept = len(sh(repo, "rev-list", f"{base}..autoresearch/{tag}").split())
    if kept != keeps:
        bad.append(f"commits: {kept} kept commits, {keeps} keep rows")
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              f"tags.`autoresearch.tag` = '{tag}'", max_results=5000)
    children = Counter(int(r.data.tags["iteration"]) for r in runs
                       if "mlflow.parentRunId" in r.data.tags)
    if dict(children) != {i: 1 for i in iters}:
        bad.append(f"mlflow: children per iteration {dict(children)}")
    running = [r.info.run_id for r in runs if r.info.status == "RUNNING"]
    if running:
        bad.append(f"mlflow: {len(running)} runs RUNNING")
    alive = experiments_alive(repo)
    if alive:
        bad.append(f"procs: experiment processes alive {alive}")
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
    lock = repo / ".autoresearch" / tag / "lock"
    if lock.exists():
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                bad.append("lock: still held")
    if sh(repo, "status", "--porcelain") or sh(repo, "rev-parse", "main") != main:
        bad.append("user: checkout or main changed")
    return bad


def resume_and_check(repo, tag, uri, main, env) -> tuple[int, list[str]]:
    """A resume that recovers and stops at once; then the invariants."""
    done = len([e for e in journal(repo, tag) if e.get("event") == "end"])
    proc = cli(repo, tag, max(done - 1, 0), env)
    out, _ = proc.communicate(timeout=300)
    problems = check(repo, tag, uri, main)
    if proc.returncode not in (0, 1) or "Traceback" in out:
        problems.append(f"resume exit {proc.returncode}: {out.strip().splitlines()[-1:]}")
    return done, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--first-start", type=int, default=12)
    ap.add_argument("--max-life", type=float, default=7.0, help="latest kill, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--code", type=Path, default=ROOT, help="the engine checkout to run")
    ap.add_argument("--workers", type=int, default=1, help="slots: runs in flight at a kill")
    args = ap.parse_args()
    global WORKERS
    WORKERS = args.workers
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="chaos-"))
    repo = make_repo(tmp / "repo")
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(args.code.resolve())}
    main_sha = sh(repo, "rev-parse", "main")
    phases, failures, started = Counter(), Counter(), time.monotonic()
    plan = [(f"first{i}", rng.uniform(0.3, 4.0)) for i in range(args.first_start)] + \
           [("chaos", rng.uniform(0.3, args.max_life)) for _ in range(args.kills)]
    for k, (tag, delay) in enumerate(plan, 1):
        proc = cli(repo, tag, 10_000, env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        lines = [line for line in out.splitlines() if line.strip()]
        where = phase(journal(repo, tag), lines[-1] if lines else "")
        if tag.startswith("first"):
            where = f"first start: {where}"
        phases[where] += 1
        done, problems = resume_and_check(repo, tag, uri, main_sha, env)
        for p in problems:
            failures[p.split(":")[0]] += 1
        print(f"kill {k:>3} {tag:<7} at {delay:4.1f}s  {where:<42} iterations {done:>3}  "
              + ("ok" if not problems else "FAIL " + "; ".join(problems)), flush=True)
    total = sum(phases.values())
    print(f"\n{total} kills in {time.monotonic() - started:.0f}s; "
          f"loop reached {len([e for e in journal(repo, 'chaos') if e.get('event') == 'end'])}"
          f" iterations\n")
    print("| where the kill landed | kills |\n|---|---:|")
    for where, n in sorted(phases.items(), key=lambda x: -x[1]):
        print(f"| {where} | {n} |")
    print("\n| invariant | violations |\n|---|---:|")
    for name in ("rows", "commits", "mlflow", "procs", "lock", "user", "resume exit"):
        print(f"| {name} | {failures.get(name, 0)} |")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
