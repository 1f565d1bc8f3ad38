"""The editable side of the `plateau` surface."""
from surface import report

DEPTH = 4.0
WIDTH = 256.0
DROPOUT = 0.5
FINAL_LR = 1.0
SMOOTH = 0.01
EVAL_EVERY = 50.0
EVAL_BATCHES = 20.0
LOG_EVERY = 10.0
NUM_WORKERS = 2.0
DATA_SEED = 1.0

tricks = []
# tricks
report({"DEPTH": DEPTH, "WIDTH": WIDTH, "DROPOUT": DROPOUT, "FINAL_LR": FINAL_LR,
        "SMOOTH": SMOOTH, "EVAL_EVERY": EVAL_EVERY, "EVAL_BATCHES": EVAL_BATCHES,
        "LOG_EVERY": LOG_EVERY, "NUM_WORKERS": NUM_WORKERS, "DATA_SEED": DATA_SEED}, tricks)
