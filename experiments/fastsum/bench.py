"""Protected benchmark and grader for the fastsum task: run by the engine after the smoke
test, from a pristine copy of this folder (so kernel.py is the attempt's, bench.py ours).

Correctness first: every timed call gets a fresh random input, and its output must match
torch.cumsum (computed before the edited code is imported) to 1e-9 relative. Then speed:
time_ms is the median wall time of the timed calls. The clock and the reference are taken
before `import kernel`, so an edit cannot swap them. (The edited code runs in this process:
this stops accidents and shortcuts, not a determined attacker; see docs/tasks.md.)

Exit codes: 0 graded, 1 wrong output, 2 kernel.py failed to import or raised.
"""
import os
import statistics
import sys
import time
from pathlib import Path

clock = time.perf_counter          # taken before the edited code runs
import torch  # noqa: E402

ROWS, COLS = 64, 4096
WARMUP, TIMED = 3, 21
RTOL = 1e-9


def main():
    torch.set_num_threads(1)
    seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
    gen = torch.Generator().manual_seed(10_000 + seed)
    inputs = [torch.randn(ROWS, COLS, dtype=torch.float64, generator=gen)
              for _ in range(WARMUP + TIMED)]
    expected = [torch.cumsum(x, dim=1) for x in inputs]
    scale = [e.abs().max().item() + 1.0 for e in expected]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import kernel
    except Exception as exc:
        print(f"error: kernel.py failed to import: {type(exc).__name__}: {exc}")
        sys.exit(2)
    times = []
    for i, x in enumerate(inputs):
        original = x.clone()
        t0 = clock()
        try:
            out = kernel.prefix_sum(x)
        except Exception as exc:
            print(f"error: prefix_sum raised {type(exc).__name__}: {exc}")
            sys.exit(2)
        elapsed = clock() - t0
        if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
            print(f"wrong output: expected a {tuple(x.shape)} {x.dtype} tensor, got "
                  f"{getattr(out, 'shape', type(out))}")
            sys.exit(1)
        err = (out - expected[i]).abs().max().item()
        if not err <= RTOL * scale[i] or not torch.equal(x, original):
            print(f"wrong output on input {i}: max abs error {err:.3g} "
                  f"(allowed {RTOL * scale[i]:.3g}), input modified: {not torch.equal(x, original)}")
            sys.exit(1)
        if i >= WARMUP:
            times.append(elapsed)
    print(f"correct:  {len(inputs)} of {len(inputs)} inputs")
    print(f"time_ms:  {1000 * statistics.median(times):.4f}")


if __name__ == "__main__":
    main()
