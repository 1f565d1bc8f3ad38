"""The training side of protected language-model grading: run the (editable) training script
so that its final model is handed over as a `torch.export` program instead of evaluated.

    python handover.py --eval-function prepare.evaluate_bpb --input-shape 32x2048 train.py

It imports the protected module named in --eval-function and replaces that function with one
that exports the model it is given (torch.compile's wrapper unwrapped, in eval mode, without
gradients) at --input-shape and saves it to $AUTORESEARCH_ARTIFACT_DIR/model.pt2, returning
NaN in place of the metric. Then it runs the script as __main__ (like `python train.py`).
The grader (lm.py) loads that program without importing any edited Python and computes the
metric itself; whatever the script prints is never the number.

A script that never calls the function, or a model that cannot be exported, ends the run
with a non-zero exit and one line starting `handover:`, the crash reason.

Runs in the repo's own interpreter, by path: the standard library and torch only."""
from __future__ import annotations

import argparse
import importlib
import operator
import os
import runpy
import sys

PROGRAM_FILE = "model.pt2"
EXIT_NOT_CALLED, EXIT_EXPORT = 3, 4


def fail(code: int, message: str) -> None:
    """One line that becomes the run's crash reason; no exit hooks of the script run after."""
    sys.stdout.flush()
    print(f"handover: {message}", flush=True)
    sys.stderr.flush()
    os._exit(code)


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 2 or min(shape) < 1:
        raise SystemExit(f"handover: --input-shape must be BATCHxSEQ, got '{text}'")
    return shape


def export_model(model, shape: tuple[int, ...], path: str) -> None:
    """Export `model` as called on (batch, seq) int64 token ids and save the program."""
    import torch
    model = getattr(model, "_orig_mod", model)          # torch.compile's wrapper
    if not isinstance(model, torch.nn.Module):
        fail(EXIT_EXPORT, f"the model handed to the evaluation is a {type(model).__name__}, "
                          f"not a torch.nn.Module")
    tensors = [*model.parameters(), *model.buffers()]
    device = tensors[0].device if tensors else torch.device("cpu")
    example = torch.zeros(shape, dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            program = torch.export.export(with_autocast(model), (example,))
            if any(n.op == "call_function" and not isinstance(n.target, torch._ops.OpOverload)
                   and n.target is not operator.getitem for n in program.graph.nodes):
                # autocast regions and other higher-order ops become plain aten ops here
                program = program.run_decompositions({})
        tmp = path[:-len(".pt2")] + ".partial.pt2"      # torch.export.save wants .pt2
        torch.export.save(program, tmp)
        os.replace(tmp, path)
    except Exception as exc:  # any export failure is this run's crash, with its reason
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        fail(EXIT_EXPORT, f"could not export the model with torch.export at input_shape "
                          f"{list(shape)}: {type(exc).__name__}: {first}")
    finally:
        model.train(was_training)


def with_autocast(model):
    """The model as the script evaluates it: karpathy-style scripts call the evaluation
    inside `with torch.autocast(...)`, which torch.export does not record from outside."""
    import torch
    for device_type in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device_type):
            dtype = torch.get_autocast_dtype(device_type)

            class Autocast(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.inner = model

                def forward(self, idx):
                    # returned within this iteration, so the loop variables do not move
                    with torch.autocast(device_type, dtype=dtype):  # noqa: B023
                        return self.inner(idx)
            return Autocast()
    return model


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="handover.py")
    parser.add_argument("--eval-function", required=True, help="module.function, protected")
    parser.add_argument("--input-shape", required=True, help="BATCHxSEQ the model is exported at")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    shape = parse_shape(opts.input_shape)
    module_name, _, attr = opts.eval_function.rpartition(".")
    out_dir = os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "."
    path = os.path.join(out_dir, PROGRAM_FILE)

    script = os.path.abspath(opts.script)
    # As `python train.py` would have it: the script's folder first, not this file's.
    sys.path[0] = os.path.dirname(script)
    sys.argv = [opts.script, *opts.args]
    module = importlib.import_module(module_name)
    if not callable(getattr(module, attr, None)):
        fail(EXIT_NOT_CALLED, f"{opts.eval_function} is not a function of {module_name}")
    calls = []

    def hand_over(model, *args, **kwargs):
        export_model(model, shape, path)
        calls.append(1)
        print(f"handover: model exported to {PROGRAM_FILE} (the grader computes the metric)",
              flush=True)
        return float("nan")

    setattr(module, attr, hand_over)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    if not calls:
        fail(EXIT_NOT_CALLED, f"{opts.script} never called {opts.eval_function}(model, ...), "
                              f"so no model was handed over for grading")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
