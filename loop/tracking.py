"""Projections of the journal: MLflow runs and results.tsv. Decides nothing.

MLflow layout: one experiment per task (`autoresearch/<task>`), one parent run per tag,
one nested run per iteration (named `iter-0007`)."""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from statistics import pstdev

from loop.journal import Record

TSV_EXTRA = ["iteration", "delta", "runs", "spread", "reason", "wall_s", "attempt_ref",
             "mlflow_run_id"]


def _fmt(x, digits=6) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.{digits}f}"
    return str(x)


def tsv_row(rec: Record) -> list[str]:
    runs = len(rec.samples)
    spread = pstdev(rec.samples) if runs > 1 else None
    clean = lambda s: " ".join(str(s).split())  # noqa: E731 - tabs/newlines would break rows
    return [rec.commit[:7], _fmt(rec.metric) if rec.metric is not None else "0.000000",
            _fmt(rec.memory_gb, 1) if rec.memory_gb is not None else "0.0", rec.status,
            clean(rec.description), str(rec.iteration), _fmt(rec.delta), str(runs),
            _fmt(spread), clean(rec.reason), _fmt(rec.wall_s, 1), rec.attempt_ref, rec.run_id]


def write_results(path: Path, metric_name: str, records: list[Record]) -> None:
    """Rewrite results.tsv from the records (atomically: a crash never leaves half a file)."""
    header = ["commit", metric_name, "memory_gb", "status", "description", *TSV_EXTRA]
    lines = ["\t".join(header)] + ["\t".join(tsv_row(r)) for r in records]
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def append_result(path: Path, metric_name: str, rec: Record, all_records: list[Record]) -> None:
    if not path.exists():
        write_results(path, metric_name, all_records)
        return
    with open(path, "a") as f:
        f.write("\t".join(tsv_row(rec)) + "\n")


class Tracker:
    """MLflow through its client API (no global active-run state)."""

    def __init__(self, uri: str | None, experiment: str):
        import logging
        import mlflow
        from mlflow.tracking import MlflowClient
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # no table-creation chatter
        # No global state: the URI goes to our client only (default: $MLFLOW_TRACKING_URI,
        # else MLflow's own default, mlflow.db in the working directory).
        self.uri = uri or mlflow.get_tracking_uri()
        self.client = MlflowClient(self.uri)
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_id = (found.experiment_id if found else
                              self.client.create_experiment(experiment))
        self.parent_id: str | None = None

    def open_parent(self, tag: str, run_id: str | None, params: dict, tags: dict) -> str:
        if run_id:
            try:
                self.client.update_run(run_id, status="RUNNING")
                self._batch(run_id, tags=tags)   # e.g. this start's sandbox state
                self.parent_id = run_id
                return run_id
            except Exception:
                pass  # the store was reset: start a fresh parent run
        run = self.client.create_run(self.experiment_id, run_name=tag,
                                     tags={"autoresearch.tag": tag, **tags})
        self.parent_id = run.info.run_id
        self._batch(self.parent_id, params=params)
        return self.parent_id

    def start_iteration(self, tag: str, iteration: int) -> str:
        run = self.client.create_run(
            self.experiment_id, run_name=f"iter-{iteration:04d}",
            tags={"mlflow.parentRunId": self.parent_id, "autoresearch.tag": tag,
                  "iteration": str(iteration)})
        return run.info.run_id

    def finish_iteration(self, rec: Record, metric_name: str, params: dict, tags: dict,
                         artifacts: dict[str, str | Path], kept_count: int) -> None:
        metrics = {"delta": rec.delta, "wall_s": rec.wall_s, "memory_gb": rec.memory_gb,
                   "runs": float(len(rec.samples)), "lines_added": float(rec.lines_added),
                   "lines_removed": float(rec.lines_removed), metric_name: rec.metric,
                   f"best_{metric_name}": rec.best_after}
        metrics.update({f"judge.{k}": v for k, v in rec.stats.items()})
        metrics.update({f"llm.{k}": v for k, v in rec.usage.items()})
        per_run = [(f"{metric_name}_run", s, i) for i, s in enumerate(rec.samples)]
        self._batch(rec.run_id, metrics=metrics, params=params, series=per_run,
                    tags={"status": rec.status, "decision": rec.status,
                          "reason": rec.reason[:4000], "description": rec.description[:4000],
                          "git.commit": rec.commit, "git.attempt_ref": rec.attempt_ref,
                          **tags})
        self._artifacts(rec.run_id, artifacts)
        self.client.set_terminated(rec.run_id, "FAILED" if rec.status == "crash" else "FINISHED")
        self._batch(self.parent_id, metrics={f"best_{metric_name}": rec.best_after,
                                             "kept": kept_count}, step=rec.iteration)

    def _artifacts(self, run_id: str, artifacts: dict[str, str | Path]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in artifacts.items():
                path = Path(tmp) / name
                if isinstance(content, Path):
                    if not content.exists():
                        continue
                    shutil.copyfile(content, path)
                else:
                    path.write_text(content)
                self.client.log_artifact(run_id, str(path))

    def _batch(self, run_id, metrics=None, params=None, tags=None, step=0, series=()) -> None:
        import time
        from mlflow.entities import Metric, Param, RunTag
        now = int(time.time() * 1000)
        points = [(k, v, step) for k, v in (metrics or {}).items()] + list(series)
        ms = [Metric(k, float(v), now, s) for k, v, s in points
              if isinstance(v, (int, float)) and math.isfinite(float(v))]
        ps = [Param(k, str(v)[:6000]) for k, v in (params or {}).items() if v is not None]
        ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()
              if v is not None and not k.startswith("_")]
        if ps:
            existing = self.client.get_run(run_id).data.params
            ps = [p for p in ps if p.key not in existing]  # params are write-once in MLflow
        self.client.log_batch(run_id, metrics=ms, params=ps, tags=ts)

    def log_best(self, metric_name: str, value: float, runs: int, step: int) -> None:
        """A re-measurement of the best state moved its mean: log it on the parent run."""
        self._batch(self.parent_id, metrics={f"best_{metric_name}": value,
                                             "best_runs": runs}, step=step)

    def abandon(self, run_id: str) -> None:
        """An iteration cut off mid-way: mark and hide its run (it is redone on resume)."""
        try:
            self.client.set_tag(run_id, "status", "interrupted")
            self.client.set_terminated(run_id, "KILLED")
            self.client.delete_run(run_id)
        except Exception:
            pass

    def close(self, status: str = "FINISHED") -> None:
        if self.parent_id:
            self.client.set_terminated(self.parent_id, status)
