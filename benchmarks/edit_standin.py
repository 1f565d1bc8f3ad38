"""A fixed, realistic ~200-line train.py that the edit corpus is written against.

Kept apart from experiments/tinylm/train.py on purpose: that file evolves, and every case
in the corpus quotes lines of this one. Also the stand-in for prompt-size figures when
experiments/tinylm/train.py does not exist."""

TRAIN = '''\
"""Train a small GPT-style byte-level language model for a fixed time budget."""
import math
import os
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import prepare

# --- hyperparameters ----------------------------------------------------------------
DEPTH = 4
N_EMBD = 128
N_HEAD = 4
SEQ_LEN = 128
DROPOUT = 0.0
BATCH_SIZE = 32
LEARNING_RATE = 3e-3
WEIGHT_DECAY = 0.1
BETA1 = 0.9
BETA2 = 0.95
WARMUP_FRAC = 0.05
GRAD_CLIP = 1.0
LOG_EVERY = 50


@dataclass
class GPTConfig:
    vocab_size: int = 256
    block_size: int = SEQ_LEN
    n_layer: int = DEPTH
    n_head: int = N_HEAD
    n_embd: int = N_EMBD
    dropout: float = DROPOUT


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = F.gelu(self.fc(x))
        return self.drop(self.proj(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def configure_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": WEIGHT_DECAY},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=LEARNING_RATE, betas=(BETA1, BETA2))


def lr_at(progress):
    """Linear warmup, then cosine decay to 10% of the peak, by fraction of the budget."""
    if progress < WARMUP_FRAC:
        return LEARNING_RATE * progress / WARMUP_FRAC
    decay = (progress - WARMUP_FRAC) / (1 - WARMUP_FRAC)
    return LEARNING_RATE * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * decay)))


def get_batch(data, device):
    ix = torch.randint(len(data) - SEQ_LEN - 1, (BATCH_SIZE,))
    x = torch.stack([data[i:i + SEQ_LEN] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + SEQ_LEN] for i in ix])
    return x.to(device), y.to(device)


@torch.no_grad()
def estimate_loss(model, data, device, batches=20):
    model.eval()
    losses = []
    for _ in range(batches):
        x, y = get_batch(data, device)
        logits = model(x)
        losses.append(F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)).item())
    model.train()
    return sum(losses) / len(losses)


def main():
    torch.manual_seed(int(os.environ.get("AUTORESEARCH_SEED", "0")))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    budget = float(os.environ.get("AUTORESEARCH_TIME_BUDGET", "60"))
    train_data, val_data = prepare.load_data()
    cfg = GPTConfig()
    model = GPT(cfg).to(device)
    optimizer = configure_optimizer(model)
    print(f"params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

    start = time.time()
    step = 0
    while True:
        progress = (time.time() - start) / budget
        if progress >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = lr_at(progress)
        x, y = get_batch(train_data, device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if GRAD_CLIP > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        step += 1
        if step % LOG_EVERY == 0:
            print(f"step {step} loss {loss.item():.4f} lr {lr_at(progress):.2e}")

    val_loss = estimate_loss(model, val_data, device)
    print(f"steps: {step}")
    print(f"val_loss: {val_loss:.6f}")
    if device == "cuda":
        print(f"peak_memory_mb: {torch.cuda.max_memory_allocated() / 2**20:.1f}")


if __name__ == "__main__":
    main()
'''

PREPARE = '''\
"""Protected: data loading and the metric. The research loop may not edit this file."""
import torch


def load_data():
    data = torch.randint(0, 256, (100_000,))
    return data[:90_000], data[90_000:]
'''

PROGRAM = """\
# Research program

Goal: lower val_loss of the tiny byte-level GPT in train.py within the fixed time budget.

Ideas worth trying, roughly in order: learning-rate schedule and warmup; model width vs
depth at a fixed budget; batch size vs steps; optimizer betas and weight decay; removing
dropout entirely; a better initialisation; QK-norm; rotary position embeddings; SwiGLU MLP.

Constraints: the metric and the data pipeline (prepare.py) are off limits. Every change must
keep the script runnable in under the budget on one GPU. Prefer changes that make the code
shorter. Report one idea per iteration; explain the expected effect in the description.
"""
