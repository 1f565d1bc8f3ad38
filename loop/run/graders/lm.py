"""The grading side of protected language-model grading: score the program the training run
handed over ($AUTORESEARCH_ARTIFACT_DIR/model.pt2, see handover.py) with the task's own
protected evaluation, without running any edited Python.

    python lm.py --eval-function prepare.evaluate_bpb \\
        --eval-call "evaluate_bpb(model, Tokenizer.from_directory(), 32)" \\
        --input-shape 32x2048 --metric val_bpb --protected prepare.py

Runs in a pristine copy of the task folder, where the held-out split is readable. Steps:
1. Read the archive as untrusted data: before torch deserialises anything, its graph must
   use only aten/prims operators outside DENIED (no aten.from_file, no printing), static
   shapes (no symbolic expressions, which torch parses with sympy's eval) and no guard code
   (which ExportedProgram.module() would exec), no custom or pickled objects.
2. Load it with torch.export.load while every torch.load is forced to weights_only=True and
   the plain-pickle paths are refused; check the loaded graph's operators again.
3. Check causality on the program: logits up to position t must not change when tokens after
   t change, nor when other rows of the batch change.
4. Import only the protected module (imports of other files of the task folder are refused:
   they may be edited) and evaluate --eval-call with `model` = a trusted wrapper whose
   forward(idx, targets=None, reduction='mean') runs the program (rows split and sequences
   padded to --input-shape) and computes the cross-entropy itself.
5. If the protected module defines `grader_check(model, value)`, call it: a string it returns
   refuses the run (e.g. tinylm's fresh-text leak check).
Prints a `---` block with `<metric>: value`. Failures: one `error: ...` line, non-zero exit.

The standard library and torch only: it runs in the repo's interpreter, by path.
Run by path with the task's interpreter, where the held-out
split is readable, it is one file on purpose: a sibling module would be found through
sys.path (the script's folder, not the loop package) past the import guard of step 4, and
all that runs there is reviewed in one place."""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import importlib
import importlib.machinery
import json
import math
import os
import re
import sys
import time
import zipfile

PROGRAM_FILE = "model.pt2"
ALLOWED_NAMESPACES = ("torch.ops.aten.", "torch.ops.prims.")
ALLOWED_TARGETS = {"_operator.getitem"}
# Operators that reach outside the tensors: files, printing (a grade log the next proposal
# reads would carry the held-out text), process-wide state.
DENIED = {"from_file", "_print", "save", "load", "_local_scalar_dense_print",
          "record_stream", "_set_default_device", "set_default_dtype"}
CAUSAL_CUTS = 6          # positions t probed by the causality check
EXIT_ERROR, EXIT_REFUSED, EXIT_NOT_CAUSAL, EXIT_CHECK = 1, 2, 3, 4


def fail(code: int, message: str) -> None:
    print(f"error: {message}", flush=True)
    sys.stderr.flush()
    os._exit(code)          # no exit hooks: nothing registered during grading prints after


# -- 1. the archive as data ------------------------------------------------------------------
def _walk(value, found: dict) -> None:
    """Collect node targets, symbolic expressions and guard code anywhere in the JSON."""
    if isinstance(value, dict):
        if isinstance(value.get("target"), str) and "inputs" in value:
            found["targets"].add(value["target"])
        if "expr_str" in value:
            found["symbolic"] = True
        for item in value.values():
            _walk(item, found)
    elif isinstance(value, list):
        for item in value:
            _walk(item, found)


def op_refusal(target: str) -> str | None:
    """Why an operator may not run in the grader, or None."""
    if target in ALLOWED_TARGETS:
        return None
    if not target.startswith(ALLOWED_NAMESPACES):
        return f"operator {target} is outside aten/prims"
    name = target.split(".")[3] if target.count(".") >= 3 else ""
    if name in DENIED or "file" in name or "print" in name:
        return f"operator {target} is not allowed in a graded model"
    return None


