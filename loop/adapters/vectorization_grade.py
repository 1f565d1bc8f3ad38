"""Protected grader for MLAgentBench's vectorization task, copied into the task folder by
`autoresearch task mlagentbench --timed-grader` as timed_grade.py. The benchmark's own
score is the run time train.py writes into submission.csv, which the edited code controls;
this grader measures instead: it times Conv2DLayer.forward of the attempt's train.py itself
(best of `repeats`) on a fixed input, and checks its output against the original's
(reference_train.py, protected) with the same weights. A wrong output is a failure, never a
time. Settings: timing.yaml beside this file."""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None   # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    import numpy as np
    import yaml
    s = yaml.safe_load((HERE / "timing.yaml").read_text()) or {}
    init = list(s.get("init", [3, 8, 3, 2, 2, "relu"]))
    shape = tuple(s.get("input_shape", [32, 64, 64, 3]))
    sys.dont_write_bytecode = True
    reference = load("reference_train", HERE / "reference_train.py")
    edited = load("edited_train", HERE / "train.py")
    x = np.random.default_rng(int(s.get("seed", 0))).standard_normal(shape)
    np.random.seed(int(s.get("seed", 0)))
    original = reference.Conv2DLayer(*init)
    layer = edited.Conv2DLayer(*init)
    layer.kernel_matrices = original.kernel_matrices.copy()      # the same weights for both
    layer.biases = original.biases.copy()
    expected = original.forward(x.copy())
    best = float("inf")
    got = None
    for _ in range(max(1, int(s.get("repeats", 3)))):
        start = time.perf_counter()
        got = layer.forward(x.copy())
        best = min(best, time.perf_counter() - start)
    got = np.asarray(got)
    if got.shape != expected.shape:
        print(f"error: forward returned shape {got.shape}, the original {expected.shape}")
        return 1
    if not np.allclose(got, expected, rtol=float(s.get("rtol", 1e-6)),
                       atol=float(s.get("atol", 1e-8))):
        worst = float(np.max(np.abs(got - expected)))
        print(f"error: forward's output differs from the original's (max abs diff {worst:.3g})")
        return 1
    print(f"output: matches the original ({expected.size} values)")
    print(f"forward_s: {best:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
