"""The training side of protected grading for the evaluator shape: run the (editable)
training script so that its model hands over its predictions for the validation rows
instead of being evaluated in the run's own process.

    python hand_predictions.py --eval-function prepare.evaluate \\
        --features prepare.validation_features train.py

It imports the protected module named in --eval-function and replaces that function with one
that calls --features (a protected function of no arguments returning the validation rows'
features, never their labels), asks the model it is given for `predict`, `predict_proba`
and `decision_function` on them (each the model has), and saves the answers as plain arrays
(numbers or strings, never pickled objects) to $AUTORESEARCH_ARTIFACT_DIR/predictions.npz,
returning NaN in place of the metric. Then it runs the script as __main__ (like `python
train.py`). The grader (predictions.py) calls the real evaluation with a model that answers
from that file; whatever the script prints is never the number.

A script that never calls the function, or a model that gives no usable prediction, ends
the run with a non-zero exit and one line starting `handover:`, the crash reason.

Runs in the repo's own interpreter, by path: the standard library and numpy only."""
from __future__ import annotations

import argparse
import importlib
import os
import runpy
import sys

PREDICTIONS_FILE = "predictions.npz"
METHODS = ("predict", "predict_proba", "decision_function")
EXIT_NOT_CALLED, EXIT_PREDICT = 3, 4


def fail(code: int, message: str) -> None:
    """One line that becomes the run's crash reason; no exit hooks of the script run after."""
    sys.stdout.flush()
    print(f"handover: {message}", flush=True)
    sys.stderr.flush()
    os._exit(code)


def predictions(model, rows) -> dict:
    """{method: array} for each prediction method `model` has, on `rows`."""
    import numpy as np
    out = {}
    for name in METHODS:
        method = getattr(model, name, None)
        if not callable(method):
            continue
        try:
            answer = np.asarray(method(rows))
        except Exception as exc:  # a model that cannot predict is this run's crash
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            fail(EXIT_PREDICT, f"the model's {name} failed on the validation rows: "
                               f"{type(exc).__name__}: {first}")
        if answer.dtype.kind not in "biufU" or answer.ndim == 0:
            fail(EXIT_PREDICT, f"the model's {name} gave {answer.dtype} {answer.shape}, not "
                               f"an array of numbers or labels")
        if answer.shape[0] != len(rows):
            fail(EXIT_PREDICT, f"the model's {name} gave {answer.shape[0]} answers for "
                               f"{len(rows)} validation rows")
        out[name] = answer
    if not out:
        fail(EXIT_PREDICT, f"the model handed to the evaluation ({type(model).__name__}) has "
                           f"none of {', '.join(METHODS)}")
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="hand_predictions.py")
    parser.add_argument("--eval-function", required=True, help="module.function, protected")
    parser.add_argument("--features", required=True, help="module.function, protected")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    module_name, _, attr = opts.eval_function.rpartition(".")
    features_module, _, features_attr = opts.features.rpartition(".")
    out_dir = os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or "."
    path = os.path.join(out_dir, PREDICTIONS_FILE)

    script = os.path.abspath(opts.script)
    # As `python train.py` would have it: the script's folder first, not this file's.
    sys.path[0] = os.path.dirname(script)
    sys.argv = [opts.script, *opts.args]
    module = importlib.import_module(module_name)
    if not callable(getattr(module, attr, None)):
        fail(EXIT_NOT_CALLED, f"{opts.eval_function} is not a function of {module_name}")
    features = getattr(importlib.import_module(features_module), features_attr, None)
    if features is None or not callable(features):
        fail(EXIT_NOT_CALLED, f"{opts.features} is not a function of {features_module}")
        return
    calls = []

    def hand_over(model, *args, **kwargs):
        import numpy as np
        answers = predictions(model, features())
        tmp = path + ".partial.npz"
        np.savez(tmp, **answers)
        os.replace(tmp, path)
        calls.append(1)
        print(f"handover: {', '.join(answers)} of the validation rows saved to "
              f"{PREDICTIONS_FILE} (the grader computes the metric)", flush=True)
        return float("nan")

    setattr(module, attr, hand_over)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    if not calls:
        fail(EXIT_NOT_CALLED, f"{opts.script} never called {opts.eval_function}(model, ...), "
                              f"so no predictions were handed over for grading")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
