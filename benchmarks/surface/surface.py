"""The known true surface of the `surface` task (protected): loss = true_loss(constants) +
N(0, NOISE) drawn from $AUTORESEARCH_SEED, after RUN_S seconds of pretend training.

Five log-scale bowls of very different weights, so the offline proposer's steps (a constant
times 0.5, 0.7, 1.4 or 2) have effects from a few thousandths to a few tenths: most steps
are harmful (away from an optimum, or past it), a few help a lot. Seven more constants do
nothing at all (weight 0): a step on one of them is a no-op, the false keeps are counted on
those, and they give the proposer enough ideas to fill a night. benchmarks/surface_nights.py
rewrites NOISE (and RUN_S) in its own copy."""
import math
import os
import random
import time

NOISE = 0.02                      # run-to-run noise sd of the metric
RUN_S = 0.5                       # seconds one run takes
OPTIMUM = {"A": 1.0, "B": 0.3, "C": 5.0, "D": 0.05, "E": 20.0}
WEIGHT = {"A": 0.1, "B": 0.1, "C": 0.05, "D": 0.03, "E": 0.01}   # F..L: no effect
FLOOR = 1.0                       # the true loss at the optimum


def true_loss(values: dict) -> float:
    """The noise-free loss; constants other than A..E do not enter it."""
    return FLOOR + sum(w * math.log(values[k] / OPTIMUM[k]) ** 2 for k, w in WEIGHT.items())


def report(values: dict) -> None:
    time.sleep(RUN_S)
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    print(f"loss: {true_loss(values) + random.Random(seed).gauss(0.0, NOISE):.6f}")
