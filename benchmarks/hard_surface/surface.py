"""The known true surface of the `hard` task (protected): a harder night than benchmarks/surface/.

Fourteen constants of four kinds (log_range, range, integer, choices) under two constraints
(N_HEAD divides N_EMBD; BATCH_SIZE * SEQ_LEN <= 262144), which interact: the best LR grows
with sqrt(BATCH_SIZE) and falls with N_EMBD (a ridge, not a bowl per constant), the model's
size is N_EMBD**2 * N_LAYER (width and depth trade off), the best WARMUP_FRAC grows with
LR over its best, GRAD_CLIP matters more at a high LR. EVAL_EVERY and EVAL_TOKENS do
nothing. `true_loss` is exact: the noise-free final loss of any point.

Learning curves differ in SHAPE: a run prints a progress line every 1/LINES of its budget,

    loss(f) = final + DESCENT * (1 - f) ** 1.5 * (1 + shape)   (+ the run's noise)

where `shape` > 0 starts slower (a bigger model, more warm-up, dropout, a bigger batch, a
lower final LR, a lower LR) and < 0 faster, as a share of what is left to fall, the model of
benchmarks/early_stop.py. A bigger model starts slower and ends better: the curves cross,
which is what makes a rule that stops runs early lose true improvements. Noise: a persistent
run offset (NOISE at the end, three times that at the start) plus per-line noise, both drawn
from $AUTORESEARCH_SEED; the final metric is `final + offset * NOISE`.

Code changes (the hybrid's scripted LLM stand-in): train.py may list named tricks, each
with a known true effect on the final loss and a shape (TRICKS); `lr_scaled` changes what
LR means (the code uses half of it). benchmarks/surface_nights.py rewrites NOISE, RUN_S and
LEDGER in its own copy; each run appends `time iteration true_final` to LEDGER when it starts and
`time iteration end` when it ends, so the benchmark can count compute."""
import math
import os
import random
import time

NOISE = 0.03                      # run-to-run sd of the final metric
RUN_S = 0.5                       # seconds one run takes (LINES progress lines)
LINES = 20
DESCENT = 2.0                     # how far the loss falls over the budget
LEDGER = ""                       # where each run says it started and ended ("": nowhere)
FLOOR = 3.0                       # the true loss at the optimum of the constants, no tricks
# code changes: their true effect on the final loss, and their shape (> 0: a slower start)
TRICKS = {"rmsnorm": -0.03, "swiglu": -0.04, "rope": -0.05, "qk_norm": -0.02, "ema_eval": -0.03,
          "zero_init_proj": -0.015, "bad_init": 0.08, "post_norm": 0.04,
          "no_bias_correction": 0.03, "huge_vocab": 0.06, "refactor": 0.0, "logging": 0.0,
          "rename": 0.0, "type_hints": 0.0, "docstrings": 0.0, "lr_scaled": 0.0}
TRICK_SHAPES = {"swiglu": 0.25, "rope": -0.1, "ema_eval": 0.4, "zero_init_proj": 0.05,
                "bad_init": 0.5, "post_norm": 0.2, "no_bias_correction": -0.1, "huge_vocab": 0.3}
P_BEST = 384 ** 2 * 6             # the model size a run's budget is best spent on


def lr_best(v: dict) -> float:
    """The ridge: sqrt scaling with the batch, 1/width (muP-like)."""
    return 2e-3 * math.sqrt(v["BATCH_SIZE"] / 256) * (384 / v["N_EMBD"])


def _effective(v: dict, tricks) -> dict:
    return {**v, "LR": v["LR"] / 2} if "lr_scaled" in tricks else v


def terms(v: dict) -> dict:
    """Each part of the loss above FLOOR (all >= 0; 0 at the optimum)."""
    ln = math.log
    ratio = v["LR"] / lr_best(v)
    warm_best = min(0.3, 0.05 * ratio)
    return {
        "lr": 0.12 * ln(ratio) ** 2,
        "size": 0.08 * ln(v["N_EMBD"] ** 2 * v["N_LAYER"] / P_BEST) ** 2,
        "aspect": 0.02 * ln(v["N_EMBD"] / (64 * v["N_LAYER"])) ** 2,
        "head_dim": 0.02 * math.log2(v["N_EMBD"] / v["N_HEAD"] / 64) ** 2,
        "tokens": 0.04 * ln(v["BATCH_SIZE"] * v["SEQ_LEN"] / 131072) ** 2,
        "context": 0.02 * math.log2(v["SEQ_LEN"] / 512) ** 2,
        "warmup": 4.0 * (v["WARMUP_FRAC"] - warm_best) ** 2,
        "anneal": 0.06 * (v["FINAL_LR_FRAC"] - 0.1) ** 2,
        "decay": 0.01 * math.log10(v["WEIGHT_DECAY"] / 0.1) ** 2,
        "dropout": 0.2 * v["DROPOUT"] ** 2,
        "beta2": 0.005 * ln((1 - v["BETA2"]) / 0.05) ** 2,
        "clip": 0.01 * ln(v["GRAD_CLIP"]) ** 2 * (1 + ratio),
    }


