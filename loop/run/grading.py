"""Protected grading: the checks that stand between an experiment and its metric.

A task with an `evaluate` command is graded where the edit cannot reach:

- the grader runs from a pristine copy of the task folder, made from the attempt commit
  *after* the training step has ended (the run cannot plant files in it), and that copy's
  protected files must hash as they did when the loop started;
- the training step hands over one thing, $AUTORESEARCH_ARTIFACT_DIR (and in it the
  `artifact` file when the task names one); nothing else it writes is graded;
- held-out data (`private`) lives outside the task folder and outside git; only the evaluate
  step is told where ($AUTORESEARCH_PRIVATE_DIR), and its content is hashed when the loop
  starts and verified before every grading;
- a run that modified, deleted or replaced a protected file in its folder is a crash
  ("tampered: ..."), never kept (a moved branch, refs, git config, the journal and
  results.tsv are checked by loop/state/integrity.py at the same run's end).

The OS side is loop/run/sandbox.py, applied by the runner to both steps: in the sandbox the
training step does not see the private folder at all (an empty folder covers it; only the
grader's sandbox shows it) and can write only its folder, the artifact folder and scratch.
Without the sandbox (`sandbox: off`, or bwrap unavailable) the experiment runs as the
engine's user and could read whatever that user can, the private folder included if it
guesses the path; then the checks here are all that stands, and they verify what the run
may not change rather than prevent it. docs/tasks.md has the details."""
from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from loop.errors import UsageError
from loop.repo.queries import tracked
from loop.words import Status
from loop.setup.task import Task
from loop.setup.taskfiles import COPY_SKIP, SKIP

