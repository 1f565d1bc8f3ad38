"""Protected grader for the tinylm task: run by the engine after train.py, in this folder.

It does not trust the numbers train.py printed. It rebuilds the model from the checkpoint
(using train.py's own GPT and GPTConfig, so architecture edits are allowed), checks that
the model is causal (a model that peeks at future bytes would score an impossibly low
bpb), and measures val_bpb with the protected prepare.evaluate_bpb.

It also scores fresh text from the same grammar, generated from a random seed at grading
time: nothing a run could have trained on. The val split is fixed and prepare.py is readable,
so train.py could train on val itself; a model that did scores far better on val than on
fresh text, and is refused.

Exit codes: 0 graded, 1 non-finite logits (val_bpb: nan), 2 no/unreadable checkpoint,
3 causality check failed, 4 val much better than fresh text (trained on val).
"""
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # import this folder's prepare.py and train.py

import torch  # noqa: E402

import prepare  # noqa: E402

# Bound and loaded before train.py's import-time code runs, so it cannot swap them.
evaluate_bpb = prepare.evaluate_bpb
VAL = prepare.load_split("val")
FRESH = prepare.fresh_text()
import train  # noqa: E402  (import-safe: train.py trains only under __main__)

CAUSAL_TOL = 1e-4   # max |logit change| allowed at positions before the edited bytes
CAUSAL_BATCH = 2    # sequences in the fixed causality probe
LEAK_MARGIN = 0.05  # bpb; val and fresh text differ by about 0.01 for an honest model


def fail(code, message):
    print(message, flush=True)
    sys.exit(code)


def load_model(path, device):
    if not path.is_file():
        fail(2, f"error: checkpoint not found: {path} (did train.py finish and save it?)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        model = train.GPT(train.GPTConfig(**ckpt["config"]))
        model.load_state_dict(ckpt["state_dict"])
    except Exception as exc:  # any mismatch between checkpoint and train.py
        fail(2, f"error: could not load checkpoint {path}: {type(exc).__name__}: {exc}")
    # Grade at the model's own context length (block_size), the longest it was built for.
    seq_len = int(ckpt["config"].get("block_size") or train.SEQ_LEN)
    return model.to(device).float().eval(), seq_len


@torch.no_grad()
def is_causal(model, device, seq_len):
    """Logits at positions <= t must not change when the bytes after t change."""
    gen = torch.Generator().manual_seed(0)
    x = VAL[:CAUSAL_BATCH * seq_len].long().view(CAUSAL_BATCH, seq_len)
    base = model(x.to(device)).float()
    if not torch.isfinite(base).all():  # a broken model is "diverged", not "cheating"
        fail(1, "model produces non-finite logits\n---\nval_bpb:          nan")
    for t in sorted({0, seq_len // 3, seq_len // 2, seq_len - 2}):
        if t < 0 or t >= seq_len - 1:
            continue
        y = x.clone()
        y[:, t + 1:] = torch.randint(0, prepare.VOCAB_SIZE, (CAUSAL_BATCH, seq_len - t - 1),
                                     generator=gen)
        out = model(y.to(device)).float()
        diff = (out[:, :t + 1] - base[:, :t + 1]).abs().max().item()
        if not diff <= CAUSAL_TOL:  # also catches NaN
            print(f"causality: logits up to position {t} changed by {diff:.3g} "
                  f"when later bytes changed")
            return False
    return True


def main():
    t0 = time.time()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    art_dir = os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "artifacts"
    model, seq_len = load_model(Path(art_dir) / "model.pt", device)
    if not is_causal(model, device, seq_len):
        fail(3, "causality_check: failed")
    print("causality_check: passed")
    val_bpb = evaluate_bpb(model, device, seq_len, data=VAL)
    fresh_bpb = evaluate_bpb(model, device, seq_len, data=FRESH)
    print(f"fresh_text_bpb: {fresh_bpb:.6f}")
    if val_bpb < fresh_bpb - LEAK_MARGIN:
        fail(4, f"leak_check: failed: val_bpb {val_bpb:.4f} is {fresh_bpb - val_bpb:.4f} below "
                f"fresh text from the same grammar (was the model trained on the val split?)")
    print("---")
    print(f"val_bpb:          {val_bpb:.6f}")
    print(f"eval_seconds:     {time.time() - t0:.1f}")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # no exit hooks: nothing train.py registered at import prints after the metric
