"""Style and types, as CI checks them: `ruff check` (the package, tests/ and benchmarks/:
pyproject's include) and `mypy` (the package) pass, settings in pyproject.toml. Unmarked, so
it runs in the normal suite; it skips, saying so, only where the tool is not installed
(`pip install -e '.[test]'` brings both)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m <name> ...` with this interpreter, from the repo root (its pyproject)."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return subprocess.run([sys.executable, "-m", name, *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600)


def test_ruff_passes_on_the_package_its_tests_and_benchmarks():
    out = tool("ruff", "check")      # what it checks: pyproject's [tool.ruff] include
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_checks_the_tests_and_benchmarks_but_not_the_fixture_repos():
    out = tool("ruff", "check", "--show-files")
    checked = {Path(line).relative_to(ROOT).as_posix() for line in out.stdout.split()
               if line.endswith(".py")}
    assert {"loop/engine/engine.py", "tests/test_lint.py", "tests/helpers.py",
            "benchmarks/overhead.py"} <= checked, sorted(checked)[:20]
    assert not [p for p in checked if p.startswith(("tests/fixtures/", "examples/"))]


def test_mypy_passes_on_loop():
    out = tool("mypy")      # files, python_version and per-package settings: pyproject.toml
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues found" in out.stdout


def test_the_checks_bite(tmp_path):
    """The settings are live: an unused import and a wrong type are findings."""
    ruff = tool("ruff", "check", "--stdin-filename", "loop/_probe.py", "-",
                stdin="import os\n")
    assert ruff.returncode == 1 and "F401" in ruff.stdout, ruff.stdout + ruff.stderr
    probe = tmp_path / "probe.py"
    probe.write_text("x: int = 'one'\n")
    mypy = tool("mypy", str(probe))      # a file named here replaces pyproject's `files`
    assert mypy.returncode == 1 and "[assignment]" in mypy.stdout, mypy.stdout + mypy.stderr
