"""Keeping the engine's own files out of `git status` and `git add -A`: patterns in the
repository's `info/exclude`, which is not tracked, so no file of the user's is edited."""
from __future__ import annotations

from pathlib import Path


def exclude(common_dir: Path, pattern: str) -> None:
    """Add `pattern` to the repository's info/exclude (once)."""
    path = Path(common_dir) / "info" / "exclude"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    if pattern not in lines:
        with open(path, "a") as f:
            f.write(("\n" if lines and lines[-1] else "") + pattern + "\n")


def exclude_path(common_dir: Path, repo_root: Path, path: Path) -> None:
    """Exclude one file or folder (e.g. the MLflow store) if it is inside the repository."""
    try:
        rel = Path(path).resolve().relative_to(Path(repo_root).resolve()).as_posix()
    except ValueError:
        return
    if rel != ".":
        exclude(common_dir, f"/{rel}")
