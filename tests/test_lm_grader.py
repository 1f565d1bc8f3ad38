"""loop/graders: the handover exports a model, the lm grader scores it with protected code
and refuses what could run code or cheat. Tiny models, real subprocesses for the grader."""
from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from loop.setup.graders import HANDOVER, LM
from loop.run.graders import handover, lm

VOCAB, SHAPE = 11, (4, 8)

# A protected module in karpathy's style: the model computes the loss it is asked for.
PREPARE = """\
import torch

def batches():
    g = torch.Generator().manual_seed(7)
    data = torch.randint(0, 11, (6, 9), generator=g)
    return data[:, :-1], data[:, 1:]

@torch.no_grad()
def evaluate_loss(model, batch_size):
    x, y = batches()
    loss = model(x, y, reduction='none').view(-1)
    return loss.sum().item() / y.numel()
"""
CALL = "evaluate_loss(model, 4)"


class Causal(nn.Module):
    """Embedding + a causal running mean: position t sees tokens <= t only."""

    def __init__(self, forged_loss: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)
        self.forged_loss = forged_loss

    def mix(self, h):
        steps = torch.arange(1, h.size(1) + 1, device=h.device).view(1, -1, 1)
        return h.cumsum(1) / steps

    def forward(self, idx, targets=None, reduction="mean"):
        logits = self.head(self.mix(self.emb(idx)))
        if targets is None:
            return logits
        if self.forged_loss:            # a cheat: the model reports the loss it likes
            return torch.zeros(targets.numel())
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1),
                               reduction=reduction)


class Peeking(Causal):
    """Not causal: each position also sees the mean of the whole sequence."""

    def mix(self, h):
        return h + h.mean(1, keepdim=True)


class BatchMixing(Causal):
    """Causal within a row, but reads the other rows of the batch (their futures)."""

    def mix(self, h):
        return super().mix(h) + h.mean(0, keepdim=True)


def honest_loss(model: nn.Module) -> float:
    ns: dict = {}
    exec(PREPARE, ns)
    x, y = ns["batches"]()
    with torch.no_grad():
        logits = Causal.forward(model, x)
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)).item()


