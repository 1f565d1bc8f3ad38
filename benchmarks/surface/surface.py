"""The known true surface of the `surface` task (protected): loss = true_loss(constants) +
N(0, NOISE) drawn from $AUTORESEARCH_SEED, after RUN_S seconds of pretend training.

Five log-scale bowls of very different weights, so the offline proposer's steps (a constant
times 0.5, 0.7, 1.4 or 2) have effects from a few thousandths to a few tenths: most steps
are harmful (away from an optimum, or past it), a few help a lot. Seven more constants do
nothing at all (weight 0): a step on one of them is a no-op, the false keeps are counted on
those, and they give the proposer enough ideas to fill a night. benchmarks/surface_nights.py
rewrites NOISE (and RUN_S) in its own copy.

Code changes, for a proposer that edits code (the hybrid's scripted LLM stand-in): train.py
may list named tricks (`tricks.append("warmup")`), each with a known true effect (TRICKS),
good, bad or none; `a_halved` changes what a constant means (A counts half as much).

A run prints LINES progress lines over RUN_S seconds, a loss curve (for early stopping):
`final + DESCENT * (1 - f) ** 1.5 * (1 + shape)` plus its noise, as in benchmarks/
hard_surface/surface.py; on this surface only code changes have a shape (TRICK_SHAPES), the
constants do not. The final metric is the same as before the curves (`final + offset * NOISE`,
the seed's first draw). Each run appends `time iteration true_final` to LEDGER (when set) as it
starts and `time iteration end` as it ends: the benchmark counts compute from it."""
import math
import os
import random
import time

NOISE = 0.02                      # run-to-run noise sd of the metric
RUN_S = 0.5                       # seconds one run takes
LINES = 20                        # progress lines per run
DESCENT = 2.0                     # how far the loss falls over a run's budget
LEDGER = ""                       # where each run says it started and ended ("": nowhere)
OPTIMUM = {"A": 1.0, "B": 0.3, "C": 5.0, "D": 0.05, "E": 20.0}
WEIGHT = {"A": 0.1, "B": 0.1, "C": 0.05, "D": 0.03, "E": 0.01}   # F..L: no effect
FLOOR = 1.0                       # the true loss at the optimum of the constants
TRICKS = {"warmup": -0.08, "ema": -0.04, "clip": -0.02, "schedule": -0.01,   # code changes
          "bad_init": 0.06, "big_dropout": 0.03, "refactor": 0.0, "logging": 0.0,
          "rename": 0.0, "a_halved": 0.0}
TRICK_SHAPES = {"ema": 0.4, "clip": -0.05, "bad_init": 0.5, "big_dropout": 0.2}   # > 0: slower


def true_loss(values: dict, tricks=()) -> float:
    """The noise-free loss; constants other than A..E do not enter it."""
    if "a_halved" in tricks:
        values = {**values, "A": values["A"] / 2}
    return FLOOR + sum(w * math.log(values[k] / OPTIMUM[k]) ** 2 for k, w in WEIGHT.items()) \
        + sum(TRICKS[t] for t in set(tricks))


def report(values: dict, tricks=()) -> None:
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    iteration = os.environ.get("AUTORESEARCH_ITERATION", "-1")
    final = true_loss(values, tricks)
    slow = max(0.2, 1 + sum(TRICK_SHAPES.get(t, 0.0) for t in set(tricks)))
    _ledger(f"{time.time()!r} {iteration} {final!r}")
    rng = random.Random(seed)
    offset = rng.gauss(0.0, 1.0)       # the run's own: the final metric's noise
    for i in range(1, LINES + 1):
        f = i / LINES
        loss = final + DESCENT * (1 - f) ** 1.5 * slow + offset * NOISE * (1 + 2 * (1 - f)) \
            + rng.gauss(0.0, 0.5 * NOISE)
        print(f"step {i:05d} ({100 * f:.1f}%) | train_loss: {loss:.6f}", flush=True)
        time.sleep(RUN_S / LINES)
    _ledger(f"{time.time()!r} {iteration} end")
    print(f"loss: {final + offset * NOISE:.6f}")


def _ledger(line: str) -> None:
    if LEDGER:
        with open(LEDGER, "a") as out:
            out.write(line + "\n")
