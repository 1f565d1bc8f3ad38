"""`autoresearch report`: markdown, HTML and progress.png from results.tsv, the picture
attached to the tag's parent MLflow run. The picture is checked as a picture: its size and
the colours of what must be drawn (kept points, failures on the axis, the noise band)."""
import numpy as np

from conftest import run_cli
from loop.ui import report
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine
from helpers import TextsInOrder, mlflow_runs, noisy_repo, rows, train


def _rgb(hex_color):
    return np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])


def _pixels_near(image, rgb, tol=0.03):
    return int((np.abs(image[:, :, :3] - rgb).max(axis=2) < tol).sum())


def night(repo):
    """Baseline, two keeps, a crash and a discard, measured with run-to-run noise."""
    noisy_repo(repo)
    proposals = [(train(x="2.0", noise="0.2"), "X to 2"),
                 (train(noise="0.2", extra="raise SystemExit(3)\n"), "a change that crashes"),
                 (train(x="2.0", y="9", noise="0.2"), "Y to 9"),
                 (train(x="1.0", noise="0.2"), "X to 1")]
    Engine(Config(task="task", tag="t", base_dir=repo, iterations=4,
                  judge=JudgeConfig(baseline_runs=2, confirm_runs=1, paired=False)),
           out=lambda s: None, proposer=TextsInOrder(*proposals)).run()
    return [r["status"] for r in rows(repo)]


def test_report_draws_the_night_and_logs_it(toy_repo, mlflow_uri):
    assert night(toy_repo) == ["keep", "keep", "crash", "discard", "keep"]
    res = run_cli("report", "--format", "png", cwd=toy_repo)
    assert res.returncode == 0, res.stderr
    png = toy_repo / ".autoresearch" / "t" / "progress.png"
    assert res.stdout.strip() == str(png)
    import matplotlib.image
    image = matplotlib.image.imread(png)
    assert image.shape[:2] == (650, 1200)
    kept = _pixels_near(image, _rgb(report.KEPT_COLOR))
    failed = _pixels_near(image, _rgb(report.FAIL_COLOR), tol=0.08)
    band_rgb = report.BAND_ALPHA * _rgb(report.BAND_COLOR) + (1 - report.BAND_ALPHA)
    band = _pixels_near(image, band_rgb, tol=0.02)
    best = _pixels_near(image, _rgb(report.BEST_COLOR))
    assert kept > 3 * 40, kept          # three kept points (baseline + 2) and the legend's
    assert failed > 10, failed          # the crash, marked on the axis
    assert band > 5000, band            # the baseline's noise band across the plot
    assert best > 300, best             # the running best's step line
    client, parents, _ = mlflow_runs(mlflow_uri)
    names = [a.path for a in client.list_artifacts(parents[0].info.run_id)]
    assert "progress.png" in names


def test_report_markdown_and_html(toy_repo, mlflow_uri):
    night(toy_repo)
    md = run_cli("report", "--tag", "t", "--no-mlflow", cwd=toy_repo)
    assert md.returncode == 0, md.stderr
    assert "4 iterations after the baseline, 2 kept" in md.stdout
    assert "![progress](progress.png)" in md.stdout
    assert "| 2 | crash |  |" in md.stdout and "a change that crashes" in md.stdout
    page = run_cli("report", "--format", "html", "--no-mlflow", cwd=toy_repo)
    html_path = toy_repo / ".autoresearch" / "t" / "report.html"
    assert page.stdout.strip() == str(html_path)
    text = html_path.read_text()
    assert "data:image/png;base64," in text and "<td>Y to 9</td>" in text
    # markdown's `code` is code in the page, and each row says why it ended as it did
    assert "<code>score</code>" in text and "`" not in text
    assert "<th>reason</th>" in text
    crash_row = next(line for line in md.stdout.splitlines() if line.startswith("| 2 | crash"))
    assert crash_row.endswith(" |") and crash_row.rsplit("|", 2)[-2].strip()   # a reason


def test_failed_rows_have_no_memory_figure(toy_repo, mlflow_uri):
    night(toy_repo)
    table = rows(toy_repo)
    assert [r["memory_gb"] for r in table if r["status"] == "crash"] == [""]


def test_progress_png_has_whole_iteration_ticks():
    import matplotlib.pyplot as plt
    short = [report.Row(0, "keep", "baseline (unmodified code)", 1.0, None, 1, None),
             report.Row(1, "discard", "X to 2", 1.2, -0.2, 1, None),
             report.Row(2, "keep", "X to 1", 0.8, 0.2, 1, None)]
    fig = report.figure("t", "loss", "minimize", short)
    try:
        ticks = [t for t in fig.axes[0].get_xticks() if -0.5 <= t <= 3.5]
    finally:
        plt.close(fig)
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_report_works_from_results_tsv_alone(tmp_path):
    """A results.tsv copied off the machine (no journal, no MLflow) still gets its picture."""
    tsv = tmp_path / "results.tsv"
    header = "commit\tacc\tmemory_gb\tstatus\tdescription\titeration\tgain\truns\tspread"
    lines = [header, "a\t0.70\t0.0\tkeep\tbaseline (unmodified code)\t0\t\t3\t0.01",
             "b\t0.75\t0.0\tkeep\tmore trees\t1\t0.05\t3\t0.01",
             "c\t0.000000\t0.0\ttimeout\tslow\t2\t\t1\t"]
    tsv.write_text("\n".join(lines) + "\n")
    text, notes = report.build(tmp_path, "copy", "md")
    assert "`acc` (maximize)" in text and (tmp_path / "progress.png").stat().st_size > 10_000
    assert any("not logged" in n for n in notes)


def test_report_on_an_unknown_tag_is_one_line(toy_repo):
    res = run_cli("report", "--tag", "nope", cwd=toy_repo)
    assert res.returncode == 2 and "no run with tag 'nope'" in res.stderr


def test_a_discard_without_a_run_is_no_red_failure_cross():
    """Issue 16: a 0-run discard (a change not measured) was drawn as a failure."""
    import matplotlib.pyplot as plt
    rows = [report.Row(0, "keep", "baseline (unmodified code)", 1.0, None, 1, None),
            report.Row(1, "discard", "not measured again", None, None, 0, None),
            report.Row(2, "crash", "a crash", None, None, 1, None),
            report.Row(3, "keep", "X to 1", 0.8, 0.2, 1, None)]
    fig = report.figure("t", "loss", "minimize", rows)
    try:
        ax = fig.axes[0]
        drawn = {c.get_label(): [int(x) for x, _ in c.get_offsets()] for c in ax.collections}
    finally:
        plt.close(fig)
    assert drawn["failed (crash, timeout, ...)"] == [2]
    assert drawn["discarded without a run"] == [1]
