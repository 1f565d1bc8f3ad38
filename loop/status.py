"""Read-only views of a tag: `status` (summary, JSON) and `report` (markdown)."""
from __future__ import annotations

from pathlib import Path

from loop.errors import UsageError
from loop.journal import Journal, replay


def find_tag(repo: Path) -> str:
    root = repo / ".autoresearch"
    tags = sorted((p for p in root.glob("*/journal.jsonl")), key=lambda p: p.stat().st_mtime)
    if not tags:
        raise UsageError(f"no autoresearch runs in {repo} (start one with `autoresearch run`)")
    return tags[-1].parent.name


def _state(repo: Path, tag: str):
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    if not path.exists():
        raise UsageError(f"no run with tag '{tag}' in {repo}")
    return path, replay(Journal(path).events())


def summary(repo: Path, tag: str) -> dict:
    path, state = _state(repo, tag)
    start = state.start or {}
    kept = [r for r in state.records if r.kept]
    best = kept[-1].best_after if kept else None
    statuses = {}
    for r in state.records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    stops = [e for e in Journal(path).events() if e.get("event") == "stop"]
    return {
        "tag": tag, "branch": start.get("branch", f"autoresearch/{tag}"),
        "task": start.get("task"), "iterations": max(0, len(state.records) - 1),
        "kept": max(0, len(kept) - 1), "best_metric": best,
        "metric_name": start.get("metric"), "direction": start.get("direction"),
        "statuses": statuses, "in_progress": state.open_begin is not None,
        "last_stop": stops[-1]["message"] if stops else None,
        "results_tsv": str(path.parent / "results.tsv"),
        "tracking_uri": start.get("tracking_uri"), "mlflow_parent_run": start.get("parent_run_id"),
        "recent": [f"{r.iteration:>4} {r.status:<9} {'' if r.metric is None else f'{r.metric:.6f}'}"
                   f"  {r.description}" for r in state.records[-5:]],
    }


def report(repo: Path, tag: str) -> str:
    _, state = _state(repo, tag)
    s = summary(repo, tag)
    lines = [f"# autoresearch report: {tag}", "",
             f"Task `{s['task']}`, metric `{s['metric_name']}` ({s['direction']}), branch "
             f"`{s['branch']}`: {s['iterations']} proposals, {s['kept']} kept, best "
             f"{s['best_metric']}.", "", "| iter | status | metric | delta | description |",
             "|---:|---|---:|---:|---|"]
    for r in state.records:
        metric = "" if r.metric is None else f"{r.metric:.6f}"
        delta = "" if r.delta is None else f"{r.delta:+.6f}"
        lines.append(f"| {r.iteration} | {r.status} | {metric} | {delta} | {r.description} |")
    return "\n".join(lines)


def commit_message(rec, metric) -> str:
    """An attempt's commit message: the description as subject, the numbers, then trailers."""
    before = "n/a" if rec.best_before is None else f"{rec.best_before:.6f}"
    after = "n/a" if rec.metric is None else f"{rec.metric:.6f}"
    body = f"{metric.name} {before} -> {after} ({rec.status}: {rec.reason})"
    trailers = [f"Autoresearch-Iteration: {rec.iteration}",
                f"Autoresearch-Status: {rec.status}",
                f"Autoresearch-Metric: {metric.name} ({metric.direction})",
                f"Autoresearch-Before: {before}", f"Autoresearch-After: {after}",
                f"Autoresearch-Runs: {len(rec.samples)}",
                f"Autoresearch-MLflow-Run: {rec.run_id}"]
    return f"{rec.description}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def progress_line(rec, metric, total: int) -> str:
    """One line per iteration on the console; the change shown in the metric's own sign."""
    value = "" if rec.metric is None else f"{metric.name} {rec.metric:.6f}"
    change = ""
    if rec.delta is not None:
        change = f" ({-rec.delta if metric.direction == 'minimize' else rec.delta:+.6f})"
    runs = f", {len(rec.samples)} runs" if len(rec.samples) > 1 else ""
    why = f", {rec.reason}" if rec.reason and rec.reason != "baseline" else ""
    return (f"[{rec.iteration:>3}/{total}] {rec.status:<9} {value}{change}  {rec.description}"
            f"  ({rec.wall_s:.1f}s{runs}{why})")
