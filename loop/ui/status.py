"""Read-only views of a tag (`status`). The words and numbers they share with the loop
(kept, gain, how a number is written) live in loop/words.py."""
from __future__ import annotations

from pathlib import Path

from loop.errors import UsageError
from loop.state.journal import Journal, replay
from loop.words import (UNPROTECTED, gain_text, is_baseline, kept_changes, number_text, plural,
                        shown_status)


def find_tag(repo: Path) -> str:
    root = repo / ".autoresearch"
    tags = sorted((p for p in root.glob("*/journal.jsonl")), key=lambda p: p.stat().st_mtime)
    if not tags:
        raise UsageError(f"no autoresearch runs in {repo} (start one with `autoresearch run`)")
    return tags[-1].parent.name


def load_state(repo: Path, tag: str):
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    if not path.exists():
        raise UsageError(f"no run with tag '{tag}' in {repo}")
    return path, replay(Journal(path).events())


def _measured(rec, remeasures) -> float | None:
    """A kept state's value as the judge sees it: the mean of all its runs, its own and
    every re-run of it since (the best's value moves as re-measurements come in)."""
    values = list(rec.samples) + [e["value"] for e in remeasures
                                  if e.get("commit") == rec.commit and e.get("value") is not None]
    return sum(values) / len(values) if values else rec.metric


def summary(repo: Path, tag: str) -> dict:
    path, state = load_state(repo, tag)
    start = state.start or {}
    changes = [r for r in state.records if not is_baseline(r)]
    baseline = next((r for r in state.records if is_baseline(r) and r.kept), None)
    kept = [r for r in state.records if r.kept]
    statuses: dict[str, int] = {}
    for r in changes:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    stops = [e for e in Journal(path).events() if e.get("event") == "stop"]
    best = _measured(kept[-1], state.remeasures) if kept else None
    # the baseline as the judge saw it (all its runs), the value the gain is taken from
    base_value = _measured(baseline, state.remeasures) if baseline else None
    gain = None
    if best is not None and base_value is not None:
        sign = -1.0 if start.get("direction") == "minimize" else 1.0
        gain = 0.0 if kept[-1] is baseline else sign * (best - base_value)
    return {
        "tag": tag, "branch": start.get("branch", f"autoresearch/{tag}"),
        "task": start.get("task"), "iterations": len(changes),
        "kept": kept_changes(state.records), "best_metric": best,
        "baseline_metric": base_value, "gain": gain,
        "base_commit": baseline.commit if baseline else None,
        "metric_name": start.get("metric"), "direction": start.get("direction"),
        "unprotected": start.get("protected") is False,    # older journals: not known
        "statuses": statuses, "in_progress": state.open_begin is not None,
        "last_stop": stops[-1]["message"] if stops else None,
        "results_tsv": str(path.parent / "results.tsv"),
        "tracking_uri": start.get("tracking_uri"), "mlflow_parent_run": start.get("parent_run_id"),
        "recent": [f"{r.iteration:>4} {shown_status(r):<9} "
                   f"{number_text(r.metric) if r.metric is not None else '':<8}  {r.description}"
                   for r in state.records[-5:]],
    }


def format_summary(s: dict) -> list[str]:
    """`autoresearch status` for people: aligned `key value` lines, no Python reprs."""
    metric = s["metric_name"] or "metric"
    counts = ", ".join(f"{n} {status}" for status, n in sorted(s["statuses"].items())) or "none"
    best = number_text(s["best_metric"])
    if s["gain"] is not None:
        best += f" ({gain_text(s['gain'])} over the baseline {number_text(s['baseline_metric'])})"
    rows = [("tag", s["tag"]), ("branch", s["branch"]), ("task", s["task"]),
            ("metric", f"{metric} ({s['direction']})" + (
                f"; {UNPROTECTED}: the script's own print, no protected grader"
                if s.get("unprotected") else "")),
            ("iterations", f"{s['iterations']} after the baseline"
                           + (" (one in progress)" if s["in_progress"] else "")),
            ("kept", f"{s['kept']} of {s['iterations']}"), ("outcomes", counts),
            (f"best {metric}", best), ("last stop", s["last_stop"] or "-"),
            ("results.tsv", s["results_tsv"]), ("mlflow store", s["tracking_uri"]),
            ("mlflow parent run", s["mlflow_parent_run"])]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    return lines + ["recent:"] + [f"  {line}" for line in s["recent"]]


def final_line(s: dict) -> str:
    """The run's last lines: the same counts as `status`, then one review command a line
    (the kept changes only: from the commit the baseline ran on to the branch)."""
    best = number_text(s["best_metric"])
    if s["gain"] is not None:
        best += f" ({gain_text(s['gain'])} over the baseline)"
    if s.get("unprotected"):
        best += f" ({UNPROTECTED})"
    since = f"{s['base_commit'][:12]}.." if s.get("base_commit") else ""
    return (f"kept {s['kept']} of {plural(s['iterations'], 'iteration')}; best "
            f"{s['metric_name']} = {best}\n"
            f"review:  git log --stat {since}{s['branch']}\n"
            f"         column -t -s$'\\t' {s['results_tsv']}\n"
            f"         mlflow ui --backend-store-uri {s['tracking_uri']}")


