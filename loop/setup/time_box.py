"""The time box of a task's training step: the grace beyond the budget (`grace_s`, a number
or `auto`), and what a run stopped by it counts as (`on_timeout`).

`grace_s: auto` is derived from the budget, at load and again whenever the budget is
overridden (--time-budget), so the two move together: 120 s + half the budget for a task
whose code times itself (a `budget_constant`, or code reading AUTORESEARCH_TIME_BUDGET:
start-up, the first steps and the final evaluation come on top of its budget), else half the
budget, at least 30 s. A number is kept as written.

`on_timeout`: `fail` (a run killed at the box is a timeout, no metric) or `last` (it is
scored from the last metric it printed: loop/run/runner.py). Runs nothing. What `init` reads
of a script to choose them is loop/script/periodic.py."""
from __future__ import annotations

from loop.errors import TaskError

ON_TIMEOUT = ("fail", "last")
AUTO = "auto"
SELF_TIMED, BOXED = "self-timed", "boxed"     # the two rules of `grace_s: auto`
BUDGET_VARIABLE = "AUTORESEARCH_TIME_BUDGET"


def auto_grace(rule: str, budget_s: float) -> float:
    """`grace_s: auto` for a budget: see the module's docstring."""
    return 120 + budget_s / 2 if rule == SELF_TIMED else max(30.0, budget_s / 2)


def grace_rule(task) -> str:
    """Which rule `auto` follows for `task`: does its code time itself?"""
    if task.budget_constant:
        return SELF_TIMED
    for rel in [*task.editable_files(), *task.protected_files()]:
        if rel.endswith(".py") and BUDGET_VARIABLE in (task.root / rel).read_text(
                errors="replace"):
            return SELF_TIMED
    return BOXED


def grace_value(value, where: str) -> None:
    """`grace_s` as written: a number, or `auto`; one line otherwise."""
    if isinstance(value, str) and value != AUTO:
        raise TaskError(f"{where}: grace_s must be a number of seconds or '{AUTO}' (derived "
                        f"from time_budget_s), got '{value}'")


def check_on_timeout(task, where: str) -> None:
    if task.on_timeout not in ON_TIMEOUT:
        raise TaskError(f"{where}: on_timeout must be fail or last, got '{task.on_timeout}'")
    if task.on_timeout == "last" and (task.evaluate or task.grader):
        # the metric is the grader's, on what training handed over: a run killed at the
        # box may have left its model half-written (or, the lm handover, none at all)
        raise TaskError(f"{where}: on_timeout: last reads the metric the run printed, but "
                        f"with a protected grader ('evaluate' or 'grader') the metric is the "
                        f"grader's, and a run killed at the time box may leave its model "
                        f"half-written: have the script stop itself at "
                        f"${BUDGET_VARIABLE} instead")
