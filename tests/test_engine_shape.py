"""The engine keeps the shape it was given: each module of loop/engine/ says its one job, a
candidate's state is its Candidate's (no side tables on the loop), and the engine and finalize
report progress through loop/engine/progress.py without importing the UI. Sizes are not capped:
a long file is a prompt to look for two concepts, never a rule to bend code to."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "loop" / "engine"


def modules(folder: Path) -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text()) for p in sorted(folder.glob("*.py"))}


def test_every_engine_module_says_its_job():
    for path in sorted(ENGINE.glob("*.py")):
        if path.name != "__init__.py":
            assert ast.get_docstring(ast.parse(path.read_text())), f"{path.name}: no docstring"


def self_attributes(cls: ast.ClassDef) -> set[str]:
    """Every `self.x = ...` (plain, annotated or unpacked) in the class's methods."""
    names: set[str] = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    names.add(t.attr)
    return names


def test_a_candidates_state_is_not_kept_in_side_tables_on_the_loop():
    loop = next(node for tree in modules(ENGINE).values() for node in tree.body
                if isinstance(node, ast.ClassDef) and node.name == "Loop")
    assert not {"cands", "held", "asking", "repeats", "best_runs"} & self_attributes(loop)


def test_engine_and_finalize_do_not_import_the_ui():
    for folder in (ENGINE, ROOT / "loop" / "finalize"):
        for name, tree in modules(folder).items():
            for node in ast.walk(tree):
                found = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                assert not any(m == "loop.ui" or m.startswith("loop.ui.") for m in found), \
                    f"{folder.name}/{name} imports {found}"
