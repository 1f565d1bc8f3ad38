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
good, bad or none; `a_halved` changes what a constant means (A counts half as much)."""
import math
import os
import random
import time

NOISE = 0.02                      # run-to-run noise sd of the metric
RUN_S = 0.5                       # seconds one run takes
OPTIMUM = {"A": 1.0, "B": 0.3, "C": 5.0, "D": 0.05, "E": 20.0}
WEIGHT = {"A": 0.1, "B": 0.1, "C": 0.05, "D": 0.03, "E": 0.01}   # F..L: no effect
FLOOR = 1.0                       # the true loss at the optimum of the constants
TRICKS = {"warmup": -0.08, "ema": -0.04, "clip": -0.02, "schedule": -0.01,   # code changes
          "bad_init": 0.06, "big_dropout": 0.03, "refactor": 0.0, "logging": 0.0,
          "rename": 0.0, "a_halved": 0.0}


def true_loss(values: dict, tricks=()) -> float:
    """The noise-free loss; constants other than A..E do not enter it."""
    if "a_halved" in tricks:
        values = {**values, "A": values["A"] / 2}
    return FLOOR + sum(w * math.log(values[k] / OPTIMUM[k]) ** 2 for k, w in WEIGHT.items()) \
        + sum(TRICKS[t] for t in set(tricks))


def report(values: dict, tricks=()) -> None:
    time.sleep(RUN_S)
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    print(f"loss: {true_loss(values, tricks) + random.Random(seed).gauss(0.0, NOISE):.6f}")
