"""What a task is: a folder with task.yaml, its editable and protected files, how to run
and grade it, and the metric to optimize (loop/setup/metric.py). Loading a task runs nothing;
its checks, one line each, are loop/setup/task_checks.py."""
from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar


from loop.errors import TaskError
from loop.setup import time_box
from loop.setup.graders import HAND_PREDICTIONS, HANDOVER, LM, PREDICTIONS
from loop.setup.interpreter import resolve_command
from loop.setup.metric import Metric, throughput_regex
from loop.setup.schema import build, load_yaml
from loop.setup.task_checks import validate
from loop.setup.taskfiles import TASK_FILE, list_files, matches
from loop.untrusted import canonical_path

# top-level names a new file of the task folder may not take: the grader's Python imports
# its own (every Python since 3.10 lists its standard library's)
SHADOWING = frozenset(sys.stdlib_module_names) | {"sitecustomize", "usercustomize"}
MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".pyi", ".so", ".pyd")


def importable_name(name: str, is_file: bool) -> str:
    """The module a top-level file or folder of that name is imported as ("" for none)."""
    if is_file:
        suffix = next((s for s in MODULE_SUFFIXES if name.endswith(s)), "")
        return name.split(".")[0] if suffix else ""
    return name if name.isidentifier() else ""


@dataclass(frozen=True)
class Grader:
    """A protected grader the engine provides (loop/setup/graders.py); `lm`: a language model the
    script hands over as a torch.export program, scored by protected code; `predictions`:
    a model's predictions for the validation rows, handed over and evaluated by protected
    code (the evaluator shape; docs/tasks.md)."""
    kind: str
    script: str                         # the (editable) training script, run via the handover
    eval_function: str                  # protected `module.function` the script calls with
                                        # its final model as first argument
    eval_call: str                      # how the grader calls it: an expression over the
                                        # protected module's names and `model`
    input_shape: tuple[int, ...] = ()   # lm: (batch, seq) the model is exported at
    features: str = ""                  # predictions: protected `module.function` giving
                                        # the validation rows' features (never the labels)
    python: str = "python"              # the repo's own interpreter

    @property
    def module(self) -> str:
        return self.eval_function.rpartition(".")[0]


