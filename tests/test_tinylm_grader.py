"""tinylm's grader against models that learnt the validation text instead of the language."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TINYLM = Path(__file__).resolve().parent.parent / "experiments" / "tinylm"

# A causal "model" that memorised the val split: the next byte after each 10-byte context.
MEMORISER = '''
import os
from dataclasses import asdict, dataclass
import torch
import torch.nn as nn
import prepare

SEQ_LEN = 64
MEMORISE = 1        # 0: an honest know-nothing model (uniform logits)


@dataclass
class GPTConfig:
    block_size: int = 64
    order: int = 10


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.dummy = nn.Parameter(torch.zeros(1))
        val = bytes(prepare.load_split("val").tolist()) if MEMORISE else b""
        k = cfg.order
        self.table = {val[i:i + k]: val[i + k] for i in range(len(val) - k)}

    def forward(self, idx):
        B, T = idx.shape
        out = torch.zeros(B, T, 256)
        k = self.cfg.order
        for b in range(B):
            row = bytes(idx[b].tolist())
            for t in range(k - 1, T):
                nxt = self.table.get(row[t - k + 1:t + 1])
                if nxt is not None:
                    out[b, t, nxt] = 8.0
        return out + self.dummy


if __name__ == "__main__":
    out = os.environ["AUTORESEARCH_ARTIFACT_DIR"]
    os.makedirs(out, exist_ok=True)
    cfg = GPTConfig()
    torch.save({"config": asdict(cfg), "state_dict": GPT(cfg).state_dict()},
               os.path.join(out, "model.pt"))
'''


def grade(tmp_path, train_py):
    task = tmp_path / "tinylm"
    shutil.copytree(TINYLM, task, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    (task / "train.py").write_text(train_py)
    env = {**os.environ, "AUTORESEARCH_ARTIFACT_DIR": str(tmp_path / "art"),
           "AUTORESEARCH_CACHE": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "train.py"], cwd=task, env=env, check=True, timeout=300)
    return subprocess.run([sys.executable, "evaluate.py"], cwd=task, env=env, timeout=300,
                          capture_output=True, text=True)


def test_a_model_that_memorised_val_is_refused(tmp_path):
    res = grade(tmp_path, MEMORISER)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "leak_check: failed" in res.stdout
    assert "val_bpb:" not in res.stdout            # no metric for the loop to parse


def test_an_honest_model_passes_the_leak_check(tmp_path):
    res = grade(tmp_path, MEMORISER.replace("MEMORISE = 1", "MEMORISE = 0"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "val_bpb:          8.0000" in res.stdout     # uniform logits: 8 bits per byte
    assert "fresh_text_bpb: 8.0000" in res.stdout
