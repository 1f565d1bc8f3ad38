"""What the console says while the loop runs: a retried baseline says so, no line is empty,
and the live panel agrees with the log (its best, its counts after a resume, the phase)."""
import csv
import re

from conftest import TOY_TASK, git, make_repo
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

GATED = """\
import os, sys
if os.path.exists({gate!r}):
    sys.exit("the data is not there yet")
X = 3.0
print(f"score: {{(X - 1) ** 2:.6f}}")
"""


def test_a_failed_baseline_resumed_says_it_is_run_again(tmp_path, mlflow_uri):
    gate = tmp_path / "broken"
    gate.write_text("")
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK,
                                         "train.py": GATED.format(gate=str(gate)),
                                         "grade.py": "# protected\n"})
    cfg = Config(task="task", tag="t", iterations=3, base_dir=repo,
                 judge=JudgeConfig(rule="strict"), sandbox="off")
    first: list[str] = []
    stop = Engine(cfg, out=first.append).run()
    assert stop.reason == "baseline" and stop.exit_code == 1

    gate.unlink()                       # the user fixed it, and runs the same command again
    lines: list[str] = []
    Engine(cfg, out=lines.append).run()
    text = "\n".join(lines)
    assert "resume: tag t, the baseline failed (iteration 0 failed, crash: exit code 1); " \
        "running it again" in lines, text
    start = next(line for line in lines if line.startswith("[  1/3] running"))
    assert "again" in start and "iteration 0" in start and "crash" in start, start


SPREAD = """\
import os, time
X = 3.0
# (lines apart: a change to Y replays cleanly onto a change to X)
#
#
#
Y = 2
SLEEP = 0.0
time.sleep(SLEEP)
print(f"score: {(X - 1) ** 2 + (Y - 4) ** 2:.6f}")
"""


def git_commit(repo):
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qam", "edit")


def rows(repo, tag="t"):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


class Scripted:
    def __init__(self, *edits):
        self.edits = edits

    def propose(self, context):
        text = context.files["train.py"]
        for old, new in self.edits[context.iteration - 1]:
            text = text.replace(old, new)
        return Proposal(f"edit {context.iteration}", files={"train.py": text})


def test_no_empty_run_line_with_several_slots(tmp_path, mlflow_uri):
    """Two slots: 2 would be kept, but 1 was kept meanwhile, so 2 is replayed onto 1 and
    run again there. Its run on the new base is a first run, and its line says so (it was
    `[  2/2] `, empty: the run's number went on from the old base's)."""
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": SPREAD,
                                         "grade.py": "# protected\n"})
    edits = [[("X = 3.0", "X = 2.0")], [("Y = 2", "Y = 4"), ("SLEEP = 0.0", "SLEEP = 1.5")]]
    cfg = Config(task="task", tag="t", iterations=2, base_dir=repo, workers=2,
                 judge=JudgeConfig(rule="strict"), sandbox="off")
    lines: list[str] = []
    Engine(cfg, out=lines.append, proposer=Scripted(*edits)).run()
    text = "\n".join(lines)
    assert not [line for line in lines if re.fullmatch(r"\[ *\d+/\d+\] *", line)], text
    assert "would be kept, but the best moved: replayed" in text, text
    runs = [line for line in lines if line.startswith("[  2/2] running")]
    assert len(runs) == 2 and "replayed onto the new best" in runs[1], text
    assert re.search(r"\[  2/2\] keep .*replayed onto", text), text


def panel_of(live) -> str:
    return "\n".join(t.plain for t in live.__rich__().renderables)


def live_progress():
    import io
    from rich.console import Console
    from loop.ui.progress import LiveProgress
    return LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=200))