@dataclass(frozen=True)
class Task:
    name: str
    run: str
    metric: Metric
    editable: tuple[str, ...]
    protected: tuple[str, ...] = ()
    description: str = ""
    evaluate: str = ""                  # optional protected grading step (see docs/tasks.md)
    artifact: str = ""                  # file the run must write in $AUTORESEARCH_ARTIFACT_DIR
    private: str = ""                   # held-out data folder, outside the task folder; only the
                                        # evaluate step gets it ($AUTORESEARCH_PRIVATE_DIR)
    grader: Grader | None = None        # a protected grader of ours instead of `evaluate`
    held_out: tuple[str, ...] = ()      # files/folders outside git the training step cannot
                                        # see and the grader can (absolute once loaded)
    read_only: tuple[str, ...] = ()     # files/folders outside git both steps read and no run
                                        # may change (a tokenizer the grader trusts)
    grader_env: tuple[str, ...] = ()    # variables (e.g. a reviewer's API key) passed from the
                                        # engine's environment to the evaluate step only
    pass_env: tuple[str, ...] = ()      # variables passed to both steps (scrubbed otherwise)
    network: tuple[str, ...] = ()       # host:port endpoints both steps may reach in the
                                        # sandbox (e.g. the agent's model server)
    grader_network: tuple[str, ...] = ()  # host:port endpoints only the grader may reach
    unprotected: str = ""               # why the metric is not protected (e.g. the edited
                                        # code writes the number the grader reads); shown
    time_budget_s: float = 60.0         # training budget; the runner adds grace_s, then kills
    grace_s: float = 30.0               # start-up allowance beyond the budget; `auto`:
                                        # derived from it (loop/setup/time_box.py)
    grace_auto: str = field(default="", metadata={"internal": True})  # auto's rule, or ""
    on_timeout: str = "fail"            # last: a run killed at the time box is scored from
                                        # the last metric it printed
    grade_timeout_s: float = 300.0      # the grader's own time limit (the evaluate step)
    budget_constant: str = ""           # `prepare.py:TIME_BUDGET`: the training budget lives in
                                        # the repo's code, which never reads
                                        # AUTORESEARCH_TIME_BUDGET; --time-budget is refused
    env: dict[str, str] = field(default_factory=dict)
    memory_pattern: str = r"^\s*peak_(?:memory|vram)_mb\s*[:=]\s*([0-9.]+)"
    throughput_pattern: str = ""        # e.g. `num_steps`: a line `num_steps: 41`, or a regex
                                        # with one group; shown per run, warned on when it moves
    search_space: dict[str, Any] = field(default_factory=dict)  # setting -> range (mutate)
    flags: str = ""                     # a YAML file of the task folder whose `name: value`
                                        # lines follow `run` as --name=value (loop/setup/flags.py)
    flags_style: str = "dashes"         # hydra: the flags file's lines follow `run` as Hydra
                                        # overrides, name=value (training.lr=0.001)
    inputs: tuple[str, ...] = ()        # uncommitted files/folders (globs) of the task folder
                                        # the run reads (prepared data): linked, read-only,
                                        # into every worktree (loop/setup/inputs.py)
    caches: tuple[str, ...] = ()        # data caches under HOME (~/.cache/<name>) both steps
                                        # read, shown read-only (loop/setup/caches.py)
    input_links: tuple[tuple[str, str], ...] = field(default=(), metadata={"internal": True})
    progress_pattern: str = ""          # a progress line: percent of the budget and loss
    early_stop: Any = None              # true or {warmup, z, ...}: stop clearly worse runs
                                        # (loop/run/early_stop.py; needs progress_pattern)
    scale: Any = None                   # what finalize re-measures the branch at: K (times
                                        # the time box) or {time_budget, settings}
                                        # (loop/setup/scale.py)
    root: Path = field(default=Path("."), metadata={"internal": True})  # set by load_task

    @property
    def train_command(self) -> str:
        """What the training step runs: `run`, or the script through the lm handover."""
        if self.grader is None:
            return self.run
        g = self.grader
        if g.kind == "predictions":
            return (f"{g.python} {shlex.quote(str(HAND_PREDICTIONS))} --eval-function "
                    f"{shlex.quote(g.eval_function)} --features {shlex.quote(g.features)} "
                    f"{shlex.quote(g.script)}")
        return (f"{g.python} {shlex.quote(str(HANDOVER))} --eval-function "
                f"{shlex.quote(g.eval_function)} --input-shape {_shape(g.input_shape)} "
                f"{shlex.quote(g.script)}")

    @property
    def grade_command(self) -> str:
        """What the grading step runs: `evaluate`, the lm grader, or nothing."""
        if self.grader is None:
            return self.evaluate
        g = self.grader
        protected = " ".join(shlex.quote(p) for p in self.protected)
        if g.kind == "predictions":
            return (f"{g.python} {shlex.quote(str(PREDICTIONS))} --eval-function "
                    f"{shlex.quote(g.eval_function)} --eval-call {shlex.quote(g.eval_call)} "
                    f"--features {shlex.quote(g.features)} --protected {protected}")
        return (f"{g.python} {shlex.quote(str(LM))} --eval-function "
                f"{shlex.quote(g.eval_function)} --eval-call {shlex.quote(g.eval_call)} "
                f"--input-shape {_shape(g.input_shape)} --metric {shlex.quote(self.metric.name)}"
                f" --protected {protected}")

    @property
    def protected_metric(self) -> bool:
        """Whether the metric comes from protected grading rather than the script's print
        (an `evaluate` whose number the edited code writes, `unprotected:`, does not count)."""
        return bool(self.evaluate or self.grader) and not self.unprotected

    def throughput(self, output: str) -> float | None:
        """The last number `throughput_pattern` captures in a run's output, or None."""
        if not self.throughput_pattern:
            return None
        found = re.findall(throughput_regex(self.throughput_pattern), output, re.M)
        try:
            return float(found[-1].replace(",", "")) if found else None   # `1,234` whole
        except ValueError:
            return None

    # -- files -----------------------------------------------------------------
    def is_editable(self, rel: str) -> bool:
        return matches(rel, self.editable) and not self.is_protected(rel)

    def is_protected(self, rel: str) -> bool:
        return matches(rel, self.protected) or rel == TASK_FILE

    def editable_files(self, folder: Path | None = None) -> list[str]:
        """Editable files present in `folder` (default: the task folder), relative paths."""
        return [p for p in list_files(folder or self.root) if self.is_editable(p)]

    def protected_files(self, folder: Path | None = None) -> list[str]:
        return [p for p in list_files(folder or self.root) if self.is_protected(p)]

    @property
    def private_dir(self) -> Path | None:
        """The held-out data folder (absolute once loaded), or None."""
        return Path(self.private) if self.private else None

    def check_edit_path(self, rel: str) -> str | None:
        """Why an edit may not write `rel`, or None if it may. Checked in the path's one
        spelling (`././prepare.py` is `prepare.py`, loop/untrusted.py), and protected under
        any case too: a filesystem that folds case opens `Prepare.py` as `prepare.py`."""
        try:
            rel = canonical_path(rel)
        except ValueError as exc:
            return str(exc)
        folded = rel.casefold()
        if self.is_protected(rel) or folded == TASK_FILE \
                or matches(folded, [g.casefold() for g in self.protected]):
            return f"{rel}: protected file (the harness and grader may not be edited)"
        if not self.is_editable(rel):
            return f"{rel}: not an editable file (editable: {', '.join(self.editable)})"
        name = rel.rsplit("/", 1)[-1]
        if name == ".gitattributes":     # export-ignore, export-subst: the grader's copy
            return f"{rel}: a .gitattributes would change the grader's copy of the commit"
        if name.endswith(".pth"):
            return f"{rel}: a .pth file is a start-up hook of Python, never an edit"
        return None

    @staticmethod
    def check_new_path(rel: str, present: list[str]) -> str | None:
        """Why an edit may not add the new file `rel` beside the files `present` in the task
        folder, or None: a top-level name the grader's Python would import from it in place
        of its own (docs/sandbox.md)."""
        parts = rel.split("/")
        tops = [parts[:1]] + ([parts[:2]] if parts[0] == "src" and len(parts) > 2 else [])
        for top in tops:
            name = importable_name(top[-1], is_file=len(top) == len(parts))
            where = "/".join(top)
            new = not any(p == where or p.startswith(where + "/") for p in present)
            if name and new and name in SHADOWING:
                what = "the standard library's" if name in sys.stdlib_module_names else \
                    "Python's start-up hook"
                return (f"{rel}: a new top-level `{name}` would shadow {what} `{name}` "
                        f"in the grader's Python; name it otherwise")
        return None


