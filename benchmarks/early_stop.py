"""What stopping clearly worse runs costs and saves: simulated loss curves with noise, the
engine's own rule (loop/run/early_stop.py: Band, StopRule, Watcher) applied to each.

A mature night, in units of the typical helpful effect on the final metric (as in
benchmarks/nights.py): the best state's true curve falls by `--descent` over the budget,
    best(f) = final + descent * (1 - f) ** 1.5
and a candidate with effect e (lowering the final value by e) and an early difference c
(its curve's shape: a bigger model starts slower, a higher learning rate faster) runs
    cand(f) = best(f) - e * f ** p + c * (best(f) - final)
so at the end only e is left. p (`--accrual`) says how early the effect shows: 1 grows with
the budget, 0.5 (default) shows early (a broken trick, a worse architecture), 0 is there
from the start. c, a share of the best's remaining fall, is the curve's own shape: the code
starts slower (c > 0) or faster, and ends the same; c ~ N(0, `--shape`) for every proposal
(0.03: at 30 % of the budget the candidate's loss differs from the best's by 3 % of what is
left to fall, whatever its final effect). Proposals: 20 % helpful (e lognormal, median 1,
log-sd 1), 30 % no-ops (e = 0), 50 % harmful (e = -lognormal, median 1.5, log-sd 1):
nights.py's mix. A share `--schedule` of them change the schedule's own constants: never
stopped (they run their whole budget and count in the denominator).

A run's curve is its true curve plus a persistent run offset (its seed: sd `--noise` at the
end, three times that at the start, falling linearly) and per-line noise (sd `--line` x
noise, what a smoothed training loss keeps), one progress line every 2 % of the budget.
The band is the best's `--best-runs` runs. Reported, per setting: the share of the
candidates' run time saved (a run stopped at f saves 1 - f of it), the share of harmful
candidates stopped, and the true improvements stopped (e > 0), also per 20 of them.

    python benchmarks/early_stop.py [--candidates 20000] [--noise 1] [--shape 0.03] [--seed 0]
    python benchmarks/early_stop.py --grid
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loop.run.early_stop import Band, StopRule, Watcher, thin  # noqa: E402
from loop.setup.stop_settings import Settings  # noqa: E402

LINES = 50                      # progress lines per run (every 2 % of the budget)


def effect(rng: random.Random) -> float:
    u = rng.random()
    if u < 0.2:
        return rng.lognormvariate(0.0, 1.0)
    if u < 0.5:
        return 0.0
    return -rng.lognormvariate(math.log(1.5), 1.0)


def run_curve(rng: random.Random, true, noise: float, line: float) -> list[tuple[float, float]]:
    """One run: its seed's persistent offset (wider early) plus per-line noise."""
    offset = rng.gauss(0, 1)
    points = []
    for i in range(1, LINES + 1):
        f = i / LINES
        sd_run = noise * (1 + 2 * (1 - f))
        points.append((f, true(f) + offset * sd_run + rng.gauss(0, line * noise)))
    return points


def night(settings: Settings, args, seed: int) -> dict:
    rng = random.Random(seed)
    final, descent = 100.0, args.descent

    def best(f: float) -> float:
        return final + descent * (1 - f) ** 1.5
    curves = [thin(run_curve(rng, best, args.noise, args.line)) for _ in range(args.best_runs)]
    band = Band.of(curves, settings.min_best_runs)
    assert band is not None
    rule = StopRule(band, settings)
    saved = harmful = harmful_stopped = helpful = helpful_stopped = 0.0
    for _ in range(args.candidates):
        e, c = effect(rng), rng.gauss(0, args.shape)
        helpful += e > 0
        harmful += e < 0
        if rng.random() < args.schedule:
            continue                    # a schedule change: its whole budget, never stopped
        watch = Watcher(None, 1.0, rule)  # type: ignore[arg-type]   (points fed directly)
        p = args.accrual
        for f, loss in run_curve(rng, lambda f: best(f) - e * f ** p + c * (best(f) - final),  # noqa: B023
                                 args.noise, args.line):
            if watch.see_point(f, loss):
                saved += 1 - f
                helpful_stopped += e > 0
                harmful_stopped += e < 0
                break
    return {"saved": saved / args.candidates, "harmful": harmful_stopped / max(1, harmful),
            "lost": helpful_stopped, "helpful": helpful}


SETTINGS = [("default (warmup 0.3, z 3, margin 0.1, 3 lines)", Settings()),
            ("margin 0", Settings(margin=0.0)),
            ("margin 0.2", Settings(margin=0.2)),
            ("z 2", Settings(z=2.0)),
            ("warmup 0.2", Settings(warmup=0.2)),
            ("warmup 0.5", Settings(warmup=0.5)),
            ("1 line", Settings(lines=1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=int, default=20000)
    ap.add_argument("--noise", type=float, default=1.0, help="final run-to-run sd")
    ap.add_argument("--line", type=float, default=0.5, help="per-line sd, x noise")
    ap.add_argument("--shape", type=float, default=0.03,
                    help="sd of c, the shape: a share of the remaining fall")
    ap.add_argument("--descent", type=float, default=200.0)
    ap.add_argument("--schedule", type=float, default=0.3)
    ap.add_argument("--best-runs", type=int, default=3)
    ap.add_argument("--accrual", type=float, default=0.5, help="p: the effect shows as f**p")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid", action="store_true",
                    help="every setting at noise 0.2 and 1 x shape 0.01, 0.03 and 0.1")
    args = ap.parse_args()
    cases = [(n, sh) for n in (0.2, 1.0) for sh in (0.01, 0.03, 0.1)] if args.grid else \
        [(args.noise, args.shape)]
    print(f"{args.candidates} candidates per row; per-line noise {args.line:g}x, accrual p "
          f"{args.accrual:g}, schedule share {args.schedule:g}, best runs {args.best_runs}, "
          f"descent {args.descent:g}\n")
    print("| noise | shape | setting | run time saved | harmful stopped | "
          "true improvements stopped | per 20 |")
    print("|---|---|---|---|---|---|---|")
    for noise, shape in cases:
        args.noise, args.shape = noise, shape
        for name, settings in SETTINGS:
            r = night(settings, args, args.seed)
            per20 = 20 * r["lost"] / max(1, r["helpful"])
            print(f"| {noise:g} | {shape:g} | {name} | {r['saved']:.1%} | {r['harmful']:.1%} | "
                  f"{r['lost']:.0f} of {r['helpful']:.0f} | {per20:.2f} |")

if __name__ == "__main__":
    main()
