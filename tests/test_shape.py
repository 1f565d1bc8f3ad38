"""The package keeps its shape: no file in loop/ over 400 lines, no function over 60.

A file may be longer only when its docstring says why ("Exempt from the 400-line limit: ..."),
which today is only a grader run by path, one file on purpose (loop/run/graders/lm.py)."""
import ast
from pathlib import Path

LOOP = Path(__file__).resolve().parent.parent / "loop"
EXEMPT = "Exempt from the 400-line limit:"
MAX_LINES, MAX_FUNCTION = 400, 60


def too_long(root: Path) -> list[str]:
    """Files over MAX_LINES (unless exempt, with the reason) and functions over MAX_FUNCTION."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        lines = len(text.splitlines())
        if lines > MAX_LINES and EXEMPT not in (ast.get_docstring(tree) or ""):
            found.append(f"{path.relative_to(root)}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: "
                                 f"{size} lines")
    return found


def test_no_file_over_400_lines_and_no_function_over_60():
    assert too_long(LOOP) == []


def test_the_check_finds_a_long_file_and_a_long_function_but_honours_a_stated_exemption(
        tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "long_fn.py").write_text(f'"""A module."""\n\n\ndef f():\n{body}\n')
    (tmp_path / "long_file.py").write_text('"""A module."""\n' + "x = 1\n" * 400)
    (tmp_path / "exempt.py").write_text(f'"""A grader.\n\n{EXEMPT} run by path."""\n'
                                        + "x = 1\n" * 400)
    assert too_long(tmp_path) == ["long_file.py: 401 lines", "long_fn.py:4 f: 62 lines"]
