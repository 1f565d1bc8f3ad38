"""The night on the real loop: the engine itself, the offline `mutate` proposer, and a task
whose metric is a known function of its constants plus noise (benchmarks/surface/), run
for the same wall time under each judge rule. Reports the TRUE gain of each final best.

For each noise level, rule and seed: a fresh git repo holding a copy of the task (its
NOISE rewritten), `autoresearch run --max-wall W --judge RULE --seed S --sandbox off` in a
subprocess (MLflow in a throwaway SQLite file), then the final kept train.py of the
branch is read back and scored with the task's own `true_loss`; every kept commit is
scored against its parent, so a keep that made things truly worse is counted.

    python benchmarks/surface_nights.py [--wall 80] [--noise 0.05] [--seeds 0]
        [--proposers mutate,tune,tune-cmaes,standin,hybrid] [--rules sequential] [--llm-every 4]

Rules: strict (`--judge strict`), paired (`--judge paired`, the default before) and
sequential (`--judge sequential`, the default). Proposers: mutate (random search, the
default), tune (`--proposer tune`, TPE) and tune-cmaes (`--proposer tune --sampler cmaes`);
standin (`--proposer llm` against a scripted OpenAI-compatible server, tests/openai_server.py,
standing in for an LLM: STREAM, a fixed stream of code changes, the tricks of
surface/surface.py with known true effects, good, bad, none, one changing what A means;
the night ends when the stream does) and hybrid (`--proposer hybrid --llm-every 4`: that
stream every 4th iteration, TPE between). The true gain counts the tricks kept.
Costs wall time: proposers x rules x noise levels x seeds x W. The same nights at equal
compute, on this surface and a harder one, with and without early stopping:
benchmarks/surface_compute.py.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK = HERE / "surface"
RULES = {"strict": "strict", "paired": "paired", "sequential": "sequential"}
PROPOSERS = {"mutate": ["--proposer", "mutate"], "tune": ["--proposer", "tune"],
             "tune-cmaes": ["--proposer", "tune", "--sampler", "cmaes"],
             "standin": ["--proposer", "llm", "--model", "standin"],
             "hybrid": ["--proposer", "hybrid", "--model", "standin", "--llm-every", "4"]}
CONSTANT = re.compile(r"^([A-L]) = ([-+0-9.eE]+)\s*$", re.M)
TRICK = re.compile(r'^tricks\.append\("(\w+)"\)', re.M)
HOOK = "tricks = []\n# tricks\n"        # where the stand-in's code changes go, in train.py
# the stand-in's ideas, in the order it has them (effects: surface/surface.py's TRICKS)
STREAM = ["bad_init", "warmup", "refactor", "a_halved", "ema", "big_dropout", "clip",
          "logging", "schedule", "rename"]
MEANS = {"a_halved": "  # uses A, halved", "lr_scaled": "  # uses LR, halved"}


def load_surface():
    spec = importlib.util.spec_from_file_location("surface_truth", TASK / "surface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost",
                           *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(root: Path, noise: float, run_s: float, task: Path = TASK, ledger: str = "",
              task_extra: str = "") -> Path:
    """A fresh git repo holding a copy of the task under surface/: its NOISE, RUN_S (and
    LEDGER, where runs note their compute) rewritten, `task_extra` appended to task.yaml,
    train.py given the stand-in's hook when it has none."""
    repo = root / "repo"
    (repo / "surface").mkdir(parents=True)
    for name in ("task.yaml", "train.py", "surface.py"):
        shutil.copy(task / name, repo / "surface" / name)
    src = (repo / "surface" / "surface.py").read_text()
    for name, value in (("NOISE", noise), ("RUN_S", run_s), ("LEDGER", ledger)):
        src = re.sub(rf"^{name} = .*$", f"{name} = {value!r}", src, count=1, flags=re.M)
    (repo / "surface" / "surface.py").write_text(src)
    if task_extra:
        with open(repo / "surface" / "task.yaml", "a") as f:
            f.write(task_extra)
    train = (repo / "surface" / "train.py").read_text()   # the hook the stand-in edits
    if "# tricks" not in train:
        train = train.replace("\nreport({", "\n" + HOOK + "report({").replace(
            '"L": L})', '"L": L}, tricks)')
    (repo / "surface" / "train.py").write_text(train)
    (repo / "program.md").write_text("Minimize loss.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "surface task")
    return repo


def constants(text: str) -> dict:
    return {k: float(v) for k, v in CONSTANT.findall(text)}


def true_loss(text: str) -> float:
    """train.py's true loss: its constants and the tricks it lists."""
    return load_surface().true_loss(constants(text), TRICK.findall(text))


def standin_server(stream=tuple(STREAM)):
    """The scripted LLM stand-in: the stream as SEARCH/REPLACE replies, then 401s (its
    ideas are spent: the loop stops, one line). A trick that changes what a constant means
    names it in a comment (so the tuner knows its earlier points no longer apply)."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from openai_server import OpenAIServer, Reply
    server = OpenAIServer().start()
    server.models = ["standin"]
    server.script(*(f"Description: add {t}\n\ntrain.py\n```python\n<<<<<<< SEARCH\n# tricks\n"
                    f"=======\n# tricks\ntricks.append(\"{t}\"){MEANS.get(t, '')}\n"
                    f">>>>>>> REPLACE\n```\n" for t in stream))
    server.script(*[Reply(status=401, error={"message": "the stand-in's stream is spent"})] * 50)
    return server


def one_night(rule: str, noise: float, seed: int, wall: float, run_s: float,
              proposer: str = "mutate") -> dict:
    with tempfile.TemporaryDirectory(prefix="surface-night-") as tmp:
        repo = make_repo(Path(tmp), noise, run_s)
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(tmp) / 'mlflow.db'}"}
        server = standin_server() if "--model" in PROPOSERS[proposer] else None
        llm = ["--base-url", server.base_url] if server else []
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "loop", "run", "--task", "surface", "--tag", "night",
                 "--max-wall", str(wall), "--iterations", "100000", "--judge", RULES[rule],
                 "--seed", str(seed), "--sandbox", "off", *PROPOSERS[proposer], *llm],
                cwd=repo, env={**env, "OPENAI_API_KEY": "sk-standin"}, capture_output=True,
                text=True, timeout=wall + 300)
        finally:
            if server:
                server.stop()
        took = time.perf_counter() - t0
        # the offline proposer may try every value it can reach before the wall time is up:
        # the night then ends early, on failures in a row ("no untried mutation left");
        # the stand-in's stream may end too
        exhausted = any(s in proc.stdout for s in ("no untried mutation left",
                                                   "search space exhausted"))
        exhausted |= bool(server) and "(401 Unauthorized)" in proc.stdout   # stream spent
        if proc.returncode != 0 and not exhausted:
            raise RuntimeError(f"{rule}: the loop exited {proc.returncode}: "
                               f"{(proc.stderr or proc.stdout)[-2000:]}")
        branch = "autoresearch/night"
        base = true_loss(git(repo, "show", "main:surface/train.py"))
        final = true_loss(git(repo, "show", f"{branch}:surface/train.py"))
        kept = git(repo, "rev-list", "--first-parent", "--reverse", f"main..{branch}").split()
        harmful, noops, before = 0, 0, base
        for sha in kept:
            now = true_loss(git(repo, "show", f"{sha}:surface/train.py"))
            harmful += now > before + 1e-12
            noops += abs(now - before) <= 1e-12
            before = now
        with open(repo / ".autoresearch" / "night" / "results.tsv") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        runs = sum(int(r.get("runs") or 0) for r in rows)
    return {"proposer": proposer, "rule": rule, "noise": noise, "seed": seed, "gain": base - final,
            "ideas": sum(r["status"] != "bad_edit" for r in rows) - 1,
            "kept": sum(r["status"] == "keep" for r in rows) - 1,
            "harmful": harmful, "noops": noops, "runs": runs, "wall": took,
            "exhausted": exhausted}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wall", type=float, default=80.0, help="seconds per night (--max-wall)")
    ap.add_argument("--noise", default="0.05", help="comma-separated noise sd")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--rules", default=",".join(RULES), help=f"of {', '.join(RULES)}")
    ap.add_argument("--proposers", default="mutate", help=f"of {', '.join(PROPOSERS)}")
    ap.add_argument("--run-s", type=float, default=1.0, help="seconds one run takes")
    ap.add_argument("--llm-every", type=int, default=4, help="hybrid: the stand-in's share")
    args = ap.parse_args(argv)
    PROPOSERS["hybrid"][-1] = str(args.llm_every)
    try:
        noises = [float(x) for x in args.noise.split(",") if x.strip()]
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        ap.error("--noise/--seeds: comma-separated numbers")
    rules = [r for r in args.rules.split(",") if r]
    proposers = [p for p in args.proposers.split(",") if p]
    if not proposers or any(p not in PROPOSERS for p in proposers):
        ap.error(f"--proposers: each of {', '.join(PROPOSERS)}")
    if not rules or any(r not in RULES for r in rules):
        ap.error(f"--rules: each of {', '.join(RULES)}")
    best = load_surface()
    ceiling = best.true_loss(constants((TASK / "train.py").read_text())) - best.FLOOR
    tricks = sum(-e for e in best.TRICKS.values() if e < 0)
    code = {"standin", "hybrid"} & set(proposers)
    print(f"surface task: true gain available {ceiling:.3f} from the constants"
          f"{f', {tricks:.3f} more from the stand-in code changes' if code else ''}"
          f"; {args.wall:g} s per night, "
          f"runs of {args.run_s:g} s, seeds {seeds}")
    print("| noise sd | proposer | rule | true gain of the final best | ideas | kept | truly "
          "worse kept | no-ops kept | runs | wall |\n|---|---|---|---|---|---|---|---|---|---|")
    for noise in noises:
        for proposer, rule in ((p, r) for p in proposers for r in rules):
            res = [one_night(rule, noise, s, args.wall, args.run_s, proposer) for s in seeds]
            mean = lambda k, res=res: sum(r[k] for r in res) / len(res)  # noqa: E731
            gains = ", ".join(f"{r['gain']:.3f}" for r in res)
            ended = sum(r["exhausted"] for r in res)
            print(f"| {noise:g} | {proposer} | {rule} | {mean('gain'):.3f} ({gains}) "
                  f"| {mean('ideas'):.1f} "
                  f"| {mean('kept'):.1f} | {mean('harmful'):.1f} | {mean('noops'):.1f} "
                  f"| {mean('runs'):.1f} "
                  f"| {mean('wall'):.0f} s{f', {ended} out of ideas' if ended else ''} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