def scan_archive(path: str) -> None:
    """Refuse an archive whose deserialisation or execution could run code or reach files."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        fail(EXIT_ERROR, f"{PROGRAM_FILE} is not a torch.export archive ({exc})")
    names = archive.namelist()
    models = [n for n in names if re.search(r"(^|/)models/[^/]+\.json$", n)]
    if len(models) != 1:
        fail(EXIT_REFUSED, f"{PROGRAM_FILE} must hold exactly one exported program, "
                           f"found {len(models)}")
    try:
        program = json.loads(archive.read(models[0]))
        configs = [json.loads(archive.read(n)) for n in names
                   if re.search(r"(^|/)data/(weights|constants)/[^/]+_config\.json$", n)]
    except (ValueError, KeyError, zipfile.BadZipFile) as exc:
        fail(EXIT_ERROR, f"{PROGRAM_FILE}: unreadable program ({exc})")
    if program.get("guards_code"):
        fail(EXIT_REFUSED, "the program carries guard code; export it at a fixed input_shape")
    found: dict = {"targets": set(), "symbolic": False}
    _walk(program.get("graph_module"), found)
    if found["symbolic"] or program.get("range_constraints"):
        fail(EXIT_REFUSED, "the program has symbolic shapes; export it at a fixed input_shape")
    for target in sorted(found["targets"]):
        why = op_refusal(target)
        if why:
            fail(EXIT_REFUSED, f"refused: {why}")
    for config in configs:
        for entry in (config.get("config") or {}).values():
            kind = str(entry.get("path_name", ""))
            if not kind.startswith(("weight_", "tensor_", "constant_")) or entry.get("use_pickle"):
                fail(EXIT_REFUSED, f"refused: the program holds a non-tensor object ({kind})")


# -- 2. loading ------------------------------------------------------------------------------
@contextlib.contextmanager
def no_code_on_load():
    """torch.export.load with every pickle path closed: torch.load is forced to
    weights_only=True (export's loader asks for weights_only=False), plain pickle and
    torchbind objects are refused, and sympy may not parse (parse means eval)."""
    import pickle
    import torch
    real_load = torch.load
    patched = []

    def forced(*args, **kwargs):
        kwargs["weights_only"] = True
        return real_load(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise RuntimeError("refused: the program asked to unpickle an object")

    def patch(owner, name, value):
        if hasattr(owner, name):
            patched.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)

    patch(torch, "load", forced)
    patch(pickle, "loads", refuse)
    patch(pickle, "load", refuse)
    patch(torch._C, "_pickle_load_obj", refuse)
    try:
        import sympy
        patch(sympy, "sympify", refuse)
    except ImportError:
        pass
    try:
        yield
    finally:
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)


def load_program(path: str):
    import torch
    scan_archive(path)
    try:
        with no_code_on_load():
            program = torch.export.load(path)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        fail(EXIT_ERROR, f"could not load {PROGRAM_FILE}: {type(exc).__name__}: {first}")
    for module in program.graph_module.modules():
        for node in module.graph.nodes if hasattr(module, "graph") else ():
            if node.op == "call_function":
                target = node.target
                if isinstance(target, torch._ops.OpOverload):
                    name = f"torch.ops.{target.namespace}.{target._schema.name.split('::')[-1]}"
                    name += f".{target._overloadname}"
                else:
                    name = (f"{getattr(target, '__module__', '?')}."
                            f"{getattr(target, '__name__', '?')}")
                why = op_refusal(name)
                if why:
                    fail(EXIT_REFUSED, f"refused: {why}")
            elif node.op not in ("placeholder", "output", "get_attr"):
                fail(EXIT_REFUSED, f"refused: graph node kind {node.op}")
    return program


class Program:
    """The exported graph as a plain callable: (batch, seq) int64 ids -> logits. It runs the
    graph module directly (ExportedProgram.module() would exec the archive's guard code)."""

    def __init__(self, program, shape: tuple[int, ...]):   # (batch, seq)
        from torch.export.graph_signature import InputKind, OutputKind
        self.shape = shape
        self.args: list = []
        self.user_index = -1
        tables = {**program.state_dict, **program.constants}
        for spec in program.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                if self.user_index >= 0:
                    fail(EXIT_REFUSED, "the program takes more than one input; export "
                                       "model(idx) only")
                self.user_index = len(self.args)
                self.args.append(None)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                self.args.append(tables[spec.target])
            else:
                fail(EXIT_REFUSED, f"refused: program input of kind {spec.kind.name}")
        outputs = program.graph_signature.output_specs
        users = [i for i, spec in enumerate(outputs) if spec.kind == OutputKind.USER_OUTPUT]
        if len(users) != 1 or self.user_index < 0:
            fail(EXIT_REFUSED, "the program must take token ids and return logits only")
        self.output = users[0]
        self.many = len(outputs) > 1
        self.module = program.graph_module
        params = [a for a in self.args if a is not None]
        self.device = params[0].device if params else None
        out = [n for n in program.graph.nodes if n.op == "output"][0].args[0]
        meta = out[self.output].meta.get("val") if isinstance(out, (list, tuple)) else None
        self.vocab = int(meta.shape[-1]) if meta is not None and meta.dim() == 3 else 0
        if not self.vocab or meta is None or tuple(meta.shape[:2]) != tuple(shape):
            fail(EXIT_REFUSED, f"the program must map {list(shape)} token ids to "
                               f"[{shape[0]}, {shape[1]}, vocab] logits")

    def __call__(self, idx):
        args = list(self.args)
        args[self.user_index] = idx if self.device is None else idx.to(self.device)
        out = self.module(*args)
        return out[self.output] if self.many or isinstance(out, (list, tuple)) else out


# -- 3. causality ----------------------------------------------------------------------------
def check_causal(program: Program) -> None:
    """Logits at positions <= t may not change when tokens after t change (each row probes
    its own t), and row 0, left whole, may not change when the other rows do."""
    import torch
    rows, seq = program.shape
    gen = torch.Generator().manual_seed(1234)
    x = torch.randint(0, program.vocab, (rows, seq), generator=gen)
    cuts = sorted({0, 1, seq // 4, seq // 2, 3 * seq // 4, seq - 2} - {-1}) if seq > 1 else []
    cuts = [t for t in cuts if 0 <= t < seq - 1][:CAUSAL_CUTS]
    with torch.no_grad():
        base = program(x).float()
        if not torch.isfinite(base).all():
            print("causality_check: skipped (non-finite logits)")
            return
        scale = 1e-3 * max(1.0, base.abs().max().item())
        pending = list(cuts)
        while pending:
            y, probes = x.clone(), []
            first = 1 if rows > 1 else 0          # row 0 stays whole: the cross-row probe
            for r in range(first, rows):
                if not pending:
                    break
                t = pending.pop(0)
                y[r, t + 1:] = torch.randint(0, program.vocab, (seq - t - 1,), generator=gen)
                probes.append((r, t))
            out = program(y).float()
            if first:
                diff = (out[0] - base[0]).abs().max().item()
                if not diff <= scale:
                    fail(EXIT_NOT_CAUSAL, f"causality check failed: a row's logits changed "
                                          f"by {diff:.3g} when other rows of the batch changed")
            for r, t in probes:
                diff = (out[r, :t + 1] - base[r, :t + 1]).abs().max().item()
                if not diff <= scale:
                    fail(EXIT_NOT_CAUSAL, f"causality check failed: logits up to position "
                                          f"{t} changed by {diff:.3g} when later tokens changed")
    print("causality_check: passed", flush=True)


# -- 4. the trusted model ---------------------------------------------------------------------
def graded_model(program: Program):
    """What the protected evaluation is handed as `model`: logits from the program, and the
    loss computed here, never by the edited model."""
    import torch
    import torch.nn.functional as F

    class GradedModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            anchor = torch.zeros(0, device=program.device) if program.device else torch.zeros(0)
            self.register_buffer("_anchor", anchor)     # .device/.to() probes find a tensor

        def logits(self, idx):
            if idx.dim() == 1:
                idx = idx.unsqueeze(0)
            rows, seq = program.shape
            b, t = idx.shape
            if t > seq:
                raise ValueError(f"the evaluation asks for sequences of {t} tokens; the "
                                 f"model was exported at input_shape {list(program.shape)}")
            idx = idx.long()
            if t < seq:      # right padding changes no earlier logit: causality was checked
                idx = F.pad(idx, (0, seq - t))
            parts = []
            for start in range(0, b, rows):
                chunk = idx[start:start + rows]
                n = chunk.shape[0]
                if n < rows:
                    chunk = torch.cat([chunk, chunk.new_zeros(rows - n, seq)])
                parts.append(program(chunk)[:n, :t])
            return torch.cat(parts).to(idx.device)

        def forward(self, idx, targets=None, reduction="mean"):
            logits = self.logits(idx)
            if targets is None:
                return logits
            return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                   targets.reshape(-1).to(logits.device), ignore_index=-1,
                                   reduction=reduction)

    return GradedModel().eval()


# -- 5. imports ------------------------------------------------------------------------------
class ProtectedOnly:
    """A meta-path finder: a module found in the task folder must be a protected file; the
    editable ones (train.py) are never imported here, where the held-out split is readable."""

    def __init__(self, folder: str, protected: list[str]):
        self.folder, self.protected = os.path.realpath(folder), protected

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None)
        if not origin or not os.path.isabs(origin):
            return None
        real = os.path.realpath(origin)
        if real.startswith(self.folder + os.sep):
            rel = os.path.relpath(real, self.folder).replace(os.sep, "/")
            if not any(fnmatch.fnmatchcase(rel, g) or rel == g.rstrip("/")
                       for g in self.protected):
                raise ImportError(f"the grader may not import {rel}: only protected files of "
                                  f"the task folder are imported while grading")
        return None          # let the normal finders load it


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="lm.py")
    parser.add_argument("--eval-function", required=True)
    parser.add_argument("--eval-call", required=True)
    parser.add_argument("--input-shape", required=True)
    parser.add_argument("--metric", required=True)
    parser.add_argument("--protected", nargs="*", default=[])
    opts = parser.parse_args(argv)
    started = time.monotonic()
    try:
        shape = tuple(int(p) for p in opts.input_shape.replace(",", "x").split("x"))
        assert len(shape) == 2 and min(shape) >= 1
    except (ValueError, AssertionError):
        fail(EXIT_ERROR, f"--input-shape must be BATCHxSEQ, got '{opts.input_shape}'")
    folder = os.getcwd()
    # the task's protected modules, not this folder; where the engine's start-up
    # (graders/startup/sitecustomize.py) put the folder after the standard library, there
    del sys.path[0]
    if folder not in sys.path:
        sys.path.insert(0, folder)
    after = [i + 1 for i, f in enumerate(sys.meta_path) if type(f).__name__ == "EnvironmentFirst"]
    sys.meta_path.insert(after[0] if after else 0, ProtectedOnly(folder, opts.protected))

    import torch
    torch.set_num_threads(_threads())
    path = os.path.join(os.environ.get("AUTORESEARCH_ARTIFACT_DIR") or ".", PROGRAM_FILE)
    if not os.path.isfile(path) or os.path.islink(path):
        fail(EXIT_ERROR, f"no {PROGRAM_FILE} in the artifact folder: the training script "
                         f"must call {opts.eval_function}(model, ...) through the handover")
    program = Program(load_program(path), shape)
    check_causal(program)
    model = graded_model(program)

    module_name, _, attr = opts.eval_function.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        fail(EXIT_ERROR, f"could not import the protected module {module_name}: "
                         f"{type(exc).__name__}: {exc}")
    names = {k: v for k, v in vars(module).items() if not k.startswith("__")}
    try:
        with torch.no_grad():
            value = float(eval(opts.eval_call, {"__builtins__": __builtins__},
                               {**names, "model": model}))
        check = getattr(module, "grader_check", None)
        refusal = check(model, value) if callable(check) and math.isfinite(value) else None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        fail(EXIT_ERROR, f"the evaluation `{opts.eval_call}` failed: {type(exc).__name__}: "
                         f"{first}")
    if refusal:
        fail(EXIT_CHECK, f"grader_check: {refusal}")
    print("---")
    print(f"{opts.metric}: {value:.6f}")
    print(f"grade_seconds: {time.monotonic() - started:.1f}", flush=True)


def _threads() -> int:
    """Intra-op threads for grading. OMP_NUM_THREADS when set (the engine's slots set it);
    else the CPUs this process may use that are not busy now, at most 8. torch's default
    (every core) on a shared machine oversubscribes it, and OpenMP threads that wait on each
    other at every op's barrier make that far slower than fewer threads (docs/tasks.md)."""
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        idle = cpus - os.getloadavg()[0]
    except OSError:
        idle = cpus
    return max(1, min(8, cpus, int(idle + 0.5)))


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(0)
