"""One story everywhere: the console, `status`, `report`, results.tsv, MLflow and git count
and sign the same way, print rounded numbers, say what is running, keep every attempt."""
import io
import re
import subprocess
import sys

import pytest

from conftest import git, run_cli
from helpers import TextsInOrder, noisy_repo, rows, train
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine
from loop.engine.progress import Progress
from loop.ui.progress import LiveProgress, make_progress


def test_console_status_and_report_tell_one_story(toy_repo, mlflow_uri):
    noisy_repo(toy_repo)
    res = run_cli("run", "--task", "task", "--tag", "t", "--iterations", "1", cwd=toy_repo)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    # baseline repeats and confirmation runs are announced: which run of how many
    assert "[  0/1] running   baseline (unmodified code)  (run 1 of 3)" in out
    assert "[  0/1] run 2 of 3" in out and "[  0/1] run 3 of 3" in out
    assert "[  0/1] baseline " in out                        # not counted as a keep
    assert "1 iterations" not in out and "of 1 iteration;" in out     # singular
    assert not re.search(r"\d\.\d{7,}", out), out             # rounded numbers only
    table = rows(toy_repo)
    keeps_after_baseline = sum(r["status"] == "keep" for r in table[1:])
    if int(table[1]["runs"]) > 1:                             # its confirmation runs, too
        assert f"[  1/1] run 2 of up to {1 + JudgeConfig().confirm_runs}, confirming" in out
    assert f"kept {keeps_after_baseline} of 1 iteration;" in out
    status = run_cli("status", cwd=toy_repo).stdout
    assert "{" not in status and "statuses" not in status
    assert re.search(rf"^kept +{keeps_after_baseline} of 1$", status, re.M), status
    lines = [line for line in status.splitlines() if not line.startswith(" ")
             and line != "recent:"]
    starts = {len(line) - len(line.split("  ", 1)[1].lstrip()) for line in lines}
    assert len(starts) == 1, status                           # every value in one column
    assert "mlflow parent run" in status
    report = run_cli("report", "--no-mlflow", cwd=toy_repo)
    assert report.returncode == 0, report.stderr
    assert "| gain |" in report.stdout and "positive = better" in report.stdout
    assert f"{keeps_after_baseline} kept" in report.stdout


def test_gain_has_one_sign_everywhere(toy_repo, mlflow_uri):
    lines = []
    better = train(x="1.0")                                   # score 8 -> 4: gain +4
    Engine(Config(task="task", tag="t", base_dir=toy_repo, iterations=1,
                  judge=JudgeConfig(rule="strict")), out=lines.append,
           proposer=TextsInOrder((better, "X to 1"))).run()
    result = next(line for line in lines if line.startswith("[  1/1] keep"))
    assert "(gain +4)" in result and "better by 4" in result
    assert rows(toy_repo)[1]["gain"] == "4.000000"
    message = git(toy_repo, "log", "-1", "--format=%B", "autoresearch/t")
    assert "score 8.000000 -> 4.000000, gain +4" in message
    assert "Autoresearch-Gain: +4.000000" in message


def test_program_md_change_is_announced_with_the_iteration_using_it(toy_repo, mlflow_uri):
    cfg = dict(task="task", tag="t", base_dir=toy_repo, judge=JudgeConfig(rule="strict"))
    proposals = [(train(x="2.0"), "X to 2"), (train(x="1.0"), "X to 1")]
    lines = []
    Engine(Config(iterations=1, **cfg), out=lines.append, proposer=TextsInOrder(*proposals)).run()
    assert not any(line.startswith("steering:") for line in lines)
    (toy_repo / "program.md").write_text("Now try Y first.\n")
    lines = []
    Engine(Config(iterations=2, **cfg), out=lines.append, proposer=TextsInOrder(*proposals)).run()
    steering = [line for line in lines if line.startswith("steering:")]
    assert len(steering) == 1 and "iteration 2 is the first to use it" in steering[0]


class InterruptAt(Progress):
    """Ctrl-C arriving while iteration `n`'s first run starts (after its attempt ref exists)."""

    def __init__(self, n):
        super().__init__(out=lambda s: None)
        self.n = n

    def run_started(self, slot, rec, k, planned, budget_s, total, **kw):
        if rec.iteration == self.n:
            self.n = None
            raise KeyboardInterrupt


def test_an_interrupted_attempt_keeps_its_own_ref(toy_repo, mlflow_uri):
    cfg = Config(task="task", tag="t", base_dir=toy_repo, iterations=1,
                 judge=JudgeConfig(rule="strict"))
    first = TextsInOrder((train(x="2.0"), "X to 2"))
    stop = Engine(cfg, out=lambda s: None, proposer=first, progress=InterruptAt(1)).run()
    assert stop.exit_code == 130
    refs = git(toy_repo, "for-each-ref", "--format=%(refname:lstrip=3) %(subject)",
               "refs/autoresearch/t/").splitlines()
    interrupted = [r for r in refs if r.startswith("interrupted-1-")]
    assert interrupted and interrupted[0].endswith("X to 2")
    redo = TextsInOrder((train(x="1.0"), "X to 1"))               # the redo proposes otherwise
    assert Engine(cfg, out=lambda s: None, proposer=redo).run().exit_code == 0
    refs = git(toy_repo, "for-each-ref", "--format=%(refname:lstrip=3) %(subject)",
               "refs/autoresearch/t/").splitlines()
    assert interrupted[0] in refs                             # still there after the redo
    assert any(r.startswith("attempt-1 X to 1") for r in refs)


