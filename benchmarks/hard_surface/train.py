"""The editable side of the `hard` task: fourteen constants, and the code changes it lists
(`tricks`, what the scripted LLM stand-in edits); the surface is protected."""
from surface import report

LR = 1e-3
BATCH_SIZE = 128
N_EMBD = 256
N_HEAD = 8
N_LAYER = 4
SEQ_LEN = 256
WARMUP_FRAC = 0.0
FINAL_LR_FRAC = 1.0
WEIGHT_DECAY = 0.01
DROPOUT = 0.1
BETA2 = 0.99
GRAD_CLIP = 5.0
EVAL_EVERY = 100
EVAL_TOKENS = 8192

tricks = []
# tricks
report({"LR": LR, "BATCH_SIZE": BATCH_SIZE, "N_EMBD": N_EMBD, "N_HEAD": N_HEAD,
        "N_LAYER": N_LAYER, "SEQ_LEN": SEQ_LEN, "WARMUP_FRAC": WARMUP_FRAC,
        "FINAL_LR_FRAC": FINAL_LR_FRAC, "WEIGHT_DECAY": WEIGHT_DECAY, "DROPOUT": DROPOUT,
        "BETA2": BETA2, "GRAD_CLIP": GRAD_CLIP, "EVAL_EVERY": EVAL_EVERY,
        "EVAL_TOKENS": EVAL_TOKENS}, tricks)
