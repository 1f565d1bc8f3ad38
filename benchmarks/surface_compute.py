"""The night benchmark at equal COMPUTE, on two surfaces, with and without early stopping.

benchmarks/surface_nights.py runs the real loop for a fixed wall time; this runs it for a
fixed compute budget (`--budget` full runs, each standing for RUN_MIN minutes of a GPU), so a
run stopped early costs only the share of its budget it ran, and the time it saves buys
more ideas. Each run notes in a ledger when it starts (with its point's TRUE final loss) and
when it ends; the engine's journal says which runs it stopped and where. A night is ended
(SIGTERM) once its runs have started more than the budget, and read back to it: the true
gain of the best kept by each moment, the compute spent by then.

Surfaces: bar (benchmarks/surface/: 12 log-range constants, 5 separable bowls, code
changes with shapes) and hard (benchmarks/hard_surface/: 14 constants of four kinds under
`divides` and `requires`, a ridge in LR x batch x width, curves whose shape depends on the
point, noise above the median single-constant effect). Proposers: mutate, tune (TPE),
tune-cmaes, standin (the scripted LLM alone: a fixed stream of code changes with known
true effects) and hybrid (that stream every --llm-every'th iteration, TPE between). Stop:
off, or on (`early_stop: true` in task.yaml, the engine's defaults; `--stop-yaml` sets
another mapping). Per cell, over the seeds: true gain per compute-hour (of the night's
best at the budget), compute to reach 90 % of the reference gain (the best any night of the
surface reached, unless --reference), the share of run time saved by stopping (a run
stopped at f saves 1 - f of it; all runs, and the second half of the budget alone), and the
true improvements stopped (a stopped candidate truly better than the best it was held to)
out of the true improvements proposed.

    python benchmarks/surface_compute.py [--surfaces bar,hard] [--seeds 0,1,2]
        [--proposers mutate,tune,tune-cmaes,standin,hybrid] [--stop off,on] [--budget 48]
        [--jobs 3] [--run-s 0.2]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import surface_nights as sn  # noqa: E402

HERE = Path(__file__).resolve().parent
RUN_MIN = 5.0                 # compute minutes one full run stands for (karpathy's budget)
STOPPED = re.compile(r"^stopped at (\d+)% of its budget")
CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*) = ([-+0-9.eE]+)\s*$", re.M)
HARD_STREAM = ("refactor", "rmsnorm", "bad_init", "swiglu", "logging", "lr_scaled",
               "post_norm", "rope", "rename", "ema_eval", "huge_vocab", "qk_norm",
               "type_hints", "no_bias_correction", "zero_init_proj", "docstrings")


@dataclass(frozen=True)
class Surface:
    name: str
    task: Path
    noise: float
    stream: tuple[str, ...]

    def module(self):
        spec = importlib.util.spec_from_file_location(f"truth_{self.name}",
                                                      self.task / "surface.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def truth(self, train_py: str) -> float:
        """The true final loss of a train.py: its constants and the tricks it lists."""
        values = {k: float(v) for k, v in CONSTANT.findall(train_py)}
        return self.module().true_loss(values, sn.TRICK.findall(train_py))


SURFACES = {"bar": Surface("bar", HERE / "surface", 0.05, tuple(sn.STREAM)),
            "hard": Surface("hard", HERE / "hard_surface", 0.03, HARD_STREAM)}


@dataclass
class Night:
    surface: str
    proposer: str
    stop: str
    seed: int
    base: float                                  # the baseline's true loss
    points: list = field(default_factory=list)   # (compute at the end of iteration, best truth)
    compute: float = 0.0                         # within the budget
    saved: float = 0.0                           # 1 - f of each stopped run, within the budget
    saved_late: float = 0.0                      # ... in the second half of the budget
    compute_late: float = 0.0
    stopped: int = 0
    improvements: int = 0                        # candidates truly better than the best
    lost: int = 0                                # of those, stopped
    spent: bool = False                          # the stand-in's stream ended the night
    keeps: list = field(default_factory=list)    # the true loss of each kept state, in order

    def gain_at(self, budget: float) -> float:
        best = self.base
        for c, truth in self.points:
            if c <= budget + 1e-9:
                best = truth
        return self.base - best

    def reach(self, target: float) -> float | None:
        """The compute at which the best's true gain first reached `target`."""
        return next((c for c, t in self.points if self.base - t >= target - 1e-12), None)


def ledger_runs(path: Path) -> list[dict]:
    """The runs in start order: when, which iteration, true final loss, whether they ended."""
    runs: list[dict] = []
    open_runs: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        t, it, what = line.split()
        if what == "end":
            if it in open_runs:
                open_runs.pop(it)["ended"] = True
            continue
        run = {"t": float(t), "iteration": it, "truth": float(what), "ended": False}
        open_runs[it] = run          # one run at a time (--workers 1): a newer start closes it
        runs.append(run)
    return runs