def test_a_closed_pipe_ends_quietly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "loop", "tasks"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                       # `| head` that has read enough
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_progress_is_plain_off_a_terminal_and_live_on_one(toy_repo, mlflow_uri):
    assert type(make_progress(io.StringIO())) is Progress
    from rich.console import Console
    screen = io.StringIO()
    live = LiveProgress(Console(file=screen, force_terminal=True, width=160))
    try:
        proposals = [(train(x="1.0"), "X to 1"), (train(x="9.0"), "X to 9")]
        Engine(Config(task="task", tag="t", base_dir=toy_repo, iterations=2,
                      judge=JudgeConfig(rule="strict")), out=live.line,
               proposer=TextsInOrder(*proposals), progress=live).run()
        live.run_started(0, type("R", (), {"iteration": 3, "description": "try Y",
                                           "status": "running"})(), 0, 1, 10, 3)
        panel = "\n".join(t.plain for t in live.__rich__().renderables)
    finally:
        live.close()
    assert re.search(r"slot 0  \[  3/3\] +\d+s / 10s  try Y", panel), panel
    assert "best score 4 (gain +4 vs baseline)" in panel
    assert "kept 1, discarded 1, failed 0" in panel and "runs/h" in panel
    assert "[  2/2] discard" in screen.getvalue()             # the plain lines still scroll


def test_the_best_is_the_mean_of_all_its_runs_and_no_keep_is_no_gain(tmp_path):
    """status / the final line: the best's value moves as it is re-run (the judge's view),
    and a night that kept nothing has gained nothing, whatever its re-runs drifted to."""
    from loop.ui import status
    from loop.state.journal import Journal
    from loop.record import Record, record_dict
    from loop.words import BASELINE
    journal = Journal(tmp_path / ".autoresearch" / "t" / "journal.jsonl")
    journal.write("start", tag="t", branch="autoresearch/t", task="task", metric="score",
                  direction="minimize")
    base = Record(iteration=0, status="keep", description=BASELINE, commit="c0", parent="c0",
                  samples=[3.0, 3.2, 3.4], metric=3.2, best_after=3.2)
    journal.write("end", **record_dict(base))
    for value in (2.0, 2.2):                       # the machine got faster: re-runs improve
        journal.write("remeasure", iteration=1, commit="c0", value=value, status="ok")
    worse = Record(iteration=1, status="discard", description="worse", commit="c1",
                   parent="c0", samples=[9.0], metric=9.0)
    journal.write("end", **record_dict(worse))
    s = status.summary(tmp_path, "t")
    assert s["best_metric"] == pytest.approx((3.0 + 3.2 + 3.4 + 2.0 + 2.2) / 5)
    assert s["gain"] == 0.0 and "gain +0 over the baseline" in status.final_line(s)


def test_the_final_review_lines_run_in_bash_and_show_the_kept_changes_only(toy_repo, mlflow_uri):
    """No `|` between hints (it reads as a pipe); the git log range starts at the commit the
    baseline ran on, so the user's own history is not listed, and a night without a keep
    lists nothing."""
    from loop.ui import status
    Engine(Config(task="task", tag="t", base_dir=toy_repo, iterations=2,
                  judge=JudgeConfig(rule="strict")), out=lambda line: None,
           proposer=TextsInOrder((train(x="1.0"), "X to 1"), (train(x="9.0"), "X to 9"))).run()
    text = status.final_line(status.summary(toy_repo, "t"))
    assert " | " not in text
    commands = [line.removeprefix("review:").strip() for line in text.splitlines()[1:]]
    log = subprocess.run(["bash", "-c", commands[0] + " --format=%s"], cwd=toy_repo,
                         capture_output=True, text=True, check=True).stdout
    assert [line for line in log.splitlines() if line and not line.startswith(" ")] \
        == ["X to 1"]
    table = subprocess.run(["bash", "-c", commands[1]], cwd=toy_repo, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert table[0].split()[:5] == ["commit", "score", "memory_gb", "status", "description"]
    assert commands[2].startswith("mlflow ui --backend-store-uri ")


def test_status_gain_is_the_difference_of_the_two_numbers_it_shows(tmp_path):
    """`best X (gain +G over the baseline B)`: G is B - X for a minimized metric, with B the
    baseline as the judge measured it (its re-runs included), not its first runs alone."""
    from loop.ui import status
    from loop.state.journal import Journal
    from loop.record import Record, record_dict
    from loop.words import BASELINE
    journal = Journal(tmp_path / ".autoresearch" / "t" / "journal.jsonl")
    journal.write("start", tag="t", branch="autoresearch/t", task="task", metric="time_ms",
                  direction="minimize")
    base = Record(iteration=0, status="keep", description=BASELINE, commit="c0", parent="c0",
                  samples=[80.0, 81.0], metric=80.5, best_after=80.5)
    journal.write("end", **record_dict(base))
    journal.write("remeasure", iteration=1, commit="c0", value=82.0, status="ok")
    kept = Record(iteration=1, status="keep", description="faster", commit="c1", parent="c0",
                  samples=[33.0, 34.0], metric=33.5, best_after=33.5)
    journal.write("end", **record_dict(kept))
    s = status.summary(tmp_path, "t")
    shown = "\n".join(status.format_summary(s))
    m = re.search(r"best time_ms +([\d.]+) \(gain \+([\d.]+) over the baseline ([\d.]+)\)", shown)
    assert m, shown
    best, gain, baseline = map(float, m.groups())
    assert gain == pytest.approx(baseline - best, abs=1e-4)
    assert baseline == pytest.approx(81.0) and best == pytest.approx(33.5)
