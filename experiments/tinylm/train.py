"""Editable research target: train a small GPT-style byte-level LM for a fixed budget
(prepare.Budget: seconds of training on a GPU, training FLOPs on a CPU).

The research loop edits this file (hyperparameters, model, optimizer, schedule) and keeps
the change only if val_bpb goes down. Data and the metric live in the protected prepare.py.

Contract with the protected grader (task.yaml's `grader: {kind: lm}`):
  - at the end, the run calls prepare.evaluate_bpb(model, device, seq_len) with its final
    model; under the engine that call hands the model over (loop/run/graders/handover.py): it
    is exported with torch.export at [32, prepare.EVAL_SEQ_LEN] and graded by protected
    code, so model(idx) must map (B, T) int64 bytes to (B, T, 256) logits, be causal, and
    be exportable (no Python branching on tensor values);
  - what this script prints as val_bpb is only for runs by hand: the loop reads the grader's.
"""
import contextlib
import math
import os
import resource
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import prepare

# --- hyperparameters (plain numbers, so a mutator can perturb them) ---------------------
DEPTH = 4               # transformer blocks
N_EMBD = 128            # residual stream width
N_HEAD = 4              # attention heads (must divide N_EMBD)
MLP_RATIO = 4           # MLP hidden width = MLP_RATIO * N_EMBD
SEQ_LEN = 128           # training context in bytes (the grader scores EVAL_SEQ_LEN windows)
DROPOUT = 0.0           # a minute of training sees under one epoch: no need to regularize
BATCH_SIZE = 32         # sequences per step
LEARNING_RATE = 3e-3    # peak AdamW learning rate
WEIGHT_DECAY = 0.1      # decoupled decay, applied to matrices only
BETA1 = 0.9             # AdamW first-moment decay
BETA2 = 0.95            # AdamW second-moment decay
WARMUP_FRAC = 0.05      # fraction of the budget spent warming the LR up linearly
FINAL_LR_FRAC = 0.1     # LR at the end of the cosine decay, as a fraction of the peak
GRAD_CLIP = 1.0         # max global grad norm (0 disables)


@dataclass
class GPTConfig:
    vocab_size: int = 256
    block_size: int = max(SEQ_LEN, prepare.EVAL_SEQ_LEN)   # room for the grader's windows
    n_layer: int = DEPTH
    n_head: int = N_HEAD
    n_embd: int = N_EMBD
    mlp_ratio: int = MLP_RATIO
    dropout: float = DROPOUT


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, cfg.mlp_ratio * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn, self.mlp = CausalSelfAttention(cfg), MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)  # untied: cheap at 256
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: shrink residual writes by depth
            if name.endswith("proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        B, T = idx.shape
        assert T <= self.cfg.block_size, f"sequence of {T} > block_size {self.cfg.block_size}"
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def lr_at(progress):
    """Linear warm-up, then cosine decay to FINAL_LR_FRAC, over the fraction of the budget used."""
    if progress < WARMUP_FRAC:
        return LEARNING_RATE * (progress + 1e-3) / WARMUP_FRAC
    t = min(1.0, (progress - WARMUP_FRAC) / max(1e-9, 1.0 - WARMUP_FRAC))
    return LEARNING_RATE * (FINAL_LR_FRAC + (1 - FINAL_LR_FRAC) * 0.5 * (1 + math.cos(math.pi * t)))


def peak_flops(device):
    """Dense bf16 peak of the GPU, for MFU; 0 when unknown (CPU, unlisted GPU)."""
    if device.type != "cuda":
        return 0.0
    name = torch.cuda.get_device_name(device)
    for key, flops in (("H100", 989e12), ("H200", 989e12), ("A100", 312e12), ("L4", 121e12),
                       ("4090", 165e12), ("3090", 71e12)):
        if key in name:
            return flops
    return 0.0


def main():
    t_start = time.time()
    if hasattr(sys.stdout, "reconfigure"):  # flush each line: progress survives a kill
        sys.stdout.reconfigure(line_buffering=True)
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)  # batch sampling: same seed, same batches
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":  # bf16 matmuls, fp32 weights and optimizer state
        autocast = torch.autocast("cuda", dtype=torch.bfloat16)
    else:  # use every core we are allowed on, fp32 (bf16 is slow on most CPUs)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        torch.set_num_threads(max(1, cores or 1))
        autocast = contextlib.nullcontext()
    prepare.load_split("train"), prepare.load_split("val")  # build the cache before the clock
    cfg = GPTConfig()
    model = GPT(cfg).to(device)
    num_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LEARNING_RATE, betas=(BETA1, BETA2))
    budget = prepare.Budget(model, device)  # time on a GPU, training FLOPs on a CPU
    print(f"device: {device} | params: {num_params:,} | budget: {budget.describe()}")

    # The clock counts only training steps; step 0 is a warm-up (allocator, kernels, any
    # compilation) and is left out of it, so start-up cost never eats into the budget.
    training_time, step, tokens, timed_tokens, progress = 0.0, 0, 0, 0, 0.0
    while progress < 1.0:
        t0 = time.time()
        lr = lr_at(progress)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = prepare.get_batch("train", BATCH_SIZE, SEQ_LEN, device, gen)
        with autocast:
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), y.reshape(-1))
        loss.backward()
        if GRAD_CLIP > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()  # also waits for the GPU, so the timing below is honest
        if not math.isfinite(loss_value):  # diverged: report it and stop at once
            print(f"step {step}: loss is {loss_value}, training diverged")
            print("---\nval_bpb:          nan")
            sys.exit(1)
        if step > 0:
            training_time += time.time() - t0
            timed_tokens += x.numel()
        step += 1
        tokens += x.numel()
        progress = budget.progress(training_time)
        if step % 50 == 0:  # a progress line now and then
            print(f"step {step:5d} | loss {loss_value:.4f} | lr {lr:.2e} | "
                  f"{100 * progress:5.1f}% of budget")

    # Under the engine this is the handover: the grader, not this call, computes the metric.
    val_bpb = prepare.evaluate_bpb(model, device, prepare.EVAL_SEQ_LEN)
    tokens_per_second = timed_tokens / max(training_time, 1e-9)
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:  # Linux reports ru_maxrss in KiB
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    flops = peak_flops(device)
    mfu = 100 * 6 * num_params * tokens_per_second / flops if flops else 0.0
    print("---")
    print(f"val_bpb:          {val_bpb:.6f}")
    print(f"training_seconds: {training_time:.1f}")
    print(f"budget:           {budget.summary()}")
    print(f"total_seconds:    {time.time() - t_start:.1f}")
    print(f"peak_memory_mb:   {peak_mb:.1f}")
    print(f"tokens_processed: {tokens}")
    print(f"tokens_per_second: {tokens_per_second:.0f}")
    print(f"num_steps:        {step}")
    print(f"num_params:       {num_params}")
    print(f"mfu_percent:      {mfu:.1f}")


if __name__ == "__main__":
    main()