def true_loss(values: dict, tricks=()) -> float:
    """The noise-free final loss of a point and the tricks its code lists."""
    v = _effective(values, tricks)
    return FLOOR + sum(terms(v).values()) + sum(TRICKS[t] for t in set(tricks))


def shape(values: dict, tricks=()) -> float:
    """How much slower (> 0) than a plain curve a run starts, as a share of what is left to
    fall; its final value does not depend on it."""
    v = _effective(values, tricks)
    ln = math.log
    return (0.25 * ln(v["N_EMBD"] ** 2 * v["N_LAYER"] / P_BEST) + 1.0 * v["WARMUP_FRAC"]
            + 0.5 * v["DROPOUT"] + 0.1 * math.log2(v["BATCH_SIZE"] / 256)
            + 0.2 * (1 - v["FINAL_LR_FRAC"]) - 0.3 * ln(v["LR"] / lr_best(v))
            + sum(TRICK_SHAPES.get(t, 0.0) for t in set(tricks)))


def curve_at(final: float, slow: float, f: float) -> float:
    """The noise-free loss at share f of the budget."""
    return final + DESCENT * (1 - f) ** 1.5 * max(0.2, 1 + slow)


def best_point() -> dict:
    """The optimum of the constants, found exactly: every discrete combination that the
    constraints allow, with each continuous constant at its best value given those (LR on
    its ridge, then WARMUP_FRAC for that LR; the others do not interact)."""
    best, best_loss = {}, math.inf
    for bs in (32, 64, 128, 256, 512, 1024):
        for seq in (128, 256, 512, 1024):
            if bs * seq > 262144:
                continue
            for width in (128, 192, 256, 384, 512, 768):
                for heads in (h for h in range(1, 17) if width % h == 0):
                    for layers in range(2, 13):
                        v = {"BATCH_SIZE": bs, "SEQ_LEN": seq, "N_EMBD": width,
                             "N_HEAD": heads, "N_LAYER": layers, "FINAL_LR_FRAC": 0.1,
                             "WEIGHT_DECAY": 0.1, "DROPOUT": 0.0, "BETA2": 0.95,
                             "GRAD_CLIP": 1.0, "EVAL_EVERY": 100, "EVAL_TOKENS": 8192}
                        v["LR"] = min(3e-2, max(1e-4, lr_best(v)))
                        v["WARMUP_FRAC"] = min(0.3, 0.05 * v["LR"] / lr_best(v))
                        loss = true_loss(v)
                        if loss < best_loss:
                            best, best_loss = v, loss
    return best


def _ledger(line: str) -> None:
    if LEDGER:
        with open(LEDGER, "a") as out:
            out.write(line + "\n")


def report(values: dict, tricks=()) -> None:
    """One run: LINES progress lines over RUN_S seconds, then the final loss."""
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    iteration = os.environ.get("AUTORESEARCH_ITERATION", "-1")
    final, slow = true_loss(values, tricks), shape(values, tricks)
    _ledger(f"{time.time()!r} {iteration} {final!r}")
    rng = random.Random(seed)
    offset = rng.gauss(0.0, 1.0)
    for i in range(1, LINES + 1):
        f = i / LINES
        loss = curve_at(final, slow, f) + offset * NOISE * (1 + 2 * (1 - f)) \
            + rng.gauss(0.0, 0.5 * NOISE)
        print(f"step {i:05d} ({100 * f:.1f}%) | loss: {loss:.6f}", flush=True)
        time.sleep(RUN_S / LINES)
    _ledger(f"{time.time()!r} {iteration} end")
    print(f"val_loss: {final + offset * NOISE:.6f}")
