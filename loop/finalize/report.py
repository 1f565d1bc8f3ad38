"""finalize.md, finalize.html and finalize.png beside `report`'s files in the tag's state
folder: per kept commit its effect and verdict, the night's re-measured gain, the branch's
check. Returns the markdown's lines, which the console prints too. Decides nothing."""
from __future__ import annotations

import base64
import html
from pathlib import Path

VERDICTS = {"matters": "matters", "likely": "matters (likely: helps, within noise)",
            "unmeasured": "kept: not re-measured (run budget spent)",
            "noise": "dropped: noise", "harmful": "dropped: harmful",
            "night": "dropped: null by the night",
            "superseded": "dropped: superseded", "no-op": "dropped: no-op"}


def write_report(folder: Path, tag: str, metric: str, kept, gain, check, branch: str,
                 runs: int, notes: list[str], planned: int | None = None) -> list[str]:
    lines = markdown(tag, metric, kept, gain, check, branch, runs, notes, planned)
    (folder / "finalize.md").write_text("\n".join(lines) + "\n")
    png = _plot(folder / "finalize.png", tag, metric, kept, gain)
    (folder / "finalize.html").write_text(_html(tag, lines, png))
    return lines + [f"wrote {folder / 'finalize.md'}, finalize.html"
                    + (", finalize.png" if png else "")]


def markdown(tag, metric, kept, gain, check, branch, runs, notes, planned=None) -> list[str]:
    if gain.est.pairs:
        said = (f"Night's gain, re-measured: final vs start {gain.est.text(metric)} "
                f"({2 * gain.est.pairs} runs, paired on fresh seeds"
                f"{', run cap' if gain.capped else ''}); positive = the final code is better.")
    else:
        said = ("Night's gain: not re-measured (the run budget went to the verdicts); the "
                "night's own figures are in its report.")
    out = [f"# finalize {tag}", "", said, ""]
    out += ["| commit | hypothesis | night's gain | effect (left out) | verdict | pairs | "
            "rule's error rate |", "|---|---|---|---|---|---|---|"]
    for k in kept:
        c = k.comparison
        effect = "" if c is None else c.est.text()
        if c is not None and c.capped and not c.est.decided:
            effect += " (run cap)"
        runs_spent = 0 if c is None or not c.est.pairs else c.est.pairs
        if k.together:
            effect += f" with {', '.join(k.together)}"
        night = "" if k.night_gain is None else f"{k.night_gain:+.4g}"
        desc = k.description.replace("|", "\\|")
        verdict = VERDICTS.get(k.verdict, k.verdict) + (f" ({k.note})" if k.note else "")
        out.append(f"| {k.name} | {desc} | {night} | {effect} | {verdict} | {runs_spent} | "
                   f"{_error_rate(k)} |")
    kept_n = sum(1 for k in kept if k.verdict in ("matters", "likely", "unmeasured"))
    out += ["", f"Branch `{branch}`: {kept_n} of {len(kept)} kept changes, in their order."]
    if check is None:
        out.append("Its code is the final code's: it reproduces the final gain.")
    elif check.est.pairs == 0:
        out.append("Branch vs final code: not measured (run cap): whether it reproduces the "
                   "final gain is not known.")
    else:
        verdict = "does NOT reproduce the final gain (worse beyond noise)" \
            if check.est.sign < 0 else "reproduces the final gain (not worse beyond noise)"
        out.append(f"Branch vs final code: {check.est.text(metric)} ({2 * check.est.pairs} "
                   f"runs): it {verdict}.")
    by_night = sum(k.verdict == "night" for k in kept)
    out.append(f"Decided from the night's own attempts (no run): {by_night} of {len(kept)} "
               f"units, dropped as null (every setting they set moved the score within noise "
               f"in the night's attempts; loop/finalize/estimate.py, night_evidence).")
    out += [f"Runs made by finalize: {runs}"
            + (f" of {planned} planned" if planned is not None else "")
            + " (a run of the final code serves every comparison's pair on its seed).",
            "Error rates are the rule's at that comparison's pairs and noise "
            "(loop/finalize/estimate.py, group_call): for a unit dropped, the chance the rule "
            "drops a group worth one run's noise sd; for a unit kept, the chance it calls a "
            "group worth nothing `matters`."]
    out += [f"Note: {n}" for n in notes]
    return out


def _error_rate(k) -> str:
    c = k.comparison
    call = getattr(c, "call", None)
    if k.verdict == "night":
        return "no rate per night: measured on benchmarks (docs/performance.md)"
    if call is None or not call.verdict or k.verdict not in ("matters", "noise", "harmful"):
        return ""
    if "inferred" in k.note:
        return ""
    if k.verdict == "matters":
        return f"null kept ≤ {call.keep_null:.0%}"
    return f"1-sd unit lost ≤ {call.lose:.0%}"


def _plot(path: Path, tag: str, metric: str, kept, gain) -> Path | None:
    """Each kept commit's effect with its interval, the night's gain beside them."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [(f"{k.name} {k.verdict}", k.comparison.est) for k in kept
            if k.comparison is not None and k.comparison.est.mean is not None]
    rows.append(("final vs start", gain.est))
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.5), dpi=100)
    for y, (_, est) in enumerate(rows):
        ax.errorbar(est.mean or 0.0, y, xerr=est.half or 0.0, fmt="o",
                    color="#1b9e3e" if est.sign > 0 else "#d62728" if est.sign < 0
                    else "#7f7f7f", capsize=4)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.set_xlabel(f"{metric}: how much better with the change (leave-one-out)")
    ax.set_title(f"finalize {tag}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _html(tag: str, lines: list[str], png: Path | None) -> str:
    table = [line for line in lines if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table]
    head, body = (cells[0], cells[2:]) if cells else ([], [])
    text = [f"<p>{html.escape(line)}</p>" for line in lines[1:] if line and
            not line.startswith("|")]
    image = "" if png is None else \
        f"<img alt='effects' src='data:image/png;base64," \
        f"{base64.b64encode(png.read_bytes()).decode()}' style='max-width:100%'>"
    return (f"<!doctype html><meta charset='utf-8'><title>finalize {html.escape(tag)}</title>"
            f"<h1>finalize {html.escape(tag)}</h1>{text[0] if text else ''}{image}"
            f"<table border='1' cellpadding='4'><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                      for row in body) + "</table>" + "".join(text[1:]) + "\n")
