"""`autoresearch report`: a tag's night as a markdown table, an HTML page and a picture.

Everything is read from results.tsv, so it works on a running tag as well as a finished
one (and on a results.tsv copied off the machine). The picture, progress.png: every
iteration as a point over its number, kept changes highlighted and labelled, discarded
ones faint, failures marked on the axis, the running best as a step line and the
baseline's run-to-run noise (mean +- sd of its runs) shaded."""
from __future__ import annotations

import base64
import csv
import html
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from loop.errors import UsageError
from loop.words import BASELINE, FAILURES, UNPROTECTED, number_text

KEPT_COLOR = "#1b9e3e"
DISCARD_COLOR = "#7f7f7f"
FAIL_COLOR = "#d62728"
BEST_COLOR = "#1f5fbf"
BAND_COLOR = "#f2b134"
BAND_ALPHA = 0.35
FIGSIZE, DPI = (12, 6.5), 100            # 1200 x 650 pixels


@dataclass
class Row:
    iteration: int
    status: str
    description: str
    metric: float | None
    gain: float | None
    runs: int
    spread: float | None
    reason: str = ""


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def read_rows(results: Path) -> tuple[str, list[Row]]:
    """The metric's name and one Row per iteration (a failed run's metric is None)."""
    if not results.exists():
        raise UsageError(f"{results} does not exist yet (the baseline has not finished)")
    with open(results, newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        metric = (reader.fieldnames or ["", ""])[1]
        gain_col = "gain" if "gain" in (reader.fieldnames or []) else "delta"
        rows = []
        for r in reader:
            failed = r["status"] in FAILURES
            rows.append(Row(int(r["iteration"]), r["status"], r["description"],
                            None if failed else _float(r[metric]), _float(r.get(gain_col)),
                            int(r.get("runs") or 0), _float(r.get("spread")),
                            r.get("reason") or ""))
    return metric, rows


def _unprotected(state_dir: Path) -> bool:
    """Whether the journal says no protected grader computed the metric."""
    journal = state_dir / "journal.jsonl"
    if not journal.exists():
        return False
    with open(journal) as f:
        return json.loads(f.readline() or "{}").get("protected") is False


def _direction(state_dir: Path, rows: list[Row]) -> str:
    """From the journal's first line when there is one, else from how keeps moved."""
    journal = state_dir / "journal.jsonl"
    if journal.exists():
        with open(journal) as f:
            first = json.loads(f.readline() or "{}")
        if first.get("direction") in ("minimize", "maximize"):
            return first["direction"]
    kept = [r.metric for r in rows if r.status == "keep" and r.metric is not None]
    return "maximize" if len(kept) > 1 and kept[-1] > kept[0] else "minimize"


def markdown(tag: str, metric: str, direction: str, rows: list[Row], png: str | None,
             unprotected: bool = False) -> str:
    changes = [r for r in rows if r.description != BASELINE]
    kept = [r for r in changes if r.status == "keep"]
    best = _running_best(rows, direction)[-1] if rows else None
    base = _baseline(rows)
    lines = [f"# autoresearch report: {tag}", "",
             f"Metric `{metric}` ({direction}); {len(changes)} iterations after the baseline, "
             f"{len(kept)} kept; baseline {number_text(base.metric) if base else 'n/a'}, "
             f"best {number_text(best)}. Gain = improvement over the best before, in `{metric}` "
             f"units, positive = better."
             + (f" **{UNPROTECTED}**: the numbers are what the edited script printed; no "
                f"protected grader computed them (docs/tasks.md)." if unprotected else ""), ""]
    if png:
        lines += [f"![progress]({png})", ""]
    lines += ["| iter | status | metric | gain | runs | description | reason |",
              "|---:|---|---:|---:|---:|---|---|"]
    for r in rows:
        gain = "" if r.gain is None else f"{r.gain:+.4g}"
        metric_text = "" if r.metric is None else number_text(r.metric)
        shown = "baseline" if r.description == BASELINE and r.status == "keep" else r.status
        lines.append(f"| {r.iteration} | {shown} | {metric_text} | {gain} | {r.runs} "
                     f"| {r.description.replace('|', '/')} | {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


def _baseline(rows: list[Row]) -> Row | None:
    """The measured baseline (a failed first try is redone under the same description)."""
    return next((r for r in rows if r.description == BASELINE and r.status == "keep"
                 and r.metric is not None), None)


def _value(r: Row) -> float:
    """A measured row's metric (callers keep only those; nan says one slipped through)."""
    return r.metric if r.metric is not None else math.nan


def _running_best(rows: list[Row], direction: str) -> list[float | None]:
    """The best after each iteration: the last kept state's value (the judge's, not a min)."""
    best, out = None, []
    for r in rows:
        if r.status == "keep" and r.metric is not None:
            best = r.metric
        out.append(best)
    return out


def plot(path: Path, tag: str, metric: str, direction: str, rows: list[Row]) -> Path:
    import matplotlib.pyplot as plt
    fig = figure(tag, metric, direction, rows)
    try:
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def figure(tag: str, metric: str, direction: str, rows: list[Row]):
    """progress.png's figure (the caller closes it)."""
    import matplotlib
    matplotlib.use("Agg")                       # no display on a server or in CI
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    try:
        measured = [r for r in rows if r.metric is not None]
        _draw_band(ax, rows)
        low, high = _y_range(rows, direction)
        _draw_discarded(ax, measured, low, high)
        ax.set_ylim(low, high)
        _draw_best_and_kept(ax, rows, measured, direction)
        _draw_unmeasured(ax, rows)
        _label(ax, tag, metric, direction, rows)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _draw_band(ax, rows: list[Row]) -> None:
    """The baseline's noise: its mean +- sd, shaded."""
    base = _baseline(rows)
    if base is not None and base.metric is not None and base.spread:
        ax.axhspan(base.metric - base.spread, base.metric + base.spread, color=BAND_COLOR,
                   alpha=BAND_ALPHA, lw=0, label="baseline noise (mean +- sd)")


def _draw_discarded(ax, measured: list[Row], low: float, high: float) -> None:
    """Discarded runs: grey dots, and marks at the edge for those off the scale."""
    discarded = [r for r in measured if r.status != "keep"]
    inside = [r for r in discarded if low <= _value(r) <= high]
    if inside:
        ax.scatter([r.iteration for r in inside], [_value(r) for r in inside], s=30,
                   color=DISCARD_COLOR, alpha=0.35, label="discarded", zorder=2)
    # far-off values would flatten the story: drawn at the edge, pointing their way
    for edge, marker, off in ((high, "^", lambda v: v > high), (low, "v", lambda v: v < low)):
        out = [r.iteration for r in discarded if off(r.metric)]
        if out:
            ax.scatter(out, [edge] * len(out), s=40, marker=marker, color=DISCARD_COLOR,
                       alpha=0.35, clip_on=False, zorder=2, label="discarded, off the scale")


def _draw_best_and_kept(ax, rows: list[Row], measured: list[Row], direction: str) -> None:
    """The best so far as a step line, each kept change a dot with its description."""
    best = _running_best(rows, direction)
    steps = [(r.iteration, b) for r, b in zip(rows, best) if b is not None]
    if steps:
        ax.step([s[0] for s in steps], [s[1] for s in steps], where="post", color=BEST_COLOR,
                lw=2, label="best so far", zorder=3)
    kept = [r for r in measured if r.status == "keep"]
    ax.scatter([r.iteration for r in kept], [_value(r) for r in kept], s=110,
               color=KEPT_COLOR, edgecolors="black", linewidths=0.8, label="kept", zorder=4)
    for r in kept:
        text = r.description if len(r.description) <= 42 else r.description[:40] + "..."
        ax.annotate(text, (r.iteration, r.metric), textcoords="offset points",
                    xytext=(6, 8), fontsize=8, rotation=12, zorder=5)


def _draw_unmeasured(ax, rows: list[Row]) -> None:
    """Iterations with no metric, on the x axis: failures as red crosses, discards that
    never ran as hollow marks."""
    failed = [r for r in rows if r.metric is None and r.status in FAILURES]
    if failed:   # on the x axis: they have no metric to place them by
        ax.scatter([r.iteration for r in failed], [0] * len(failed), marker="x", s=70,
                   color=FAIL_COLOR, transform=ax.get_xaxis_transform(), clip_on=False,
                   label="failed (crash, timeout, ...)", zorder=5)
    # a discard that never ran (e.g. the loop stopped before it could be measured again)
    # is no failure: a hollow mark on the axis, not a red cross
    unrun = [r for r in rows if r.metric is None and r.status not in FAILURES]
    if unrun:
        ax.scatter([r.iteration for r in unrun], [0] * len(unrun), marker="o", s=40,
                   facecolors="none", edgecolors=DISCARD_COLOR,
                   transform=ax.get_xaxis_transform(), clip_on=False,
                   label="discarded without a run", zorder=5)


def _label(ax, tag: str, metric: str, direction: str, rows: list[Row]) -> None:
    """Axes, title, limits, grid and legend."""
    from matplotlib.ticker import MaxNLocator
    ax.set_xlabel("iteration")
    better = "lower" if direction == "minimize" else "higher"
    ax.set_ylabel(f"{metric} ({better} is better)")
    changes = [r for r in rows if r.description != BASELINE]
    ax.set_title(f"autoresearch {tag}: {len(changes)} iterations after the baseline, "
                 f"{sum(r.status == 'keep' for r in changes)} kept")
    if rows:
        ax.set_xlim(-0.5, max(r.iteration for r in rows) + 1.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # iterations are whole
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)


def _y_range(rows: list[Row], direction: str) -> tuple[float, float]:
    """The range worth looking at: the kept values and the noise band, plus as much again
    either side; discarded values beyond that would only squash it."""
    core = [r.metric for r in rows if r.status == "keep" and r.metric is not None]
    base = _baseline(rows)
    if base is not None and base.metric is not None and base.spread:
        core += [base.metric - base.spread, base.metric + base.spread]
    others = [r.metric for r in rows if r.metric is not None]
    if not core:
        core = others or [0.0, 1.0]
    span = (max(core) - min(core)) or abs(max(core)) * 0.1 or 1.0
    low, high = min(core) - span, max(core) + span
    within = [v for v in others if low <= v <= high] + core
    pad = 0.08 * ((max(within) - min(within)) or span)
    return min(within) - pad, max(within) + pad


def _inline(text: str) -> str:
    """Markdown text as HTML: escaped, `code` spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def html_page(tag: str, md_text: str, png: Path) -> str:
    image = base64.b64encode(png.read_bytes()).decode()
    table = [line for line in md_text.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    head, body = (cells[0], cells[2:]) if len(cells) > 1 else ([], [])
    rows = "\n".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
                     for row in body)
    intro = _inline(md_text.splitlines()[2]) if len(md_text.splitlines()) > 2 else ""
    return (f"<!doctype html><meta charset='utf-8'><title>autoresearch {html.escape(tag)}"
            f"</title><h1>autoresearch report: {html.escape(tag)}</h1><p>{intro}</p>"
            f"<img alt='progress' src='data:image/png;base64,{image}' style='max-width:100%'>"
            f"<table border='1' cellpadding='4'><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + f"</tr>\n{rows}</table>\n")


def log_to_mlflow(state_dir: Path, png: Path) -> str | None:
    """Attach the picture to the tag's parent MLflow run; a warning, never an error."""
    journal = state_dir / "journal.jsonl"
    if not journal.exists():
        return "no journal: not logged to MLflow"
    with open(journal) as f:
        start = json.loads(f.readline() or "{}")
    parent, uri = start.get("parent_run_id"), start.get("tracking_uri")
    for line in journal.read_text().splitlines():      # a fresh parent after a store reset
        event = json.loads(line)
        if event.get("event") == "start_tracking":
            parent = event.get("parent_run_id", parent)
    if not parent or not uri:
        return "no MLflow parent run recorded: not logged"
    try:
        import logging
        from mlflow.tracking import MlflowClient
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        MlflowClient(uri).log_artifact(parent, str(png))
    except Exception as exc:
        return f"logging progress.png to MLflow failed ({type(exc).__name__}: {exc})"
    return None


def build(state_dir: Path, tag: str, fmt: str = "md", mlflow: bool = True) -> tuple[str, list[str]]:
    """What `report` prints for `fmt` (md | html | png) and the notes for stderr.
    Always writes progress.png; html also writes report.html beside it."""
    metric, rows = read_rows(state_dir / "results.tsv")
    direction = _direction(state_dir, rows)
    png = plot(state_dir / "progress.png", tag, metric, direction, rows)
    notes = []
    if mlflow:
        problem = log_to_mlflow(state_dir, png)
        if problem:
            notes.append(f"note: {problem}")
    md_text = markdown(tag, metric, direction, rows, png.name, _unprotected(state_dir))
    if fmt == "png":
        return str(png), notes
    if fmt == "html":
        page = state_dir / "report.html"
        page.write_text(html_page(tag, md_text, png))
        return str(page), notes
    return md_text, notes + [f"wrote {png}"]

