"""finalize's runs in MLflow, as a night's are: a parent run `finalize/<tag>` in the night's
experiment and store, one child run per comparison (the night's gain re-measured, each
leave-one-out version, each check of the branch) with its effect, interval, pairs and the
runs' values by seed, the verdicts as tags, the report as artifacts. A projection of
finalize.jsonl, written once at the end: a repeated finalize replaces its own runs (found by
their tags), so the store never holds two. Decides nothing; a store that cannot be written
is one line, never a failed finalize (the journal and the report are the truth)."""
from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path

from loop.state.store import artifact_location, create_store, quiet_mlflow, resolve_uri

TAG = "autoresearch.finalize"       # not autoresearch.tag: the night's start ends its orphans


def where(config, start: dict, task_name: str) -> tuple[str, str]:
    """The night's store and experiment (the config's, else what the night's start wrote)."""
    uri = resolve_uri(config.tracking.uri or start.get("tracking_uri"))
    experiment = config.tracking.experiment or start.get("experiment") \
        or f"autoresearch/{task_name}"
    return uri, experiment


def record(uri: str, experiment: str, tag: str, state_dir: Path, metric: str, kept,
           comps: list, checks: list, measured_runs, out) -> None:
    try:
        _record(uri, experiment, tag, state_dir, metric, kept, comps, checks, measured_runs)
    except Exception as exc:        # MLflow is a view: the journal and report stand
        out(f"note: finalize's runs not recorded in MLflow ({uri}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


def _record(uri, experiment, tag, state_dir, metric, kept, comps, checks, measured_runs) -> None:
    quiet_mlflow()
    from mlflow.tracking import MlflowClient
    create_store(uri)
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    exp = found.experiment_id if found else client.create_experiment(
        experiment, artifact_location=artifact_location(uri))
    home = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
    mine = {TAG: tag, "autoresearch.home": home}
    for old in client.search_runs([exp], f"tags.`{TAG}` = '{tag}' and "
                                         f"tags.`autoresearch.home` = '{home}'",
                                  max_results=10000):
        client.delete_run(old.info.run_id)      # a finalize done again replaces its runs
    gain = comps[0]
    parent = client.create_run(exp, run_name=f"finalize/{tag}", tags=mine)
    pid = parent.info.run_id
    verdicts = {k.name: k.verdict for k in kept}
    _log(client, pid, metrics={
        f"gain_{metric}": gain.est.mean, f"gain_{metric}_half": gain.est.half,
        "runs": measured_runs.runs, "kept_changes": len(kept),
        "matters": sum(v in ("matters", "likely", "unmeasured") for v in verdicts.values())},
        params={"branch": f"autoresearch/{tag}-final", "metric": metric},
        tags={f"verdict.{sha}": v for sha, v in verdicts.items()})
    for c in comps + checks:
        name = f"check {c.ref.commit[:7]}" if c.kind == "check" else c.name
        members = [k for k in kept if k.comparison is c]
        child = client.create_run(exp, run_name=name, tags={
            **mine, "mlflow.parentRunId": pid, "kind": c.kind,
            **({"verdict": ", ".join(f"{k.name} {k.verdict}" for k in members)}
               if members else {})})
        series = [(who, measured_runs.values.get((v.tree, k)), k)
                  for who, v in (("reference", c.ref), ("variant", c.variant))
                  for k in range(measured_runs.pairs(c)[1])]
        _log(client, child.info.run_id,
             metrics={"effect": c.est.mean, "effect_half": c.est.half,
                      "pairs": c.est.pairs, "helps": c.est.helps},
             params={"reference": c.ref.commit, "variant": c.variant.commit},
             series=[(f"{who}_{metric}", value, k) for who, value, k in series
                     if value is not None])
        client.set_terminated(child.info.run_id)
    for name in ("finalize.md", "finalize.html", "finalize.png"):
        if (state_dir / name).exists():
            client.log_artifact(pid, str(state_dir / name))
    client.set_terminated(pid)


def _log(client, run_id: str, metrics=None, params=None, tags=None, series=()) -> None:
    from mlflow.entities import Metric, Param, RunTag
    now = int(time.time() * 1000)
    points = [(k, v, 0) for k, v in (metrics or {}).items()] + list(series)
    ms = [Metric(k, float(v), now, s) for k, v, s in points
          if isinstance(v, (int, float)) and math.isfinite(float(v))]
    ps = [Param(k, str(v)) for k, v in (params or {}).items()]
    ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    client.log_batch(run_id, metrics=ms, params=ps, tags=ts)
