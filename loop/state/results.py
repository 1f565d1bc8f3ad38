"""results.tsv: one row per iteration, written from the journal's records. Decides nothing.

The journal is the truth; this file is a projection of it that a person (or a spreadsheet)
reads: rewritten whole and atomically, or appended a row at a time."""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from statistics import pstdev

from loop.record import Record
from loop.untrusted import one_line

TSV_EXTRA = ["iteration", "gain", "runs", "spread", "reason", "wall_s", "attempt_ref",
             "mlflow_run_id", "throughput", "proposal_s", "proposer"]


def _fmt(x, digits=6) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.{digits}f}"
    return str(x)


def tsv_row(rec: Record) -> list[str]:
    runs = len(rec.samples) + rec.stats.get("stopped_runs", 0)   # a stopped run ran too
    spread = pstdev(rec.samples) if len(rec.samples) > 1 else None
    clean = lambda s: one_line(s, 4000)  # noqa: E731 - tabs, newlines, ESC would break rows
    return [rec.commit[:7], _fmt(rec.metric),
            _fmt(rec.memory_gb, 1), rec.status,         # blank: not measured (a failure)
            clean(rec.description), str(rec.iteration), _fmt(rec.delta), str(runs),
            _fmt(spread), clean(rec.reason), _fmt(rec.wall_s, 1), rec.attempt_ref, rec.run_id,
            ",".join("" if x is None else f"{x:g}" for x in rec.throughput),  # per run
            _fmt(rec.usage.get("proposal_s"), 1),      # blank: nothing was proposed
            rec.proposer]


def results_text(metric_name: str, records: list[Record]) -> str:
    header = ["commit", metric_name, "memory_gb", "status", "description", *TSV_EXTRA]
    lines = ["\t".join(header)] + ["\t".join(tsv_row(r)) for r in records]
    return "\n".join(lines) + "\n"


def write_results(path: Path, metric_name: str, records: list[Record]) -> None:
    """Rewrite results.tsv from the records (atomically: a crash never leaves half a file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results.")
    with os.fdopen(fd, "w") as f:
        f.write(results_text(metric_name, records))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)    # mkstemp's 0600 would hide the file from the group
    os.replace(tmp, path)


def append_result(path: Path, metric_name: str, rec: Record, all_records: list[Record]) -> None:
    if not path.exists():
        write_results(path, metric_name, all_records)
        return
    with open(path, "a") as f:
        f.write("\t".join(tsv_row(rec)) + "\n")
