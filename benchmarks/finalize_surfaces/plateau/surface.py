"""The `plateau` surface for benchmarks/finalize_surface.py (protected): depth and width
trade off (what matters is their product, the model's size, against a best size), dropout
matters more the bigger the model, a schedule's end and label smoothing are bowls; five
settings the score ignores (an eval interval, eval batches, a logging interval, a worker
count, a seed offset for data order). loss = true_loss + N(0, NOISE) from the seed."""
import math
import os
import random
import time

NOISE = 0.05
RUN_S = 0.05
LINES = 20
DESCENT = 2.0
LEDGER = ""
TRICKS: dict = {}
TRICK_SHAPES: dict = {}


def true_loss(values: dict, tricks=()) -> float:
    ln = math.log
    size = values["DEPTH"] * values["WIDTH"]
    big = max(0.5, size / 3000)
    return 1.0 + 0.06 * ln(size / 3000) ** 2 + 0.02 * ln(values["DEPTH"] / 8) ** 2 \
        + 0.03 * big * ln(values["DROPOUT"] / 0.1) ** 2 \
        + 0.03 * ln(values["FINAL_LR"] / 0.1) ** 2 + 0.015 * ln(values["SMOOTH"] / 0.1) ** 2


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
