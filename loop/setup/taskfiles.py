"""The files of a task folder: task.yaml's name, which files a listing or a plain copy of the
folder skips, and glob matching of `editable`/`protected`. Reads the folder; changes nothing."""
from __future__ import annotations

import fnmatch
from pathlib import Path

TASK_FILE = "task.yaml"
SKIP = {".git", "__pycache__", ".autoresearch"}
# Never in a plain copy of a task folder (check-task outside git): environments, caches and
# run state, which a checkout of HEAD would not hold either (a virtualenv of any name, one
# holding pyvenv.cfg, or a conda env, holding conda-meta/, is skipped too)
COPY_SKIP = (*SKIP, ".venv", "venv", "node_modules", ".cache", ".mypy_cache", ".pytest_cache",
             ".ruff_cache", ".tox", ".nox", ".ipynb_checkpoints", "mlflow.db", "mlruns",
             "mlartifacts")


def matches(rel: str, globs) -> bool:
    return any(fnmatch.fnmatchcase(rel, g) or rel == g.rstrip("/") for g in globs)


def list_files(folder: Path) -> list[str]:
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and not SKIP.intersection(rel.parts):
            out.append(rel.as_posix())
    return out
