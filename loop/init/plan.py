"""What `autoresearch init` decided (a Plan), said back to the user, and written: task.yaml
and autoresearch.yaml. The reading is loop/init/onboard.py and loop/init/shapes/."""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from loop.errors import UsageError
from loop import yaml_io

CONFIG_FILE = "autoresearch.yaml"
TASK_FILE = "task.yaml"
DEFAULT_BUDGET_S = 60.0
JUDGE_RULE = "sequential"             # what init writes, and says it writes


class InitError(UsageError):
    """Why init wrote nothing (one line)."""


@dataclass
class Guess:
    """One thing init decided: how, how sure, and the flag that decides it instead."""
    why: str
    found: bool            # read from the code (True) or a guess (False)
    flags: str             # `--metric NAME`


@dataclass
class Plan:
    root: Path                          # the task folder (the repo, or a folder in it)
    top: Path                           # its git top level
    shape: str                          # a key of loop/init/shapes.SHAPES
    script: str
    args: str = ""                      # what `run` passes the script (init --args)
    inputs: list[str] = field(default_factory=list)   # uncommitted data the run reads
    caches: list[str] = field(default_factory=list)   # ~/.cache/<name>: loop/setup/caches.py
    cache_vars: list[str] = field(default_factory=list)   # variables that moved a cache
    cache_lines: list[str] = field(default_factory=list)  # each cache, as init says it
    shape_line: str = ""                # the shape, in words
    name: str = ""
    description: str = ""
    editable: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    python: str = "python"
    python_why: str = ""
    metric: str = ""
    direction: str = "minimize"
    metric_pattern: str = ""            # metric.pattern ("": a `name: value` line)
    metric_source: str = ""             # who prints it, in words
    budget: float = DEFAULT_BUDGET_S
    budget_constant: str = ""
    grace: float = 30.0                 # written `auto`: derived from the budget at load
    grace_why: str = ""
    on_timeout: str = "fail"            # last: scored from its last print at the time box
    on_timeout_why: str = ""
    throughput: str = ""
    memory: str = ""                    # the printed memory figure's name
    space: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    grader: dict = field(default_factory=dict)
    held_out: list[str] = field(default_factory=list)
    read_only: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reads_budget: bool = False          # the script reads AUTORESEARCH_TIME_BUDGET
    flags_file: str = ""                # the flags file written (task.yaml `flags`)
    flags: dict[str, str] = field(default_factory=dict)   # flag -> its value, as written
    flags_how: str = ""                 # argparse | click | fire | typer | config | hydra
    guesses: dict[str, Guess] = field(default_factory=dict)   # script, metric, budget, ...

    @property
    def run(self) -> str:
        return f"{self.python} {self.script}" + (f" {self.args}" if self.args else "")


# -- said back -----------------------------------------------------------------------------------
def _guess(plan: Plan, key: str) -> str:
    g = plan.guesses.get(key)
    if g is None:
        return ""
    return f" ({'found' if g.found else 'guessed'}: {g.why}; change with {g.flags})"


def _grader_words(grader: dict) -> str:
    if grader["kind"] == "predictions":
        return (f"predictions: the model's predictions for {grader['features']}() handed "
                f"over, then {grader['eval_call']}")
    return f"lm: {grader['eval_call']} at input shape {grader['input_shape']}"


