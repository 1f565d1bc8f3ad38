"""The editable side of the `ridge` surface."""
from surface import report

LR = 0.01
WD = 0.01
BATCH = 16.0
WARMUP = 0.2
CLIP = 4.0
BETA2 = 0.5
LOG_EVERY = 10.0
CKPT_EVERY = 100.0
NUM_WORKERS = 4.0
PREFETCH = 2.0

tricks = []
# tricks
report({"LR": LR, "WD": WD, "BATCH": BATCH, "WARMUP": WARMUP, "CLIP": CLIP, "BETA2": BETA2,
        "LOG_EVERY": LOG_EVERY, "CKPT_EVERY": CKPT_EVERY, "NUM_WORKERS": NUM_WORKERS,
        "PREFETCH": PREFETCH}, tricks)
