"""The grading side of protected grading for the evaluator shape: call the task's own
protected evaluation with a model that answers from the predictions the training run handed
over ($AUTORESEARCH_ARTIFACT_DIR/predictions.npz, see hand_predictions.py), so that no
edited Python runs where the held-out labels are readable.

    python predictions.py --eval-function prepare.evaluate --eval-call "evaluate(model)" \\
        --features prepare.validation_features --protected prepare.py

Runs in a pristine copy of the task folder. Steps:
1. Load the arrays with numpy, pickles refused (`allow_pickle=False`).
2. Import only the protected module (imports of other files of the task folder are refused:
   they may be edited) and compute the validation rows with --features, as training did.
3. Evaluate --eval-call with `model` = a trusted object whose `predict`, `predict_proba` and
   `decision_function` (those handed over) return the saved answers, and only for those rows:
   asked about other rows, it refuses (the evaluation would compare misaligned answers).
The evaluation prints the metric itself (the evaluator shape's summary lines); this prints
`grade_seconds`. Failures: one `error: ...` line, non-zero exit.

The standard library and numpy only: it runs in the repo's interpreter, by path."""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import sys
import time


def _lm():
    """lm.py beside this file, by its path (no name on sys.path to shadow): its import
    guard and its one-line failure."""
    spec = importlib.util.spec_from_file_location(
        "_autoresearch_lm_grader", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "lm.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LM = _lm()
ProtectedOnly, fail = _LM.ProtectedOnly, _LM.fail

PREDICTIONS_FILE = "predictions.npz"
EXIT_ERROR = 1


def rows_digest(rows) -> str:
    """What identifies the validation rows: their values, shape and type."""
    import numpy as np
    array = np.ascontiguousarray(np.asarray(rows))
    if array.dtype.kind == "O":
        raise ValueError("the validation rows are Python objects, not an array of values")
    return hashlib.sha256(f"{array.shape}{array.dtype.str}".encode()
                          + array.tobytes()).hexdigest()


def graded_model(answers: dict, digest: str, features: str):
    """The model the evaluation is given: the handed-over answers, for those rows only."""
    class GradedModel:
        pass

    def method(name):
        def answer(rows, *args, **kwargs):
            if rows_digest(rows) != digest:
                raise ValueError(f"{name} was asked about rows other than {features}(): "
                                 f"only the validation rows were handed over")
            return answers[name].copy()
        answer.__name__ = name
        return answer
    model = GradedModel()
    for name in answers:
        setattr(model, name, method(name))
    return model


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="predictions.py")
    parser.add_argument("--eval-function", required=True)
    parser.add_argument("--eval-call", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--protected", nargs="*", default=[])
    opts = parser.parse_args(argv)
    started = time.monotonic()
    folder = os.getcwd()
    # the task's protected modules, not this folder; where the engine's start-up
    # (graders/startup/sitecustomize.py) put the folder after the standard library, there
    del sys.path[0]
    if folder not in sys.path:
        sys.path.insert(0, folder)
    after = [i + 1 for i, f in enumerate(sys.meta_path) if type(f).__name__ == "EnvironmentFirst"]
    sys.meta_path.insert(after[0] if after else 0, ProtectedOnly(folder, opts.protected))

    import numpy as np
    path = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", PREDICTIONS_FILE)
    if not os.path.isfile(path) or os.path.islink(path):
        fail(EXIT_ERROR, f"no {PREDICTIONS_FILE} in the artifact folder: the training script "
                         f"must call {opts.eval_function}(model, ...) through the handover")
    try:
        with np.load(path, allow_pickle=False) as saved:
            answers = {k: saved[k] for k in saved.files}
    except Exception as exc:
        fail(EXIT_ERROR, f"{PREDICTIONS_FILE} is not plain arrays: {type(exc).__name__}: "
                         f"{str(exc)[:200]}")
    unknown = set(answers) - {"predict", "predict_proba", "decision_function"}
    if unknown or not answers:
        fail(EXIT_ERROR, f"{PREDICTIONS_FILE} holds {sorted(answers)}: expected predict, "
                         f"predict_proba or decision_function")
    if any(a.dtype.kind not in "biufU" for a in answers.values()):
        fail(EXIT_ERROR, f"{PREDICTIONS_FILE} holds arrays that are not numbers or labels")
    module_name, _, attr = opts.eval_function.rpartition(".")
    features_module, _, features_attr = opts.features.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        rows = getattr(importlib.import_module(features_module), features_attr)()
        digest = rows_digest(rows)
    except Exception as exc:
        fail(EXIT_ERROR, f"could not read the validation rows with {opts.features}: "
                         f"{type(exc).__name__}: {exc}")
    if any(len(a) != len(rows) for a in answers.values()):
        fail(EXIT_ERROR, f"{PREDICTIONS_FILE} does not hold one answer per validation row "
                         f"({len(rows)})")
    model = graded_model(answers, digest, opts.features)
    names = {k: v for k, v in vars(module).items() if not k.startswith("__")}
    try:
        eval(opts.eval_call, {"__builtins__": __builtins__}, {**names, "model": model})
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        fail(EXIT_ERROR, f"the evaluation `{opts.eval_call}` failed: {type(exc).__name__}: "
                         f"{first}")
    print(f"grade_seconds: {time.monotonic() - started:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(0)
