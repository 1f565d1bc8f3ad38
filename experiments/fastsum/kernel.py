"""Editable research target: an inclusive prefix sum (running total) along each row.

The loop edits this file and keeps a change only if the protected benchmark (bench.py) says
it got faster *and* it still returns the right numbers: bench.py compares every output with
torch.cumsum on fresh random inputs, and a wrong answer is a crash, never a speed-up.
Contract: `prefix_sum(x)` takes a 2-D float64 tensor and returns a new tensor of the same
shape and dtype whose [i, j] entry is x[i, 0] + ... + x[i, j]; it must not modify x.
"""
import torch

CHUNK = 4          # columns summed per step of the outer loop (the carry moves between steps)


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    carry = torch.zeros(x.shape[0], 1, dtype=x.dtype)
    for start in range(0, x.shape[1], CHUNK):
        block = x[:, start:start + CHUNK]
        out[:, start:start + block.shape[1]] = torch.cumsum(block, dim=1) + carry
        carry = out[:, start + block.shape[1] - 1:start + block.shape[1]]
    return out


if __name__ == "__main__":   # the run step: a quick smoke test (the benchmark is bench.py)
    x = torch.arange(12, dtype=torch.float64).view(2, 6)
    assert torch.equal(prefix_sum(x), torch.cumsum(x, dim=1)), prefix_sum(x)
    print("prefix_sum: smoke test passed")
