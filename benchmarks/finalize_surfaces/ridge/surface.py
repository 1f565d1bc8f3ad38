"""The `ridge` surface for benchmarks/finalize_surface.py (protected): six settings that
matter, two of which interact (the best weight decay falls as the learning rate rises: a
ridge in LR x WD), and four the score ignores (a logging interval, a checkpoint interval, a
worker count, a prefetch depth). loss = true_loss + N(0, NOISE) from $AUTORESEARCH_SEED."""
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
    lr, wd = values["LR"], values["WD"]
    ridge = 0.08 * (ln(lr * wd / 3e-5)) ** 2 + 0.02 * ln(lr / 3e-3) ** 2
    return 1.0 + ridge + 0.04 * ln(values["BATCH"] / 64) ** 2 \
        + 0.03 * ln(values["WARMUP"] / 0.05) ** 2 + 0.02 * ln(values["CLIP"] / 1.0) ** 2 \
        + 0.01 * ln(values["BETA2"] / 0.95) ** 2


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