FULL_HASH_BYTES = 256 * 2**20   # private files larger than this are checked by size + mtime
READ_ONLY_FULL_BYTES = 8 * 2**20  # read_only data (training shards: GBs) over this: size + mtime


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes; a symlink is identified by its target, not followed."""
    if path.is_symlink():
        return "symlink:" + os.readlink(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest_tree(folder: Path, full_bytes: int = FULL_HASH_BYTES) -> str:
    """One digest of every file under `folder` (names and contents; bytecode caches skipped;
    files over `full_bytes` by size and mtime)."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if SKIP.intersection(rel.parts) or path.is_dir() and not path.is_symlink():
            continue
        if not path.is_symlink() and path.stat().st_size > full_bytes:
            st = path.stat()
            h.update(f"{rel.as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        else:
            h.update(f"{rel.as_posix()}\0{file_digest(path)}\n".encode())
    return h.hexdigest()


def fresh_dir(path: Path) -> Path:
    """An empty folder at `path` (whatever an earlier try left there is removed)."""
    if path.exists() or path.is_symlink():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    path.mkdir(parents=True)
    return path


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def copy_task(src: Path, dest: Path) -> Path:
    """A plain copy of a task folder (no git, environments, caches or run state)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True, ignore=_not_copied)
    return dest


def _not_copied(folder: str, names: list[str]) -> set[str]:
    skipped = set(shutil.ignore_patterns(*COPY_SKIP)(folder, names))
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.islink(path) and (os.path.isfile(os.path.join(path, "pyvenv.cfg"))
                                         or os.path.isdir(os.path.join(path, "conda-meta"))):
            skipped.add(name)
    return skipped


class Guard:
    """What one loop (or one check) trusts: the protected files' hashes and the private
    data's digest, taken from a pristine copy of the task before anything ran."""

    def __init__(self, task: Task, pristine: Path, repo_root: Path | None = None):
        self.task = task
        self.protected = {rel: file_digest(pristine / rel)
                          for rel in task.protected_files(pristine)}
        self.private = task.private_dir
        if self.private and repo_root is not None:
            _check_untracked(self.private, repo_root)
        self.private_digest = digest_tree(self.private) if self.private else None
        self.held_out = [Path(p) for p in task.held_out]
        for path in self.held_out:
            if repo_root is not None:
                _check_untracked(path, repo_root)
        self.held_out_digest = [digest_path(p) for p in self.held_out]
        self.read_only = [Path(p) for p in task.read_only]
        self.read_only_digest = [digest_path(p, READ_ONLY_FULL_BYTES) for p in self.read_only]
        self.inputs = task.input_links      # the links no run may replace or write through
        self.inputs_digest = [digest_path(Path(t), READ_ONLY_FULL_BYTES)
                              for _, t in self.inputs]

    @classmethod
    def at_commit(cls, task: Task, workspace, folder: str, scratch: Path,
                  commit: str | None = None) -> Guard:
        """The guard for a loop: protected files as committed at the branch tip (or at
        `commit`: check-task's HEAD)."""
        pristine = workspace.export(commit or workspace.tip(), folder, scratch)
        try:
            return cls(task, pristine, workspace.repo_root)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def check_folder(self, folder: Path) -> str | None:
        """Why `folder`'s protected files differ from the pristine ones, or None."""
        for rel, digest in self.protected.items():
            path = folder / rel
            if not path.exists() and not path.is_symlink():
                return f"deleted protected file {rel}"
            now = file_digest(path) if path.is_symlink() or path.is_file() else "not a file"
            if now != digest:
                same_kind = now.startswith("symlink:") == digest.startswith("symlink:")
                how = "modified" if same_kind and now != "not a file" else "replaced"
                return f"{how} protected file {rel}"
        return None

    def check_inputs(self, folder: Path) -> str | None:
        """Why the task's `inputs` are not as the loop found them: a link in `folder` the
        run replaced, or a target written through its link (without the sandbox)."""
        from loop.setup.inputs import changed_link
        rel = changed_link(folder, self.inputs)
        if rel:
            return f"replaced the input {rel} (a link to your checkout's data)"
        for (rel, target), digest in zip(self.inputs, self.inputs_digest):
            if digest_path(Path(target), READ_ONLY_FULL_BYTES) != digest:
                return f"changed the input {rel} ({target}) since the loop started"
        return None

    def check_private(self) -> str | None:
        for path, digest in zip(self.held_out, self.held_out_digest):
            if digest_path(path) != digest:
                return f"the held-out data {path} changed since the loop started"
        for path, digest in zip(self.read_only, self.read_only_digest):
            if digest_path(path, READ_ONLY_FULL_BYTES) != digest:
                return f"the read-only data {path} changed since the loop started"
        if self.private is None:
            return None
        if not self.private.is_dir() or digest_tree(self.private) != self.private_digest:
            return f"the private data in {self.private} changed since the loop started"
        return None

    def check_artifact(self, artifact_dir: Path) -> str | None:
        if not self.task.artifact:
            return None
        path = artifact_dir / self.task.artifact
        if path.is_symlink() or not path.is_file():
            return f"artifact {self.task.artifact} not written (expected in " \
                   f"$AUTORESEARCH_ARTIFACT_DIR)"
        return None

    def before_grading(self, run_folder: Path, artifact_dir: Path,
                       grader_copy: Callable[[], Path]) -> tuple[str, str] | None:
        """After a training step that exited 0: None to go on to grading, else (status, why).
        `grader_copy()` makes the pristine folder the grader will run in."""
        tampered = self.check_folder(run_folder) or self.check_inputs(run_folder)
        if tampered:
            return Status.CRASH, f"tampered: the run {tampered}"
        missing = self.check_artifact(artifact_dir)
        if missing:
            return Status.NO_METRIC, missing
        if not self.task.grade_command:
            return None
        copy = grader_copy()
        bad = self.check_folder(copy)
        if bad:
            return Status.CRASH, f"tampered: the grader's copy: {bad}"
        changed = self.check_private()
        if changed:
            return Status.CRASH, f"tampered: {changed}"
        return None


def digest_path(path: Path, full_bytes: int = FULL_HASH_BYTES) -> str | None:
    """A held-out or read-only file's or folder's digest; None when it is gone."""
    if path.is_dir() and not path.is_symlink():
        return digest_tree(path, full_bytes)
    return file_digest(path) if path.exists() or path.is_symlink() else None


def _check_untracked(private: Path, repo_root: Path) -> None:
    """Held-out data inside the research repo must not be tracked: it would be in every
    worktree and commit the experiment sees."""
    if private != repo_root and repo_root not in private.parents:
        return
    held = tracked(repo_root, str(private))
    if held:
        raise UsageError(f"private folder {private} holds files tracked by git "
                         f"({held[0]}): they would be in the experiment's "
                         f"worktree; keep held-out data outside git")