def with_budget(task: Task, seconds: float | None) -> Task:
    """The task with a --time-budget override, refused (one line) when the budget lives in
    the repo's code: the deadline would then disagree with what the script trains for."""
    if not seconds or seconds == task.time_budget_s:
        return task
    if task.budget_constant:
        raise TaskError(f"--time-budget: {task.name} trains for {task.budget_constant} = "
                        f"{task.time_budget_s:g}s, set in its code (the script does not read "
                        f"AUTORESEARCH_TIME_BUDGET); change that constant and time_budget_s "
                        f"in task.yaml instead")
    if task.grace_auto:         # `grace_s: auto` moves with the budget
        return _replace(task, time_budget_s=seconds,
                        grace_s=time_box.auto_grace(task.grace_auto, seconds))
    return _replace(task, time_budget_s=seconds)


def _shape(shape) -> str:
    return "x".join(str(n) for n in shape)


def load_task(path: str | Path, origin: str | Path | None = None) -> Task:
    """Load and validate a task folder (or its task.yaml). Raises TaskError with one line.

    `origin`: the folder a relative `private` path resolves against (default: the task
    folder itself; the engine passes the user's task folder when it loads the worktree copy)."""
    path = Path(path).expanduser().resolve()
    folder = path.parent if path.name == TASK_FILE else path
    yaml_path = folder / TASK_FILE
    if not folder.is_dir():
        raise TaskError(f"task folder not found: {folder}")
    if not yaml_path.is_file():
        raise TaskError(f"{yaml_path}: no task.yaml in this folder")
    data = load_yaml(yaml_path, TaskError) or {}
    where = str(yaml_path)
    if isinstance(data, dict) and isinstance(data.get("metric"), str):
        data["metric"] = {"name": data["metric"]}
    if isinstance(data, dict) and "root" in data:
        raise TaskError(f"{where}: unknown key 'root'")
    if isinstance(data, dict) and isinstance(data.get("grader"), dict):
        if "run" in data:       # one source of truth for what the training step runs
            raise TaskError(f"{where}: give either 'run' or 'grader', not both: with a grader "
                            f"the engine builds the training command from grader.python and "
                            f"grader.script")
        grader = data["grader"]
        data = {**data, "run": f"{grader.get('python', 'python')} {grader.get('script', '')}"}
    auto = isinstance(data, dict) and data.get("grace_s") == time_box.AUTO
    if isinstance(data, dict):
        time_box.grace_value(data.get("grace_s"), where)
        data = {k: v for k, v in data.items() if not (auto and k == "grace_s")}
    task = build(Task, data, where, TaskError)
    task = _replace(task, root=folder,
                    env={k: _expand(str(v), f"env.{k}", where) for k, v in task.env.items()})
    if auto:
        rule = time_box.grace_rule(task)
        task = _replace(task, grace_auto=rule,
                        grace_s=time_box.auto_grace(rule, task.time_budget_s))
    if task.private:
        task = _replace(task, private=str(_resolve_private(task.private, Path(origin or folder),
                                                           where)))
    if task.held_out:
        task = _replace(task, held_out=tuple(
            str(_resolve_held_out(value, where)) for value in task.held_out))
    if task.read_only:
        task = _replace(task, read_only=tuple(
            str(_resolve_held_out(value, where, "read_only")) for value in task.read_only))
    if task.caches:
        from loop.setup.caches import resolve as resolve_caches
        task = _replace(task, caches=resolve_caches(task.caches, folder, where, _expand))
    task = _interpreters(task, folder, Path(origin or folder).resolve(), where)
    validate(task, where)
    if task.inputs:         # resolved in the user's checkout, which the links point into
        from loop.setup.inputs import links
        task = _replace(task, input_links=links(task.inputs, Path(origin or folder).resolve(),
                                                task, where))
    return task


