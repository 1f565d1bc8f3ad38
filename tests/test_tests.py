"""The suite's own rules, read from its source with ast: a test module never imports another
test module (what several share lives in conftest.py, helpers.py or a named helper module
such as llm_task.py), at the top or inside a function; and the hang guard conftest.py gives
(`@pytest.mark.hang_limit`) fails a test that hangs."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in `source`, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def imports_of_test_modules(source: str) -> list[str]:
    """`line: module` for each import of a test module (test_*) in `source`."""
    return [f"{line}: {module}" for line, module in imported_modules(source)
            if module.split(".")[0].startswith("test_")]


def test_no_test_module_imports_another():
    offences = [f"{path.name}:{where}" for path in sorted(TESTS.glob("*.py"))
                for where in imports_of_test_modules(path.read_text())]
    assert offences == [], ("import these from helpers.py (or conftest.py), not from a test "
                            "module: " + ", ".join(offences))


def test_the_check_sees_imports_at_the_top_and_inside_functions():
    source = ("import os\nfrom test_engine import rows\n"
              "def f():\n    import test_story\n    from helpers import rows\n")
    assert imports_of_test_modules(source) == ["2: test_engine", "4: test_story"]


def test_a_hang_limit_fails_a_test_that_hangs(tmp_path):
    """`hang_limit` (conftest.py) interrupts a blocking wait and fails the test, naming the
    limit; a test within its limit passes."""
    (tmp_path / "test_probe.py").write_text(
        "import subprocess, pytest\n"
        "@pytest.mark.hang_limit(1)\n"
        "def test_hangs():\n    subprocess.run(['sleep', '600'])\n"
        "@pytest.mark.hang_limit(60)\n"
        "def test_ends():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "still running 1 s after it began: a hang (hang_limit)" in done.stdout, done.stdout
