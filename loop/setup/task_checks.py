"""The checks a task passes when it loads (loop/setup/task.py): each refuses a task.yaml that
cannot be right with one line naming the key. Reads the task folder's files; runs nothing,
changes nothing. Imports nothing of the task module (it is handed the loaded task)."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from loop.errors import TaskError
from loop.setup import time_box
from loop.setup.endpoints import parse as parse_endpoint
from loop.setup.flags import STYLES, FlagsError, read
from loop.setup.graders import KINDS
from loop.setup.metric import DIRECTIONS, throughput_regex
from loop.setup.scale import parse as parse_scale
from loop.setup.search_space import SpaceError, constants, parse_space
from loop.script.settings import kind_of
from loop.setup.stop_settings import check_pattern, parse_settings
from loop.setup.taskfiles import TASK_FILE, list_files, matches

if TYPE_CHECKING:
    from loop.setup.task import Task


def validate(task: Task, where: str) -> None:
    if task.metric.direction not in DIRECTIONS:
        raise TaskError(f"{where}: metric.direction must be minimize or maximize, "
                        f"got '{task.metric.direction}'")
    try:
        groups = re.compile(task.metric.pattern, re.M).groups
    except re.error as exc:
        raise TaskError(f"{where}: metric.pattern is not a valid regex: {exc}") from None
    if groups < 1:
        raise TaskError(f"{where}: metric.pattern needs one capture group for the number")
    if not task.run.strip():
        raise TaskError(f"{where}: 'run' is empty")
    if not (math.isfinite(task.time_budget_s) and math.isfinite(task.grace_s)):
        raise TaskError(f"{where}: time_budget_s and grace_s must be finite numbers")
    if task.time_budget_s <= 0 or task.grace_s < 0:
        raise TaskError(f"{where}: time_budget_s must be > 0 and grace_s >= 0")
    if not (0 < task.grade_timeout_s < math.inf):
        raise TaskError(f"{where}: grade_timeout_s must be a number of seconds > 0, "
                        f"got {task.grade_timeout_s}")
    if task.budget_constant and not re.fullmatch(r"[\w./-]+\.py:[A-Za-z_]\w*",
                                                 task.budget_constant):
        raise TaskError(f"{where}: budget_constant must read FILE.py:NAME, got "
                        f"'{task.budget_constant}'")
    if not task.editable:
        raise TaskError(f"{where}: 'editable' lists no files")
    files = list_files(task.root)
    for key, globs in (("editable", task.editable), ("protected", task.protected)):
        for g in globs:
            if not any(matches(f, [g]) for f in files):
                raise TaskError(f"{where}: {key} file '{g}' not found in {task.root}")
    if matches(TASK_FILE, task.editable):    # its metric and commands define the grading
        raise TaskError(f"{where}: editable names {TASK_FILE}, which is always protected; "
                        f"list only the files the loop may change")
    overlap = [f for f in files if matches(f, task.editable) and matches(f, task.protected)]
    if overlap:
        raise TaskError(f"{where}: '{overlap[0]}' is both editable and protected")
    _validate_grading(task, where, files)
    time_box.check_on_timeout(task, where)
    _validate_search(task, where)
    parse_scale(task.scale, where)


def _validate_progress(task: Task, where: str) -> None:
    """`progress_pattern` reads a loss; `early_stop` is well formed and has a pattern."""
    if task.progress_pattern:
        problem = check_pattern(task.progress_pattern)
        if problem:
            raise TaskError(f"{where}: progress_pattern {problem}")
    try:
        on = parse_settings(task.early_stop, where)
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    if on and not task.progress_pattern:
        raise TaskError(f"{where}: early_stop needs progress_pattern: the line each run "
                        f"prints with its share of the budget and its loss")


def _validate_search(task: Task, where: str) -> None:
    """`throughput_pattern` compiles with one group; `search_space` names constants the
    editable files define, with ranges that are not empty."""
    _validate_progress(task, where)
    if task.throughput_pattern:
        try:
            groups = re.compile(throughput_regex(task.throughput_pattern), re.M).groups
        except re.error as exc:
            raise TaskError(f"{where}: throughput_pattern is not a valid regex: {exc}") from None
        if groups < 1:
            raise TaskError(f"{where}: throughput_pattern needs one capture group")
    _validate_flags(task, where)
    if not task.search_space:
        return
    files = {rel: (task.root / rel).read_text(errors="replace")
             for rel in task.editable_files() if kind_of(rel)}
    try:
        parse_space(task.search_space, where, set(constants(files, task.search_space)))
    except SpaceError as exc:
        raise TaskError(str(exc)) from None


def _validate_flags(task: Task, where: str) -> None:
    """`flags`: an editable YAML file of the task folder, `name: value` lines, passed in
    `flags_style` (dashes: --name=value; hydra: name=value overrides)."""
    if task.flags_style not in STYLES:
        raise TaskError(f"{where}: flags_style must be one of {', '.join(STYLES)}, got "
                        f"'{task.flags_style}'")
    if not task.flags:
        return
    rel = task.flags
    if Path(rel).is_absolute() or ".." in Path(rel).parts or not rel.endswith((".yaml", ".yml")):
        raise TaskError(f"{where}: flags: '{rel}' must be a .yaml file inside the task folder")
    if task.grader is not None:
        raise TaskError(f"{where}: flags: the {task.grader.kind} grader runs the script "
                        f"through its handover, without arguments; give its settings in the "
                        f"script instead")
    if not task.is_editable(rel) or task.is_protected(rel):
        raise TaskError(f"{where}: flags: {rel} must be editable (list it under `editable`): "
                        f"it holds the settings a search changes")
    path = task.root / rel
    if not path.is_file():
        raise TaskError(f"{where}: flags: {rel} does not exist in {task.root}")
    try:
        read(path.read_text(errors="replace"), rel)
    except FlagsError as exc:
        raise TaskError(f"{where}: flags: {exc}") from None


def _validate_grading(task: Task, where: str, files: list[str]) -> None:
    """The keys of protected grading: the grader, its artifact, its held-out data."""
    for word in task.evaluate.split():
        if word in files and task.is_editable(word):
            raise TaskError(f"{where}: evaluate runs '{word}', which is editable: a grader "
                            f"must be a protected file")
    art = Path(task.artifact)
    if task.artifact and (art.is_absolute() or ".." in art.parts or task.artifact.startswith("~")):
        raise TaskError(f"{where}: artifact must be a file name inside "
                        f"$AUTORESEARCH_ARTIFACT_DIR, got '{task.artifact}'")
    for key in ("grader_env", "pass_env"):
        for name in getattr(task, key):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise TaskError(f"{where}: {key}: '{name}' is not an environment variable name")
    _validate_grader(task, where, files)
    _validate_held_out(task, where)
    _validate_read_only(task, where)
    for key in ("network", "grader_network"):
        for value in getattr(task, key):
            try:
                parse_endpoint(value)
            except ValueError as exc:
                raise TaskError(f"{where}: {key}: {exc}") from None
    if not task.private:
        return
    private, root = Path(task.private), task.root.resolve()
    if not private.exists():
        raise TaskError(f"{where}: private folder not found: {private}")
    if not private.is_dir():
        raise TaskError(f"{where}: private: {private} is not a folder")
    if private == root or root in private.parents:
        raise TaskError(f"{where}: private folder {private} is inside the task folder; held-out "
                        f"data must live outside it (the experiment runs in a copy of the task "
                        f"folder)")
    if private in root.parents:
        raise TaskError(f"{where}: the task folder is inside the private folder {private}; "
                        f"held-out data must live outside the experiment's reach")
    if task.private in task.run or any(task.private in str(v) for v in task.env.values()):
        raise TaskError(f"{where}: the private folder appears in 'run' or 'env': only the "
                        f"evaluate step may know where it is")


def _validate_grader(task: Task, where: str, files: list[str]) -> None:
    """A `grader:` block: a known kind, an editable script, a protected module, a call that
    parses, a (batch, seq) shape; `evaluate` and `artifact` belong to the other mode."""
    g = task.grader
    if g is None:
        return
    if g.kind not in KINDS:
        raise TaskError(f"{where}: grader.kind must be one of {', '.join(KINDS)}, got "
                        f"'{g.kind}'")
    if task.evaluate:
        raise TaskError(f"{where}: give either 'evaluate' or 'grader', not both")
    if not g.python.strip():
        raise TaskError(f"{where}: grader.python is empty")
    if g.script not in files:
        raise TaskError(f"{where}: grader.script '{g.script}' not found in {task.root}")
    if not task.is_editable(g.script):
        raise TaskError(f"{where}: grader.script '{g.script}' must be an editable file (it is "
                        f"the training script)")
    _protected_function(task, files, where, "eval_function", g.eval_function)
    try:
        compile(g.eval_call, "eval_call", "eval")
    except SyntaxError as exc:
        raise TaskError(f"{where}: grader.eval_call is not a Python expression: "
                        f"{exc.msg}") from None
    if not re.search(r"\bmodel\b", g.eval_call):
        raise TaskError(f"{where}: grader.eval_call must pass `model` (the graded model)")
    if g.kind == "predictions":
        if not g.features:
            raise TaskError(f"{where}: grader.features is missing: the protected function "
                            f"giving the validation rows the model predicts")
        _protected_function(task, files, where, "features", g.features)
        if g.input_shape:
            raise TaskError(f"{where}: grader.input_shape belongs to kind lm")
        return
    if g.features:
        raise TaskError(f"{where}: grader.features belongs to kind predictions")
    if not g.input_shape:
        raise TaskError(f"{where}: grader: missing required key 'input_shape' (kind lm: the "
                        f"[batch, seq] the model is exported at)")
    if len(g.input_shape) != 2 or min(g.input_shape) < 1:
        raise TaskError(f"{where}: grader.input_shape must be [batch, seq] of positive "
                        f"integers, got {list(g.input_shape)}")


def _protected_function(task, files: list[str], where: str, key: str, name: str) -> None:
    """`name` (grader.`key`) is module.function of a protected file of the task folder."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\.[A-Za-z_]\w*", name):
        raise TaskError(f"{where}: grader.{key} must be module.function, got '{name}'")
    module_file = name.rpartition(".")[0].replace(".", "/") + ".py"
    if module_file not in files:
        raise TaskError(f"{where}: grader.{key}: module file '{module_file}' not "
                        f"found in {task.root}")
    if not task.is_protected(module_file):
        raise TaskError(f"{where}: grader.{key} lives in '{module_file}', which is "
                        f"not protected: the evaluation must be a protected file")