def describe(plan: Plan) -> list[str]:
    where = plan.root.relative_to(plan.top).as_posix() or "."
    lines = [f"init: {plan.root}",
             f"  shape:      {plan.shape_line}",
             f"  script:     {plan.script}" + _guess(plan, "script"),
             f"  editable:   {', '.join(plan.editable)}",
             f"  protected:  {', '.join(plan.protected) or 'none'}"]
    if plan.grader:
        lines += [f"  run:        {plan.python} {plan.script}, handing its model to "
                  f"{plan.grader['eval_function']} ({plan.python_why})",
                  f"  grader:     {_grader_words(plan.grader)}, on held-out "
                  f"{', '.join(plan.held_out)}",
                  f"  read-only:  {', '.join(plan.read_only) or 'none'} (no run may change "
                  f"what the grader reads besides the held-out data)"]
    else:
        lines += [f"  run:        {plan.run} ({plan.python_why})",
                  f"  grader:     none: unprotected metric: the number is what the run "
                  f"prints ({plan.metric_source})"]
    lines += [f"  metric:     {plan.metric}" + _guess(plan, "metric"),
              f"  direction:  {plan.direction}" + _guess(plan, "direction")]
    if plan.metric_pattern:
        lines += [f"  pattern:    {plan.metric_pattern}  (metric.pattern: the number it "
                  f"captures in the run's output)"]
    lines += [f"  budget:     {plan.budget:g}s" + _guess(plan, "budget"),
              f"  grace:      {plan.grace:g}s ({plan.grace_why}; moves with the budget)",
              *([f"  on timeout: last (found: {plan.on_timeout_why})"]
                if plan.on_timeout == "last" else []),
              f"  throughput: {plan.throughput or 'none (no num_steps line)'}",
              f"  memory:     {plan.memory or 'none printed'}"]
    if plan.flags_file:
        lines += [f"  flags:      {plan.flags_file}: {len(plan.flags)} {plan.flags_how} flags of "
                  f"{plan.script}, passed as "
                  + ("Hydra overrides name=value" if plan.flags_how == "hydra" else "--name=value")
                  + " after the run command ("
                  + ("from --args" if plan.flags_how == "--key=value" else
                     "found: its composed config's values" if plan.flags_how == "hydra" else
                     "found: its defaults")
                  + "; editable, a search changes them there)"]
    lines += [f"  search:     {len(plan.space)} settings for mutate and tune"
              + (f": {', '.join(plan.space)}" if plan.space and len(plan.space) <= 8 else "")
              + (f" ({', '.join(plan.conditions)})" if plan.conditions else "")
              + (f"; left out: {', '.join(plan.skipped)}" if plan.skipped else ""),
              f"  inputs:     {', '.join(plan.inputs) or 'none'}" + (
                  _guess(plan, "inputs") or " (uncommitted data the run reads: --inputs PATH)"),
              *[f"  caches:     {line}" for line in plan.cache_lines],
              f"  judge:      {JUDGE_RULE} (autoresearch.yaml)"]
    lines += [f"  note:       {n}" for n in plan.notes]
    files = [(plan.root / TASK_FILE).relative_to(plan.top).as_posix(), CONFIG_FILE]
    if plan.flags_file:
        files.insert(1, (plan.root / plan.flags_file).relative_to(plan.top).as_posix())
    lines += [f"wrote {', '.join(files)}; next:"]
    if Path.cwd().resolve() != plan.top:
        lines += [f"  cd {plan.top}"]
    lines += [f"  git add {' '.join(files)} && git commit -m 'autoresearch task'",
              f"  autoresearch check-task {where}"]
    if plan.space:
        lines += ["  autoresearch run"]
    else:                  # mutate would be refused: nothing to search offline
        lines += [f"  autoresearch run --proposer llm --model MODEL   (nothing to search "
                  f"offline: the LLM edits {plan.script}; MODEL at your OpenAI-compatible "
                  f"endpoint, docs/proposers.md)",
                  f"  or, offline: add one line to {files[0]}, {example_space(plan)}, then "
                  f"`autoresearch run --proposer mutate`"]
    return lines


def example_space(plan: Plan) -> str:
    """A `search_space:` line naming a setting of the script, as the user would add it."""
    return (f"`search_space: {{LR: {{log_range: [0.0001, 0.01]}}}}` with LR a module-level "
            f"setting of {plan.script}")


# -- written -------------------------------------------------------------------------------------
def _q(value) -> str:
    """A YAML scalar read back as `value` (loop/yaml_io.py: `5.0e-05`, never `5e-05`)."""
    return yaml_io.scalar(value)


def _flow(value) -> str:
    return yaml_io.flow(value)