def export(model: nn.Module, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.pt2"
    handover.export_model(model, SHAPE, str(path))
    return path


def grade(task: Path, artifacts: Path, extra_prepare: str = "") -> subprocess.CompletedProcess:
    (task / "prepare.py").write_text(PREPARE + extra_prepare)
    env = {**os.environ, "AUTORESEARCH_ARTIFACT_DIR": str(artifacts)}
    return subprocess.run([sys.executable, str(LM), "--eval-function", "prepare.evaluate_loss",
                           "--eval-call", CALL, "--input-shape", "4x8", "--metric", "loss",
                           "--protected", "prepare.py"],
                          cwd=task, env=env, capture_output=True, text=True, timeout=120)


def metric(out: subprocess.CompletedProcess) -> float:
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    block = out.stdout.split("\n---\n")[-1]
    return float(block.split("loss:")[1].split()[0])


@pytest.fixture
def task(tmp_path) -> Path:
    folder = tmp_path / "task"
    folder.mkdir()
    return folder


def test_export_load_round_trip_scores_the_model(task, tmp_path):
    model = Causal()
    export(model, tmp_path / "art")
    out = grade(task, tmp_path / "art")
    assert "causality_check: passed" in out.stdout
    assert metric(out) == pytest.approx(honest_loss(model), rel=1e-5)


def test_the_loss_is_the_graders_not_the_models(task, tmp_path):
    forged = Causal(forged_loss=True)
    export(forged, tmp_path / "art")
    got = metric(grade(task, tmp_path / "art"))
    assert got == pytest.approx(honest_loss(forged), rel=1e-5)
    assert got > 1.0                    # the forged model claims 0


def test_a_non_causal_model_is_refused(task, tmp_path):
    export(Peeking(), tmp_path / "art")
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_NOT_CAUSAL
    assert "error: causality check failed: logits up to position" in out.stdout
    assert "\n---\n" not in out.stdout


def test_a_model_reading_other_rows_is_refused(task, tmp_path):
    export(BatchMixing(), tmp_path / "art")
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_NOT_CAUSAL, out.stdout
    assert "other rows of the batch" in out.stdout


def test_split_and_pad_to_the_input_shape(tmp_path):
    model = Causal()
    program = lm.Program(torch.export.load(export(model, tmp_path / "art")), SHAPE)
    graded = lm.graded_model(program)
    idx = torch.randint(0, VOCAB, (6, 5))            # more rows, shorter rows than exported
    with torch.no_grad():
        want = Causal.forward(model, idx)
        got = graded(idx)
        loss = graded(idx, idx, reduction="none")
    assert got.shape == (6, 5, VOCAB)
    assert torch.allclose(got, want, atol=1e-5)
    assert loss.shape == (30,)
    with pytest.raises(ValueError, match="sequences of 9 tokens"):
        graded(torch.zeros(1, 9, dtype=torch.long))


def _rewrite(path: Path, change) -> None:
    """Rewrite the archive with `change(name, bytes) -> bytes` applied to each member."""
    with zipfile.ZipFile(path) as zin:
        members = [(info, zin.read(info.filename)) for info in zin.infolist()]
    with zipfile.ZipFile(path, "w") as zout:
        for info, data in members:
            zout.writestr(info, change(info.filename, data))


class Boom:
    """A pickle that, if ever unpickled, creates a marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_in_the_archive_does_not_execute(task, tmp_path):
    path = export(Causal(), tmp_path / "art")
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Boom(str(marker)))
    # sample_inputs is read with torch.load(weights_only=True), then =False on failure
    _rewrite(path, lambda name, data: payload if name.endswith("sample_inputs/model.pt")
             else data)
    out = grade(task, tmp_path / "art")
    assert out.returncode != 0
    assert out.stdout.strip().splitlines()[-1].startswith("error: could not load model.pt2")
    assert not marker.exists()


def test_weights_only_is_forced_inside_the_loader(tmp_path):
    marker = tmp_path / "pwned"
    blob = io.BytesIO()
    torch.save(Boom(str(marker)), blob)
    with lm.no_code_on_load():
        with pytest.raises(pickle.UnpicklingError):
            torch.load(io.BytesIO(blob.getvalue()), weights_only=False)
        with pytest.raises(RuntimeError, match="refused"):
            pickle.loads(pickle.dumps(Boom(str(marker))))
    assert not marker.exists()
    assert torch.load is not None and pickle.loads(pickle.dumps(3)) == 3   # restored


def test_a_pickled_weight_is_refused_before_loading(task, tmp_path):
    path = export(Causal(), tmp_path / "art")

    def change(name, data):
        if name.endswith("model_weights_config.json"):
            config = json.loads(data)
            next(iter(config["config"].values()))["use_pickle"] = True
            return json.dumps(config).encode()
        return data
    _rewrite(path, change)
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_REFUSED
    assert "non-tensor object" in out.stdout


def test_the_op_allow_list_refuses_from_file(task, tmp_path):
    assert lm.op_refusal("torch.ops.aten.from_file.default")
    assert lm.op_refusal("torch.ops.aten._print.default")
    assert lm.op_refusal("torch.load")
    assert lm.op_refusal("builtins.eval")
    assert lm.op_refusal("torch.ops.aten.linear.default") is None
    path = export(Causal(), tmp_path / "art")

    def change(name, data):
        if name.endswith("models/model.json"):
            return data.replace(b'"torch.ops.aten.embedding.default"',
                                b'"torch.ops.aten.from_file.default"')
        return data
    _rewrite(path, change)
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_REFUSED
    assert "aten.from_file" in out.stdout and "\n---\n" not in out.stdout


def test_guard_code_and_symbolic_shapes_are_refused(task, tmp_path):
    path = export(Causal(), tmp_path / "art")
    marker = tmp_path / "pwned"

    def change(name, data):
        if name.endswith("models/model.json"):
            program = json.loads(data)
            program["guards_code"] = [f"open({str(marker)!r}, 'w')"]
            return json.dumps(program).encode()
        return data
    _rewrite(path, change)
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_REFUSED and "guard code" in out.stdout
    assert not marker.exists()


def test_the_grader_never_imports_an_editable_file(task, tmp_path):
    export(Causal(), tmp_path / "art")
    marker = tmp_path / "ran"
    (task / "train.py").write_text(f"open({str(marker)!r}, 'w')\n")
    out = grade(task, tmp_path / "art", extra_prepare="import train\n")
    assert out.returncode != 0
    assert "may not import train.py" in out.stdout
    assert not marker.exists()


def test_grader_check_in_the_protected_module_can_refuse(task, tmp_path):
    export(Causal(), tmp_path / "art")
    check = "\ndef grader_check(model, value):\n    return f'too good: {value:.2f}'\n"
    out = grade(task, tmp_path / "art", extra_prepare=check)
    assert out.returncode == lm.EXIT_CHECK
    assert "error: grader_check: too good" in out.stdout


def test_missing_program_is_one_clear_line(task, tmp_path):
    (tmp_path / "art").mkdir()
    out = grade(task, tmp_path / "art")
    assert out.returncode == lm.EXIT_ERROR
    assert out.stdout.strip() == ("error: no model.pt2 in the artifact folder: the training "
                                  "script must call prepare.evaluate_loss(model, ...) through "
                                  "the handover")


def _handover(folder: Path, train: str, tmp_path: Path) -> subprocess.CompletedProcess:
    (folder / "prepare.py").write_text(PREPARE)
    (folder / "train.py").write_text(train)
    art = tmp_path / "art"
    art.mkdir(exist_ok=True)
    env = {**os.environ, "AUTORESEARCH_ARTIFACT_DIR": str(art)}
    return subprocess.run([sys.executable, str(HANDOVER), "--eval-function",
                           "prepare.evaluate_loss", "--input-shape", "4x8", "train.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


TRAIN = """\
import sys
import torch
sys.path.insert(0, {tests!r})
from test_lm_grader import Causal
from prepare import evaluate_loss
model = Causal()
value = evaluate_loss(model, 4)
print("---")
print(f"loss: {{value}}")
"""


def test_handover_runs_the_script_and_exports(task, tmp_path):
    out = _handover(task, TRAIN.format(tests=str(Path(__file__).parent)), tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "loss: nan" in out.stdout                  # the script's own number is not one
    assert (tmp_path / "art" / "model.pt2").is_file()
    assert metric(grade(task, tmp_path / "art")) == pytest.approx(honest_loss(Causal()), rel=1e-5)


def test_handover_without_the_call_is_a_crash_with_its_reason(task, tmp_path):
    out = _handover(task, "print('trained, never evaluated')\n", tmp_path)
    assert out.returncode == handover.EXIT_NOT_CALLED
    assert out.stdout.strip().splitlines()[-1] == (
        "handover: train.py never called prepare.evaluate_loss(model, ...), so no model was "
        "handed over for grading")


def test_handover_of_an_unexportable_model_is_a_crash(task, tmp_path):
    train = TRAIN.format(tests=str(Path(__file__).parent)).replace(
        "model = Causal()", "class Odd(Causal):\n    def forward(self, idx, *a, **k):\n"
        "        if idx.sum() > 0:\n            idx = idx - 1\n"
        "        return super().forward(idx)\nmodel = Odd()")
    out = _handover(task, train, tmp_path)
    assert out.returncode == handover.EXIT_EXPORT
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("handover: could not export the model with torch.export at "
                           "input_shape [4, 8]: ")


class HalfEmbedding(Causal):
    """karpathy's shape: a bf16 embedding that only works under the caller's autocast."""

    def __init__(self):
        super().__init__()
        self.emb.to(torch.bfloat16)

    def forward(self, idx, targets=None, reduction="mean"):
        return self.head(self.mix(self.emb(idx))).float()


def test_the_callers_autocast_is_part_of_the_exported_program(task, tmp_path):
    model = HalfEmbedding()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        export(model, tmp_path / "art")
        ns: dict = {}
        exec(PREPARE, ns)
        x, y = ns["batches"]()
        with torch.no_grad():
            want = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).item()
    assert metric(grade(task, tmp_path / "art")) == pytest.approx(want, rel=1e-4)