def test_the_panel_shows_the_best_after_a_remeasure_and_the_night_after_a_resume(
        toy_repo, mlflow_uri):
    from conftest import TOY_TRAIN
    from loop.words import number_text
    noisy = TOY_TRAIN.replace("NOISE = 0.0", "NOISE = 0.05")
    (toy_repo / "task" / "train.py").write_text(noisy)
    git_commit(toy_repo)
    edits = [[("X = 3.0", "X = 1.0")], [("X = 3.0", "X = 9.0"), ("X = 1.0", "X = 9.0")],
             [("Y = 2", "Y = 30")]]
    judge = JudgeConfig(rule="noise", baseline_runs=2, confirm_runs=0, remeasure_every=1)
    cfg = dict(task="task", tag="t", base_dir=toy_repo, judge=judge, sandbox="off")
    live = live_progress()
    remeasured = []                 # (the log's line, the panel at that moment)

    def out(text):
        live.line(text)
        if "re-measured the best" in text:
            remeasured.append((text, panel_of(live)))
    try:
        engine = Engine(Config(iterations=2, **cfg), out=out, proposer=Scripted(*edits),
                        progress=live)
        engine.run()
        panel = panel_of(live)
    finally:
        live.close()
    assert remeasured                                          # the best was run again
    for text, shown in remeasured:
        best = text.rsplit(", ", 1)[1]
        assert f"best score {best} " in shown, (text, shown)
    assert f"best score {number_text(engine.best_value())} " in panel, panel

    live = live_progress()       # the same tag again: the panel counts the whole night
    try:
        engine = Engine(Config(iterations=3, **cfg), out=live.line, proposer=Scripted(*edits),
                        progress=live)
        engine.run()
        panel = panel_of(live)
    finally:
        live.close()
    table = rows(toy_repo)
    kept = sum(r["status"] == "keep" for r in table[1:])
    lost = sum(r["status"] == "discard" for r in table[1:])
    assert (kept, lost) == (1, 2), table
    assert f"kept {kept}, discarded {lost}, failed 0" in panel, panel
    assert f"best score {number_text(engine.best_value())} " in panel, panel


SLOW_GRADER = """\
name: slow
description: a grader that takes a while
editable: [train.py]
protected: [evaluate.py]
run: python train.py
evaluate: python evaluate.py
metric: {name: score, direction: minimize}
time_budget_s: 10
grace_s: 5
grade_timeout_s: 40
"""


def test_the_panel_shows_the_phase_and_its_limit(tmp_path, mlflow_uri):
    import threading
    import time
    repo = make_repo(tmp_path / "repo", {
        "task.yaml": SLOW_GRADER,
        "train.py": "import time\ntime.sleep(1.0)\nprint('trained')\n",
        "evaluate.py": "import time\ntime.sleep(1.5)\nprint('score: 1.0')\n"})
    cfg = Config(task="task", tag="t", iterations=1, base_dir=repo, sandbox="off",
                 judge=JudgeConfig(rule="strict"))
    live = live_progress()
    seen: set[str] = set()
    try:
        engine = Engine(cfg, out=live.line, proposer=Scripted([("0.0", "0.0")]),
                        progress=live)
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        while thread.is_alive():
            seen.update(line for line in panel_of(live).splitlines() if line.startswith("slot"))
            time.sleep(0.05)
    finally:
        live.close()
    text = "\n".join(sorted(seen))
    assert any(re.search(r"\] training +\d+s / 15s  baseline", s) for s in seen), text
    assert any(re.search(r"\] grading +\d+s / 40s  baseline", s) for s in seen), text


def test_the_panel_says_a_proposal_is_being_asked_for(toy_repo, mlflow_uri):
    """An LLM's answer takes minutes: the panel said `(between runs)` all that time."""
    import threading
    import time
    answer = threading.Event()

    class Slow(Scripted):
        def propose(self, context):
            answer.wait(20)
            return super().propose(context)
    live = live_progress()
    seen = []
    try:
        engine = Engine(Config(task="task", tag="t", iterations=1, base_dir=toy_repo,
                               judge=JudgeConfig(rule="strict"), sandbox="off"),
                        out=live.line, proposer=Slow([("X = 3.0", "X = 2.0")]), progress=live)
        thread = threading.Thread(target=engine.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("proposing" in s for s in seen):
            seen.append(panel_of(live))
            time.sleep(0.05)
        answer.set()
        thread.join(30)
        after = panel_of(live)
    finally:
        live.close()
    assert any(re.search(r"^proposing iteration 1 \(\d+s\)$", s, re.M) for s in seen), seen[-1]
    assert "proposing" not in after, after