def _interpreters(task: Task, folder: Path, origin: Path, where: str) -> Task:
    """The interpreter of `run`, `evaluate` and `grader.python`, resolved once
    (loop/setup/interpreter.py): the steps run in a worktree and a pristine copy holding
    committed files only, in a sandbox without network."""
    def resolve(command: str, key: str) -> str:
        return resolve_command(command, origin, folder, where, key) if command else command
    if task.grader is not None:     # `run` is then only the display of grader.python + script
        grader = _replace(task.grader, python=resolve(task.grader.python, "grader.python"))
        return _replace(task, grader=grader, evaluate=resolve(task.evaluate, "evaluate"))
    return _replace(task, run=resolve(task.run, "run"), evaluate=resolve(task.evaluate, "evaluate"))


def _resolve_private(value: str, origin: Path, where: str) -> Path:
    """`private` may be absolute, `~/...`, use `$VARS` (kept out of task.yaml and of the
    experiment's scrubbed environment), or be relative to the task folder."""
    path = Path(os.path.expanduser(_expand(value, "private", where)))
    return (path if path.is_absolute() else origin / path).resolve()


def _resolve_held_out(value: str, where: str, key: str = "held_out") -> Path:
    """A `held_out` or `read_only` path: absolute, `~/...` or with `$VARS`, never relative
    (it lives outside the task folder and outside git)."""
    path = Path(os.path.expanduser(_expand(value, key, where)))
    if not path.is_absolute():
        raise TaskError(f"{where}: {key}: '{value}' must be an absolute path, `~/...` or "
                        f"use $VARS: such data lives outside the task folder")
    return path.resolve()


def _expand(value: str, key: str, where: str) -> str:
    """$VARS in a path (e.g. a data root, so task.yaml holds no path of one machine)."""
    expanded = os.path.expandvars(value)
    unset = re.search(r"\$\{?(\w+)", expanded)     # a lone `$` (a regex's end) is no variable
    if unset:
        raise TaskError(f"{where}: {key}: '{value}' needs the environment variable "
                        f"{unset.group(1)}, which is not set")
    return expanded


_Frozen = TypeVar("_Frozen", "Task", "Grader")


def _replace(obj: _Frozen, **changes) -> _Frozen:
    from dataclasses import replace
    return replace(obj, **changes)


def find_tasks(experiments: Path) -> list[Task]:
    """Every valid task folder directly under `experiments`."""
    tasks = []
    for yaml_path in sorted(experiments.glob(f"*/{TASK_FILE}")):
        tasks.append(load_task(yaml_path.parent))
    return tasks