def task_yaml(plan: Plan) -> str:
    lines = ["# Written by `autoresearch init` from this repo's code. Edit freely; commit it.",
             f"name: {_flow(plan.name)}"]
    wrapped = textwrap.wrap(plan.description, 88) if plan.description.isprintable() else []
    if wrapped:                                 # a folded block, as a README's prose reads
        lines += ["description: >-", *("  " + s for s in wrapped)]
    else:                                       # none, or a control character: quoted
        lines += [f"description: {_q(plan.description)}"]
    lines += [f"editable: {_flow(plan.editable)}"]
    if plan.protected:
        lines += [f"protected: {_flow(plan.protected)}"]
    if plan.grader:
        lines += ["grader:                 # protected grading, loop/run/graders/ (docs/tasks.md)"]
        lines += [f"  {k}: {_flow(v)}" for k, v in plan.grader.items()]
        lines += [f"held_out: {_flow(plan.held_out)}   # hidden from training, read by the "
                  f"grader"]
        if plan.read_only:
            lines += [f"read_only: {_flow(plan.read_only)}   # read by both steps, changed by "
                      f"neither (checked before each grading)"]
    else:
        lines += [f"run: {_flow(plan.run)}   # unprotected metric: the number is what the "
                  f"run prints"]
    if plan.flags_file:
        lines += [f"flags: {plan.flags_file}   # --name=value for each line, after `run`"
                  if plan.flags_how != "hydra" else
                  f"flags: {plan.flags_file}   # a Hydra override name=value for each line, "
                  f"after `run`", *(["flags_style: hydra"] if plan.flags_how == "hydra" else [])]
    if plan.inputs:
        lines += [f"inputs: {_flow(plan.inputs)}   # not committed (ignored): linked read-only "
                  f"into every worktree"]
    if plan.caches:
        lines += [f"caches: {_flow(plan.caches)}   # data caches under HOME the code names: "
                  f"shown read-only to runs, filled before the night"]
    if plan.cache_vars:
        lines += [f"pass_env: {_flow(plan.cache_vars)}   # where the cache is on this machine"]
    metric = {"name": plan.metric, "direction": plan.direction}
    if plan.metric_pattern:
        metric["pattern"] = plan.metric_pattern
    budget = int(plan.budget) if plan.budget == int(plan.budget) else plan.budget
    lines += [f"metric: {_flow(metric)}", f"time_budget_s: {_q(budget)}"]
    if plan.budget_constant:
        lines += [f"budget_constant: {plan.budget_constant}   # --time-budget is refused: "
                  f"change the constant"]
    lines += [f"grace_s: auto                 # {plan.grace:g}s now, derived from the budget "
              f"(moves with --time-budget): {plan.grace_why}"]
    if plan.on_timeout == "last":
        lines += [f"on_timeout: last              # a run stopped at the time box is scored "
                  f"from the last {plan.metric} it printed"]
    if plan.throughput:
        lines += [f"throughput_pattern: {_q(plan.throughput)}"]
    if plan.memory:
        pattern = r"^\s*" + re.escape(plan.memory) + r"\s*[:=]\s*([0-9.]+)"
        lines += [f"memory_pattern: {_q(pattern)}"]
    if plan.space:
        lines += ["search_space:                 # for `--proposer mutate` and `tune`"
                  + (f"; left out: {', '.join(plan.skipped)}" if plan.skipped else "")]
        lines += [f"  {k}: {_flow(v)}" for k, v in plan.space.items()]
    return "\n".join(lines) + "\n"


def flags_yaml(plan: Plan) -> str:
    each = "name=value (a Hydra override)" if plan.flags_how == "hydra" else "--name=value"
    lines = [f"# The command-line flags `autoresearch run` passes to {plan.script} (task.yaml "
             f"`flags`): each line",
             f"# becomes {each} after the run command, read from the candidate's commit.",
             f"# Written by `autoresearch init` from {plan.script}'s {plan.flags_how} defaults; "
             f"a search changes them here."]
    for name, value in plan.flags.items():
        written = value if yaml_io.DECIMAL.fullmatch(value) else _q(value)
        lines.append(f"{name}: {written}" + ("   # each run's own seed" if value.startswith("$")
                                             else ""))
    return "\n".join(lines) + "\n"


def config_yaml(plan: Plan) -> str:
    task = plan.root.relative_to(plan.top).as_posix() or "."
    program = "program.md" if (plan.top / "program.md").is_file() else None
    lines = ["# Written by `autoresearch init`: a bare `autoresearch run` here reads this file.",
             "# Flags override any key (e.g. --proposer llm --model M, --iterations N).",
             f"task: {_flow(task)}", "iterations: 20"]
    if program:
        lines += [f"program: {program}               # steers the proposals, re-read each "
                  f"iteration"]
    if plan.space:
        lines += ["proposer:", "  kind: mutate                 # offline random search over "
                  "search_space; or llm (--model M)"]
    else:
        lines += ["# proposer: none written. init found nothing for mutate to search in "
                  f"{plan.script};",
                  "# run the LLM proposer (--proposer llm --model M), or add a search_space "
                  "to task.yaml",
                  "# and write `proposer: {kind: mutate}` here."]
    lines += ["judge:", f"  rule: {JUDGE_RULE}             # keep a gain only when it beats "
              "the measured run-to-run noise; the promising confirmed next to runs of the best"]
    return "\n".join(lines) + "\n"


def write(plan: Plan) -> None:
    """Write both files, then load them as the engine will; on failure put back what was
    there (nothing written)."""
    from loop.setup.config import load_config
    from loop.setup.task import load_task
    targets = {plan.root / TASK_FILE: task_yaml(plan), plan.top / CONFIG_FILE: config_yaml(plan)}
    if plan.flags_file:                 # first: load_task reads it
        targets = {plan.root / plan.flags_file: flags_yaml(plan), **targets}
    before = {p: p.read_text() if p.exists() else None for p in targets}
    try:
        for path, text in targets.items():
            path.write_text(text)
        load_task(plan.root)
        load_config(plan.top / CONFIG_FILE)
    except BaseException as exc:
        for path, old in before.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(old)
        if isinstance(exc, UsageError):
            raise InitError(f"init: the task it would write does not load: {exc}") from None
        raise
