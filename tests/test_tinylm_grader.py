"""tinylm's grading (the lm grader with prepare.grader_check) against models that learnt the
validation text instead of the language."""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from loop.setup.task import load_task

TINYLM = Path(__file__).resolve().parent.parent / "experiments" / "tinylm"

# A causal, exportable "model" that memorised the val split: a hashed table from the last 8
# bytes to the byte that followed them in val, confident (logit 8) where it has an entry.
MEMORISER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import prepare

MEMORISE = 1        # 0: an honest know-nothing model (uniform logits)
ORDER, BUCKETS = 8, 1 << 20


def context_hash(idx):
    T = idx.shape[1]
    padded = F.pad(idx, (ORDER - 1, 0))
    h = torch.zeros_like(idx)
    for i in range(ORDER):
        h = (h * 257 + padded[:, i:i + T]) % BUCKETS
    return h


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))
        table = torch.full((BUCKETS,), -1, dtype=torch.long)
        if MEMORISE:
            val = prepare.load_split("val").long()
            table[context_hash(val.view(1, -1))[0, :-1]] = val[1:]
        self.register_buffer("table", table)

    def forward(self, idx):
        nxt = self.table[context_hash(idx)]
        known = (nxt >= 0).unsqueeze(-1).float()
        return F.one_hot(nxt.clamp(min=0), 256).float() * 8.0 * known + self.dummy


prepare.evaluate_bpb(GPT(), "cpu", prepare.EVAL_SEQ_LEN)
'''


def grade(tmp_path, train_py):
    """train.py through the handover, then the lm grader, as task.yaml has them built."""
    folder = tmp_path / "tinylm"
    shutil.copytree(TINYLM, folder, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    (folder / "train.py").write_text(train_py)
    task = load_task(TINYLM)           # the commands; train.py here is not tinylm's
    env = {**os.environ, "AUTORESEARCH_ARTIFACT_DIR": str(tmp_path / "art"),
           "AUTORESEARCH_CACHE": str(tmp_path / "cache")}
    (tmp_path / "art").mkdir()
    python = shlex.quote(sys.executable) + " "       # `python` in task.yaml: this venv's
    trained = subprocess.run(task.train_command.replace("python ", python, 1), shell=True,
                             cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stdout + trained.stderr[-2000:]
    return subprocess.run(task.grade_command.replace("python ", python, 1), shell=True,
                          cwd=folder, env=env, timeout=300, capture_output=True, text=True)


def test_a_model_that_memorised_val_is_refused(tmp_path):
    res = grade(tmp_path, MEMORISER)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "error: grader_check: leak check failed: val_bpb" in res.stdout
    assert "---" not in res.stdout                  # no metric block for the loop to parse


def test_an_honest_model_passes_the_leak_check(tmp_path):
    res = grade(tmp_path, MEMORISER.replace("MEMORISE = 1", "MEMORISE = 0"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "val_bpb: 8.0000" in res.stdout     # uniform logits: 8 bits per byte
    assert "fresh_text_bpb: 8.0000" in res.stdout
