"""The sandbox and Slurm tests cannot pass by skipping: without bwrap or a cluster they
fail, unless $AUTORESEARCH_ALLOW_SKIP names what may be missing (a developer's machine;
CI never sets it). A real pytest, in a subprocess, on a test that needs what is missing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

NEEDY = """
from conftest import require

def test_needs_the_sandbox():
    require("sandbox", "bubblewrap (bwrap) is not installed")

def test_needs_a_cluster():
    require("slurm", "no Slurm cluster answers")

def test_has_what_it_needs():
    require("sandbox", None)
"""


def pytest_on(tmp_path, allow: str | None):
    (tmp_path / "test_needy.py").write_text(NEEDY)
    env = {k: v for k, v in os.environ.items() if k != "AUTORESEARCH_ALLOW_SKIP"}
    if allow is not None:
        env["AUTORESEARCH_ALLOW_SKIP"] = allow
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "test_needy.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_missing_sandbox_or_cluster_fails_the_run(tmp_path):
    done = pytest_on(tmp_path, None)
    assert done.returncode == 1, done.stdout
    assert "2 failed, 1 passed" in done.stdout, done.stdout
    assert "no sandbox here: bubblewrap (bwrap) is not installed; this test must run (set " \
           "AUTORESEARCH_ALLOW_SKIP=sandbox to skip it on a machine without it)" in done.stdout


@pytest.mark.parametrize("allow, outcome", [("sandbox,slurm", "1 passed, 2 skipped"),
                                            ("slurm", "1 failed, 1 passed, 1 skipped")])
def test_allow_skip_turns_only_what_it_names_into_skips(tmp_path, allow, outcome):
    done = pytest_on(tmp_path, allow)
    assert outcome in done.stdout, done.stdout
    assert "no slurm here: no Slurm cluster answers (AUTORESEARCH_ALLOW_SKIP allows the " \
           "skip)" in done.stdout