def journal_ends(repo: Path) -> list[dict]:
    path = repo / ".autoresearch" / "night" / "journal.jsonl"
    events = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e for e in events if e.get("event") == "end"]


def read_night(surface: Surface, proposer: str, stop: str, seed: int, repo: Path,
               ledger: Path, budget: float, spent: bool) -> Night:
    """The night up to the budget: each iteration's compute, the best's truth after it,
    what was stopped and whether it was truly better."""
    base = surface.truth(sn.git(repo, "show", "main:surface/train.py"))
    night = Night(surface.name, proposer, stop, seed, base, spent=spent)
    runs, ends = ledger_runs(ledger), journal_ends(repo)
    best, used = base, 0.0
    # an `end` event's time is its iteration's start: its runs start before the next one's
    starts = [e["time"] for e in ends] + [float("inf")]
    for k, end in enumerate(ends):
        window = [r for r in runs if starts[k] <= r["t"] < starts[k + 1]]
        m = STOPPED.match(end.get("reason") or "")
        cost = 0.0
        for r in window:
            f = 1.0 if r["ended"] or not (m and r is window[-1]) else int(m[1]) / 100
            cost += f
        if used + cost > budget + 1e-9:
            break
        late = used >= budget / 2
        used += cost
        night.compute_late += cost if late else 0.0
        cand = [r["truth"] for r in window if abs(r["truth"] - best) > 1e-12]
        better = bool(cand) and cand[-1] < best - 1e-9
        if end["iteration"] > 0:
            night.improvements += better
        if m:
            night.stopped += 1
            night.saved += 1 - int(m[1]) / 100
            night.saved_late += (1 - int(m[1]) / 100) if late else 0.0
            night.lost += better
        if end["status"] == "keep" and end["iteration"] > 0:
            best = cand[-1] if cand else best
            night.keeps.append(best)
        night.points.append((used, best))
    night.compute = used
    return night


def one_night(surface: Surface, proposer: str, stop: str, seed: int, budget: float,
              run_s: float, stop_yaml: str, llm_every: int, inspect=None) -> Night:
    """One night in a throwaway repo; `inspect(repo, ledger)` looks at it before it goes."""
    with tempfile.TemporaryDirectory(prefix="surface-compute-") as tmp:
        ledger = Path(tmp) / "ledger.txt"
        extra = f"early_stop: {stop_yaml}\n" if stop == "on" else ""
        repo = sn.make_repo(Path(tmp), surface.noise, run_s, surface.task, str(ledger), extra)
        args = list(sn.PROPOSERS[proposer])
        if proposer == "hybrid":
            args[-1] = str(llm_every)
        server = sn.standin_server(surface.stream) if "--model" in args else None
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(tmp) / 'mlflow.db'}",
               "OPENAI_API_KEY": "sk-standin"}
        cmd = [sys.executable, "-m", "loop", "run", "--task", "surface", "--tag", "night",
               "--max-wall", "3600", "--iterations", "100000", "--judge", "sequential",
               "--seed", str(seed), "--sandbox", "off", *args,
               *(["--base-url", server.base_url] if server else [])]
        log = Path(tmp) / "loop.log"
        try:
            with open(log, "w") as out:
                proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out,
                                        stderr=subprocess.STDOUT)
                while proc.poll() is None:       # end it once the budget is spent
                    time.sleep(0.3)
                    if len(ledger_runs(ledger)) > budget + 1:
                        proc.send_signal(signal.SIGTERM)
                        proc.wait(timeout=120)
        finally:
            if server:
                server.stop()
        text = log.read_text()
        spent = bool(server) and "(401 Unauthorized)" in text
        done = spent or "search space exhausted" in text or "no untried" in text
        if (proc.returncode not in (0, -signal.SIGTERM, 130, 143) and not spent) or \
                (proc.returncode == 0 and not done and len(ledger_runs(ledger)) <= budget):
            raise RuntimeError(f"{surface.name}/{proposer}/{stop}/{seed}: the loop exited "
                               f"{proc.returncode}: {text[-2000:]}")
        night = read_night(surface, proposer, stop, seed, repo, ledger, budget, spent)
        kept = [surface.truth(sn.git(repo, "show", f"{sha}:surface/train.py")) for sha in
                sn.git(repo, "rev-list", "--first-parent", "--reverse",
                       "main..autoresearch/night").split()]
        if [round(k, 9) for k in night.keeps] != [round(k, 9) for k in kept[:len(night.keeps)]]:
            raise RuntimeError(f"{surface.name}/{proposer}/{stop}/{seed}: the ledger's keeps "
                               f"{night.keeps} are not the branch's {kept}")
        if inspect is not None:
            inspect(repo, ledger)
        return night


