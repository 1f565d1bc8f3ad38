"""The MLflow projection of the journal: one run per iteration, written in the background,
never in the loop's way. Decides nothing.

MLflow layout: one experiment per task (`autoresearch/<task>`), one parent run per tag,
one nested run per iteration (named `iter-0007`). results.tsv is loop/state/results.py's;
the store's URI and opening loop/state/store.py's."""
from __future__ import annotations

import math
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop.record import Record
from loop.state.store import artifact_location, create_store, quiet_mlflow
from loop.untrusted import one_line
from loop.words import Status


class Tracker:
    """MLflow through its client API (no global active-run state), never in the loop's way.

    The store is opened in a background thread (importing MLflow and opening a store takes
    seconds) while the loop starts. Every write is a job run in order; when the store is not
    open yet, or fails (e.g. SQLite locked by a busy `mlflow ui`), jobs wait and are retried
    with backoff, and the loop goes on: the journal and results.tsv are the truth, MLflow
    catches up. An iteration whose run could not be created at `begin` gets a `pending-`
    id and its run is created when it is logged; `on_tracked(iteration, run_id)` journals
    each iteration once it is in MLflow. MLflow's own HTTP retries are off (this queue
    retries) and its requests time out after HTTP_TIMEOUT_S, so a tracking server that goes
    away never holds the loop, nor its end, for minutes."""

    RETRY_S = (5.0, 15.0, 30.0, 60.0, 120.0)   # waits after successive failures
    OPEN_WAIT_S = 60.0                          # how long an iteration waits for the store

    def __init__(self, uri: str, experiment: str, tag: str, home: str, *, parent_run_id=None,
                 params=None, parent_tags=None, known_run_ids=(), on_parent=None,
                 on_tracked=None, warn=print):
        self.uri, self.experiment, self.tag, self.home = uri, experiment, tag, home
        self.parent_id: str | None = parent_run_id
        self._params, self._parent_tags = params or {}, parent_tags or {}
        self._known = set(known_run_ids)
        self._on_parent, self._on_tracked, self._warn = on_parent, on_tracked, warn
        self._jobs: list[tuple[str, Callable[[], object]]] = []   # (what it logs, the write)
        self._ids: dict[str, str] = {}            # pending id -> the run created for it
        self._failures, self._retry_at, self._down = 0, 0.0, False
        self.client: Any = None   # an MlflowClient once open (mlflow is imported late)
        self._started = False
        self._opened = threading.Event()
        self._open_error: Exception | None = None
        threading.Thread(target=self._open, name="mlflow-open", daemon=True).start()

    # -- opening (background thread) -----------------------------------------------------
    def _open(self) -> None:
        try:
            quiet_mlflow()
            from mlflow.tracking import MlflowClient
            create_store(self.uri)
            client = MlflowClient(self.uri)
            self.experiment_id = self._experiment_id(client)
            self.client = client
            self._open_parent()
            self._close_orphans()
        except Exception as exc:              # the store is unusable now; retried later
            self.client = None
            self._open_error = exc
        finally:
            self._opened.set()

    def _experiment_id(self, client) -> str:
        """The experiment's id, made if new; another night starting on the same store may
        make it first (then ours fails on the name, and theirs is found)."""
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return client.create_experiment(self.experiment,
                                            artifact_location=artifact_location(self.uri))
        except Exception:
            found = client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return found.experiment_id

    def _open_parent(self) -> None:
        if self.parent_id:
            try:
                self.client.update_run(self.parent_id, status="RUNNING")
                self._batch(self.parent_id, tags=self._parent_tags)  # this start's sandbox state
                return
            except Exception:
                pass  # the store was reset: start a fresh parent run
        run = self.client.create_run(self.experiment_id, run_name=self.tag,
                                     tags={**self._tags(), **self._parent_tags})
        self._batch(run.info.run_id, params=self._params)
        self.parent_id = run.info.run_id
        if self._on_parent:
            self._on_parent(self.parent_id)

    def _tags(self) -> dict:
        return {"autoresearch.tag": self.tag, "autoresearch.home": self.home}

    def _close_orphans(self) -> None:
        """Runs of this tag left RUNNING by a kill between their creation and the journal's
        record of them (an iteration's run, or a parent at the first start): the journal
        does not know them, so they are duplicates: ended and hidden."""
        runs = self.client.search_runs(
            [self.experiment_id], f"tags.`autoresearch.tag` = '{self.tag}' and "
            f"tags.`autoresearch.home` = '{self.home}' and attributes.status = 'RUNNING'",
            max_results=1000)
        for run in runs:
            if run.info.run_id not in self._known and run.info.run_id != self.parent_id:
                self._discard(run.info.run_id)

    def _discard(self, run_id: str) -> None:
        if self.client.get_run(run_id).info.lifecycle_stage == "deleted":
            return            # already hidden (found as an orphan at start, then abandoned)
        self.client.set_tag(run_id, "status", "interrupted")
        self.client.set_terminated(run_id, "KILLED")
        self.client.delete_run(run_id)

    # -- the job queue -----------------------------------------------------------------
    def _submit(self, job, what: str) -> None:
        self._jobs.append((what, job))
        self._drain()

    def _ready(self) -> bool:
        if not self._opened.is_set():
            return False
        if self.client is None:                     # opening failed: try again later
            if time.monotonic() < self._retry_at:
                return False
            self._opened.clear()
            threading.Thread(target=self._open, name="mlflow-open", daemon=True).start()
            self._opened.wait(self.RETRY_S[0])
            if self.client is None:
                self._failed(self._open_error)
                return False
        return time.monotonic() >= self._retry_at

    def _drain(self) -> None:
        while self._jobs and self._ready():
            try:
                self._jobs[0][1]()
            except Exception as exc:
                self._failed(exc)
                return
            self._jobs.pop(0)
            if self._down:
                self._down, self._failures = False, 0
                self._warn("MLflow is reachable again; tracking caught up")

    def _failed(self, exc) -> None:
        wait = self.RETRY_S[min(self._failures, len(self.RETRY_S) - 1)]
        self._failures += 1
        self._retry_at = time.monotonic() + wait
        if not self._down:
            self._down = True
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            self._warn(f"warning: MLflow store unavailable ({type(exc).__name__}: {first}); "
                       f"the loop goes on, and MLflow catches up from the journal")

    # -- what the engine calls -----------------------------------------------------------
    def start_iteration(self, tag: str, iteration: int) -> str:
        """The iteration's run id: a new MLflow run, or a pending id when MLflow is busy.
        Only the first iteration of a start does not wait for the store to open: it runs
        while MLflow is imported and opened."""
        if self._started:
            self._opened.wait(self.OPEN_WAIT_S)
        self._started = True
        self._drain()
        if not self._jobs and self._ready():
            try:
                run = self.client.create_run(self.experiment_id, run_name=f"iter-{iteration:04d}",
                                             tags=self._child_tags(iteration))
                return run.info.run_id
            except Exception as exc:
                self._failed(exc)
        return f"pending-{uuid.uuid4().hex}"

    def resolve(self, run_id: str, iteration: int) -> str:
        """A pending run id made real if MLflow is open by now (before the commit message
        quotes it); else unchanged. A run created here and cut off by a kill before the
        journal's `end` is an orphan, ended at the next start."""
        if not run_id.startswith("pending-") or not self._opened.is_set():
            return run_id
        self._drain()
        if self._jobs or not self._ready():
            return run_id
        try:
            real = self.client.create_run(self.experiment_id, run_name=f"iter-{iteration:04d}",
                                          tags=self._child_tags(iteration)).info.run_id
        except Exception as exc:
            self._failed(exc)
            return run_id
        self._ids[run_id] = real
        return real

    def _child_tags(self, iteration: int) -> dict:
        return {"mlflow.parentRunId": self.parent_id, "iteration": str(iteration),
                **self._tags()}

    def finish_iteration(self, rec: Record, metric_name: str, params: dict, tags: dict,
                         artifacts: dict[str, str | Path], kept_count: int) -> None:
        artifacts = {k: (v if isinstance(v, Path) else str(v)) for k, v in artifacts.items()}
        self._submit(lambda: self._finish(rec, metric_name, params, tags, artifacts,
                                          kept_count), f"iteration {rec.iteration}")

    def _finish(self, rec, metric_name, params, tags, artifacts, kept_count) -> None:
        run_id = self._ids.get(rec.run_id, rec.run_id)
        if run_id.startswith("pending-") or not run_id:
            self._drop_partial(rec.iteration)     # a catch-up cut off by a kill
            run_id = self.client.create_run(self.experiment_id,
                                            run_name=f"iter-{rec.iteration:04d}",
                                            tags=self._child_tags(rec.iteration)).info.run_id
            self._ids[rec.run_id] = run_id
        metrics = {"gain": rec.delta, "wall_s": rec.wall_s, "memory_gb": rec.memory_gb,
                   "runs": float(len(rec.samples)), "lines_added": float(rec.lines_added),
                   "lines_removed": float(rec.lines_removed), metric_name: rec.metric,
                   f"best_{metric_name}": rec.best_after,
                   "proposal_s": rec.usage.get("proposal_s")}
        metrics.update({f"judge.{k}": v for k, v in rec.stats.items()})
        metrics.update({f"llm.{k}": v for k, v in rec.usage.items()})
        per_run = [(f"{metric_name}_run", s, i) for i, s in enumerate(rec.samples)]
        per_run += [("throughput_run", x, i) for i, x in enumerate(rec.throughput) if x is not None]
        self._batch(run_id, metrics=metrics, params=params, series=per_run,
                    tags={"status": rec.status, "decision": rec.status,
                          "reason": one_line(rec.reason, 4000),
                          "description": one_line(rec.description, 4000),
                          "git.commit": rec.commit, "git.attempt_ref": rec.attempt_ref,
                          **tags})
        self._artifacts(run_id, artifacts)
        self.client.set_terminated(run_id, "FAILED" if rec.status == Status.CRASH else "FINISHED")
        self._batch(self.parent_id, metrics={f"best_{metric_name}": rec.best_after,
                                             "kept": kept_count}, step=rec.iteration)
        if self._on_tracked:
            self._on_tracked(rec.iteration, run_id)

    def _drop_partial(self, iteration: int) -> None:
        runs = self.client.search_runs(
            [self.experiment_id], f"tags.`autoresearch.tag` = '{self.tag}' and "
            f"tags.`autoresearch.home` = '{self.home}' and tags.iteration = '{iteration}'")
        for run in runs:
            if run.info.run_id not in self._known and run.info.run_id != self.parent_id:
                self._discard(run.info.run_id)

    def _artifacts(self, run_id: str, artifacts: dict[str, str | Path]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in artifacts.items():
                path = Path(tmp) / name
                if isinstance(content, Path):
                    if not content.exists():
                        continue
                    shutil.copyfile(content, path)
                else:
                    path.write_text(content, errors="backslashreplace")  # a lone surrogate
                self.client.log_artifact(run_id, str(path))

    def _batch(self, run_id, metrics=None, params=None, tags=None, step=0, series=()) -> None:
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
        self._submit(lambda: self._batch(self.parent_id, metrics={
            f"best_{metric_name}": value, "best_runs": runs}, step=step), "the best's mean")

    def abandon(self, run_id: str) -> None:
        """An iteration cut off mid-way: mark and hide its run (it is redone on resume)."""
        if run_id and not run_id.startswith("pending-"):
            self._known.discard(run_id)
            self._submit(lambda: self._discard_quietly(run_id), "an abandoned run")

    def _discard_quietly(self, run_id: str) -> None:
        try:
            self._discard(run_id)
        except Exception as exc:
            if "not found" not in str(exc).lower() and "does not exist" not in str(exc).lower():
                raise

    def close(self, status: str = "FINISHED", wait_s: float = 30.0) -> None:
        """End the parent run after a last try at what is still queued, `wait_s` at most in
        all: what is left is said in one line and logged at the next start (the journal
        knows which iterations are not in MLflow)."""
        deadline = time.monotonic() + wait_s
        self._opened.wait(wait_s)
        self._retry_at = 0.0
        end_parent = lambda: self.parent_id and self.client.set_terminated(  # noqa: E731
            self.parent_id, status)
        self._jobs.append(("the parent run's end", end_parent))
        # in a thread of its own: a write that hangs (a server that accepts and never
        # answers) is given up at the deadline, not waited for
        last_try = threading.Thread(target=self._drain, name="mlflow-close", daemon=True)
        last_try.start()
        last_try.join(max(0.0, deadline - time.monotonic()))
        left = [what for what, _ in list(self._jobs)]
        if not left:
            return
        queued = [w for w in left if w != "the parent run's end"]
        self._warn(f"note: MLflow store still unavailable ({self.uri}); "
                   + (f"{len(queued)} writes queued ({_summary(queued)}), logged at the next "
                      f"start" if queued else "the parent run stays RUNNING until the next start"))
        if not self._down and not last_try.is_alive() and self.client is not None:
            try:              # the parent run is not left RUNNING for what another start redoes
                end_parent()
            except Exception:
                pass


def _summary(labels: list[str]) -> str:
    """`iterations 3, 4, 7 and the best's mean`: what is queued, in one short phrase."""
    numbers = [w.split()[1] for w in labels if w.startswith("iteration ")]
    others = sorted({w for w in labels if not w.startswith("iteration ")})
    parts = ([("iteration " if len(numbers) == 1 else "iterations ") + ", ".join(numbers[:12])
              + (", ..." if len(numbers) > 12 else "")] if numbers else []) + others
    return " and ".join(parts)
