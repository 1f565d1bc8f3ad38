"""Which rule a candidate's run is held to: the best's curves as a band, unless the task has
not opted in, the best has too few curves yet, or the change moves the schedule itself.

The rule is loop/run/early_stop.py's; this only picks what the engine knows (the task's
settings, the scoreboard's curves of the best, the candidate's diff)."""
from __future__ import annotations

from loop.run.early_stop import Band, StopRule, schedule_names
from loop.setup.stop_settings import Settings, parse_settings


def settings_of(task) -> Settings | None:
    """The task's `early_stop:` (checked when the task was loaded), or None: off."""
    if not task.progress_pattern:
        return None
    try:
        return parse_settings(task.early_stop, "task.yaml")
    except ValueError:
        return None


def rule_for(settings: Settings | None, best_curves: list, patch: str) -> StopRule | None:
    """The rule for a candidate whose diff is `patch`, or None: it runs its whole budget."""
    if settings is None or schedule_names(patch, settings):
        return None     # a schedule change reshapes the curve: never stopped on it
    band = Band.of(best_curves, settings.min_best_runs)
    return StopRule(band, settings) if band else None