# -- the table ----------------------------------------------------------------------------

def mean_sd(xs: list[float]) -> str:
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.3f} ± {sd:.3f}"


def row(nights: list[Night], budget: float, target: float) -> str:
    hours = budget * RUN_MIN / 60
    rates = [n.gain_at(budget) / hours for n in nights]
    reach = [n.reach(target) for n in nights]
    got = sorted(r * RUN_MIN / 60 for r in reach if r is not None)
    when = (f"{statistics.median(got):.2f} h ({len(got)}/{len(nights)})" if got
            else f"not reached (0/{len(nights)})")
    n0 = nights[0]
    saved = [n.saved / max(1e-9, n.compute + n.saved) for n in nights]
    late = [n.saved_late / max(1e-9, n.compute_late + n.saved_late) for n in nights]
    stop = (f"{statistics.fmean(saved):.1%} ({statistics.fmean(late):.1%}) | "
            f"{sum(n.stopped for n in nights)} | {sum(n.lost for n in nights)} of "
            f"{sum(n.improvements for n in nights)}") if n0.stop == "on" else \
        f"- | - | 0 of {sum(n.improvements for n in nights)}"
    spent = sum(n.spent for n in nights)
    used = statistics.fmean(n.compute for n in nights) * RUN_MIN / 60
    return (f"| {n0.surface} | {n0.proposer} | {n0.stop} | {mean_sd(rates)} | "
            f"{', '.join(f'{r:.3f}' for r in rates)} | {when} | {stop} | {used:.2f} h"
            f"{f', {spent} spent' if spent else ''} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--surfaces", default="bar,hard")
    ap.add_argument("--proposers", default="mutate,tune,tune-cmaes,standin,hybrid")
    ap.add_argument("--stop", default="off,on", help="off, on (early_stop in task.yaml)")
    ap.add_argument("--stop-yaml", default="true", help="early_stop's value when on")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=48, help="full runs per night")
    ap.add_argument("--run-s", type=float, default=0.2, help="seconds one run takes")
    ap.add_argument("--llm-every", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=3, help="nights at once")
    ap.add_argument("--reference", default="", help="surface=gain, the 100 %% of the "
                    "compute-to-90 %% column (default: the best night of the surface)")
    args = ap.parse_args(argv)
    surfaces = [SURFACES[s] for s in args.surfaces.split(",") if s]
    proposers = [p for p in args.proposers.split(",") if p]
    stops = [s for s in args.stop.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if any(p not in sn.PROPOSERS for p in proposers) or any(s not in ("off", "on")
                                                            for s in stops):
        ap.error(f"--proposers: of {', '.join(sn.PROPOSERS)}; --stop: off, on")
    refs = dict(x.split("=") for x in args.reference.split(",") if x)
    jobs = [(s, p, st, seed) for s in surfaces for p in proposers for st in stops
            for seed in seeds]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        nights = list(pool.map(lambda j: one_night(*j, args.budget, args.run_s,
                                                   args.stop_yaml, args.llm_every), jobs))
    took = time.perf_counter() - t0
    hours = args.budget * RUN_MIN / 60
    print(f"{len(nights)} nights in {took / 60:.1f} min; budget {args.budget:g} runs of "
          f"{RUN_MIN:g} min = {hours:g} compute-hours per night; seeds {seeds}; "
          f"early_stop when on: {args.stop_yaml}\n")
    for s in surfaces:
        mine = [n for n in nights if n.surface == s.name]
        truth = s.module()
        default = truth.true_loss({k: float(v) for k, v in
                                   CONSTANT.findall((s.task / "train.py").read_text())})
        ceiling = default - truth.FLOOR
        ref = float(refs.get(s.name, 0)) or max(n.gain_at(args.budget) for n in mine)
        print(f"{s.name}: noise sd {s.noise:g}; true gain available from the constants "
              f"{ceiling:.3f}, {-sum(e for e in truth.TRICKS.values() if e < 0):.3f} more "
              f"from the stand-in's code changes; 90 % of {ref:.3f} (the best night's "
              f"gain) = {0.9 * ref:.3f}")
    print("\n| surface | proposer | stop | true gain per compute-hour, mean ± sd | per seed "
          "| compute to 90 % (median, nights that reached it) | run time saved (2nd half) "
          "| runs stopped | true improvements stopped | compute used |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in surfaces:
        mine = [n for n in nights if n.surface == s.name]
        ref = float(refs.get(s.name, 0)) or max(n.gain_at(args.budget) for n in mine)
        for p in proposers:
            for st in stops:
                cell = [n for n in mine if n.proposer == p and n.stop == st]
                print(row(cell, args.budget, 0.9 * ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