def _outside_the_task(task: Task, key: str, where: str, overlap_hint: str) -> None:
    """`held_out` or `read_only` paths exist and live outside the task folder."""
    root = task.root.resolve()
    for value in getattr(task, key):
        path = Path(value)
        if not path.exists():
            raise TaskError(f"{where}: {key}: {path} not found (prepare the data first)")
        if path == root or root in path.parents or path in root.parents:
            raise TaskError(f"{where}: {key}: {path} overlaps the task folder; {overlap_hint}")


def _validate_read_only(task: Task, where: str) -> None:
    _outside_the_task(task, "read_only", where,
                      "list files of the task folder under 'protected'")


def _validate_held_out(task: Task, where: str) -> None:
    """Held-out paths exist, live outside the task folder, and appear nowhere the training
    step is told about (its command and env)."""
    if task.held_out and not task.protected_metric:
        raise TaskError(f"{where}: held_out needs a protected grader ('grader' or 'evaluate'): "
                        f"hidden data nobody grades on would only break the run")
    _outside_the_task(task, "held_out", where,
                      "held-out data must live outside it and outside git")
    for value in task.held_out:
        if value in task.run or any(value in str(v) for v in task.env.values()):
            raise TaskError(f"{where}: held_out: {Path(value)} appears in 'run' or 'env': only "
                            f"the grader may know where it is")
