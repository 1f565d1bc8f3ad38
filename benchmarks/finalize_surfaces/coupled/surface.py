"""The `coupled` surface for benchmarks/finalize_surface.py (protected), written after the
finalize screen was tuned on `ridge` and `plateau`: three settings coupled through one
effective step (LR / (1 - MOMENTUM), scaled by sqrt(BATCH): the best LR moves with both),
heads x head size trading off against a best width (only their product matters, plus a mild
pull on the head count), an init scale bowl; and five settings the score ignores (a
checkpoint interval, a logging interval, memory pinning, a profiler interval, a shuffle
buffer). loss = true_loss + N(0, NOISE) from $AUTORESEARCH_SEED."""
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
    mom = min(max(values["MOMENTUM"], 1e-6), 0.999)
    step = values["LR"] / (1 - mom) / math.sqrt(values["BATCH"] / 128)
    width = values["HEADS"] * values["HEAD_DIM"]
    return 1.0 + 0.05 * ln(step / 0.1) ** 2 + 0.02 * ln((1 - mom) / 0.1) ** 2 \
        + 0.03 * ln(values["BATCH"] / 256) ** 2 + 0.05 * ln(width / 768) ** 2 \
        + 0.01 * ln(values["HEADS"] / 12) ** 2 + 0.02 * ln(values["WEIGHT_INIT"] / 0.02) ** 2


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
