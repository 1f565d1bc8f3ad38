"""finalize finds the night it finalizes from the tag's own state: the task folder the night
ran (a bare `finalize --tag T` after `run --task .` in a repo without autoresearch.yaml) and
its time box (`--time-budget`), from the start event of the tag's journal."""
import json

from conftest import make_repo, run_cli
from finalize_nights import Scripted
from loop.engine.engine import Engine
from loop.setup.config import Config, JudgeConfig

TASK = """\
name: toy
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 30
grace_s: 20
"""

TRAIN = """\
import os
X = 3.0
print("budget:", os.environ["AUTORESEARCH_TIME_BUDGET"])
print(f"score: {(X - 1) ** 2:.6f}")
"""


def start_event(repo, tag):
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    return next(e for e in map(json.loads, path.read_text().splitlines())
                if e["event"] == "start")


def test_after_run_task_dot_a_bare_finalize_finds_the_task(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN,
                                         "grade.py": "# protected\n"}, task_dir=".")
    out = run_cli("run", "--task", ".", "--tag", "rt", "--iterations", "0", "--time-budget",
                  "7", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert not (repo / "autoresearch.yaml").exists()
    start = start_event(repo, "rt")
    assert start["task"] == "." and start["time_budget_s"] == 7
    done = run_cli("finalize", "--tag", "rt", cwd=repo)
    assert done.returncode == 0, done.stderr        # was: task folder not found: .../tinylm
    assert "kept no change: nothing to finalize" in done.stdout


def test_finalize_measures_at_the_nights_task_and_time_box(tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN,
                                         "grade.py": "# protected\n"}, task_dir=".")
    cfg = Config(task=".", base_dir=repo, tag="rt", iterations=1, time_budget_s=7,
                 judge=JudgeConfig(rule="strict"))
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted([("set X to 1", "X = 3.0",
                                                               "X = 1.0")])).run()
    assert stop.exit_code == 0
    # from a subfolder, with no config: the night's record is all finalize has
    (repo / "notes").mkdir()
    done = run_cli("finalize", "--tag", "rt", cwd=repo / "notes")
    assert done.returncode == 0, done.stderr
    assert "final vs start +4" in done.stdout
    logs = list((repo / ".autoresearch" / "rt" / "finalize" / "logs").glob("*.log"))
    assert logs and all("budget: 7\n" in p.read_text() for p in logs)   # not the task's 30


def test_an_unknown_tag_without_a_config_is_one_line(tmp_path):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN,
                                         "grade.py": "# protected\n"}, task_dir=".")
    out = run_cli("finalize", "--tag", "nosuch", cwd=repo)
    assert out.returncode == 2
    assert out.stderr.strip() == "autoresearch: error: no night for tag 'nosuch' here (no " \
        "journal or no branch autoresearch/nosuch): run `autoresearch run --tag nosuch` first"
