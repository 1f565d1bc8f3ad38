"""tinylm's budget (prepare.Budget): training FLOPs on a CPU, counted by protected code, with
the wall clock as the cap; seconds of training on a GPU or when asked."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TINYLM = Path(__file__).resolve().parent.parent / "experiments" / "tinylm"


@pytest.fixture
def tinylm(tmp_path, monkeypatch):
    """The task's prepare.py and train.py, imported from a copy (a small budget, its cache in
    tmp), with the budget's batch counter empty."""
    folder = tmp_path / "tinylm"
    shutil.copytree(TINYLM, folder, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    monkeypatch.setenv("AUTORESEARCH_TIME_BUDGET", "2")
    monkeypatch.setenv("AUTORESEARCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUTORESEARCH_BUDGET", raising=False)
    monkeypatch.syspath_prepend(str(folder))
    for name in ("prepare", "train"):
        sys.modules.pop(name, None)
    import prepare
    import train
    yield prepare, train, folder
    for name in ("prepare", "train"):
        sys.modules.pop(name, None)


def _model(train, **sizes):
    cfg = train.GPTConfig(**sizes)
    return train.GPT(cfg), cfg


def test_cpu_budget_counts_the_batches_served_and_the_models_flops(tinylm):
    import torch
    prepare, train, _ = tinylm
    small, _ = _model(train)
    big, _ = _model(train, n_layer=8)
    budgets = [prepare.Budget(m, torch.device("cpu")) for m in (small, big)]
    assert [b.kind for b in budgets] == ["work", "work"]
    # the deeper model costs more per sequence, so the same batches use more of its budget
    assert budgets[1].row_flops(128) > 1.8 * budgets[0].row_flops(128)
    per_batch = []
    for budget in budgets:
        prepare._SERVED.clear()
        prepare.get_batch("train", 4, 128, "cpu")
        per_batch.append(budget.progress(0.0))
    assert 0 < per_batch[0] < per_batch[1] < 1
    assert per_batch[0] == pytest.approx(4 * budgets[0].row_flops(128) / budgets[0].total)
    # validation batches are not training work
    prepare.get_batch("val", 4, 128, "cpu")
    assert budgets[1].progress(0.0) == per_batch[1]


def test_counting_draws_nothing_from_the_rng_and_keeps_the_mode(tinylm):
    import torch
    prepare, train, _ = tinylm
    model, _ = _model(train, dropout=0.2)
    model.train()
    torch.manual_seed(0)
    prepare.Budget(model, torch.device("cpu")).row_flops(64)
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(1)) and model.training


def test_the_wall_clock_is_the_cap_whatever_the_code_reports(tinylm):
    """A run that bypasses get_batch (so no work is counted) still ends at the cap."""
    import torch
    prepare, train, _ = tinylm
    budget = prepare.Budget(_model(train)[0], torch.device("cpu"))
    cap = prepare.CPU_CAP * prepare.TIME_BUDGET
    assert budget.progress(cap / 2) == pytest.approx(0.5)
    assert budget.progress(cap) >= 1.0


def test_time_budget_on_request_and_on_a_gpu(tinylm, monkeypatch):
    import torch
    prepare, train, _ = tinylm
    model = _model(train)[0]
    assert prepare.Budget(model, torch.device("cuda")).kind == "time"
    monkeypatch.setenv("AUTORESEARCH_BUDGET", "time")
    budget = prepare.Budget(model, torch.device("cpu"))
    prepare.get_batch("train", 32, 128, "cpu")
    assert budget.kind == "time" and budget.progress(1.0) == pytest.approx(0.5)
    assert "2s of training" in budget.describe()
    monkeypatch.setenv("AUTORESEARCH_BUDGET", "flops")
    with pytest.raises(SystemExit, match="AUTORESEARCH_BUDGET='flops': use time or work"):
        prepare.Budget(model, torch.device("cpu"))


def _train(folder, tmp_path, *, cores=None, hog=False):
    env = {**os.environ, "AUTORESEARCH_TIME_BUDGET": "1", "AUTORESEARCH_SEED": "3",
           "AUTORESEARCH_CACHE": str(tmp_path / "cache")}
    env.pop("AUTORESEARCH_BUDGET", None)
    cmd = [sys.executable, "train.py"]
    if cores is not None:
        cmd = ["taskset", "-c", cores, *cmd]
    busy = None
    if hog:   # another process on the same core: the run gets about half of it
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    try:
        out = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                             timeout=300)
    finally:
        if busy:
            busy.kill()
            busy.wait()
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = dict(line.split(":", 1) for line in out.stdout.splitlines()[-12:] if ":" in line)
    return {k.strip(): v.strip() for k, v in lines.items()}


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(os, "sched_setaffinity"),
                    reason="needs taskset and sched_setaffinity (Linux)")
def test_a_loaded_machine_trains_the_same_steps_to_the_same_loss(tinylm, tmp_path):
    """The cause of the default task's spread on a CPU: under a time box a busy core meant
    fewer steps and a worse val_bpb for the same code. Under the work budget a run that
    shares its core with a busy process takes longer and trains the same steps."""
    _, _, folder = tinylm
    for name, old, new in (("prepare.py", "CPU_CAP = 3.0", "CPU_CAP = 100.0"),  # no cap here
                           ("train.py", "BATCH_SIZE = 32", "BATCH_SIZE = 8")):
        text = (folder / name).read_text()
        assert old in text
        (folder / name).write_text(text.replace(old, new))
    quiet = _train(folder, tmp_path, cores="0")
    loaded = _train(folder, tmp_path, cores="0", hog=True)
    assert quiet["budget"].startswith("work") and loaded["budget"].startswith("work")
    assert float(loaded["training_seconds"]) > float(quiet["training_seconds"])
    assert quiet["num_steps"] == loaded["num_steps"]
    assert quiet["tokens_processed"] == loaded["tokens_processed"]
    assert quiet["val_bpb"] == loaded["val_bpb"]   # the same run, bit for bit
