"""Runs that stop when they are clearly worse (loop/run/early_stop.py): the rule on its own,
a real subprocess printing `\\r` progress lines stopped (or not) by the runner, and a night
where a clearly worse candidate is stopped, a schedule change is not, and the best's curve
survives a resume."""
import csv
import json
from pathlib import Path

import pytest

from conftest import git, make_repo
from helpers import Variants
from loop.engine.engine import Engine
from loop.engine.stopping import rule_for
from loop.run import early_stop
from loop.run.early_stop import Band, StopRule, Watcher
from loop.setup.stop_settings import Settings
from loop.run.runner import run_experiment
from loop.run.spec import RunSpec
from loop.setup.config import Config, JudgeConfig
from loop.setup.task import TaskError, load_task
from loop.words import Status

# karpathy's progress line, rewritten in place with carriage returns
PATTERN = r"\((?P<progress>[\d.]+)%\) \| loss: (?P<loss>[\d.]+)"

TRAIN = """\
import os, random, time
OFFSET = 0.0      # how much worse than the baseline it ends
WARMUP = 0.05     # a schedule constant: changing it reshapes the curve
TAIL = 0.0        # seconds spent after the last progress line (a long run's rest)
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
for i in range(1, 21):
    f = i / 20
    loss = 1.0 + 2.0 * (1 - f) + OFFSET * f ** 0.5 + rng.gauss(0, 0.02)
    print(f"step {i:05d} ({100 * f:.1f}%) | loss: {loss:.6f} | lrm: 1.00", end="\\r",
          flush=True)
    time.sleep(0.01)
time.sleep(TAIL)
print()
print(f"score: {1.0 + OFFSET + rng.gauss(0, 0.02):.6f}")
"""

TASK = f"""\
name: curves
editable: [train.py]
run: python train.py
metric: {{name: score, direction: minimize}}
time_budget_s: 60
grace_s: 5
progress_pattern: '{PATTERN}'
early_stop: {{warmup: 0.3, z: 3, lines: 3}}
"""


def straight(offset: float = 0.0, sd_runs=(0.0, 0.04, -0.04)) -> list:
    """The best's curves: 1 + 2 (1 - f) shifted per run (a spread of ~0.04)."""
    return [early_stop.thin([(i / 20, 1.0 + 2.0 * (1 - i / 20) + offset + d)
                             for i in range(1, 21)]) for d in sd_runs]


# -- the rule -------------------------------------------------------------------------------

def test_the_band_is_the_best_runs_mean_and_spread_at_each_point():
    band = Band.of(straight())
    mean, sd, n = band.near(0.5)
    assert n == 3 and mean == pytest.approx(2.0) and sd == pytest.approx(0.04)
    assert band.near(0.01) is None                   # before the first grid point
    assert Band.of(straight()[:1]) is None           # one run has no spread


def test_a_line_above_the_band_must_repeat_before_a_stop():
    rule = StopRule(Band.of(straight()), Settings(warmup=0.3, z=3, lines=3))
    watch = Watcher.make(PATTERN, 60, rule)
    said = []
    for pct, loss in [(10, 9.0), (20, 9.0), (35, 9.0), (40, 1.0), (45, 9.0), (50, 9.0),
                      (55, 9.0), (60, 9.0)]:
        match = watch.pattern.search(f"step 1 ({pct:.1f}%) | loss: {loss:.4f} |")
        said.append(watch.see(match))
    # nothing in the warm-up; one line below the band resets the count; the third above stops
    assert said[:6] == [None] * 6 and said[6] is not None and said[6].startswith(
        "stopped at 55% of its budget: loss 9 vs the best's 1.9 ± 0.04 there")
    assert watch.curve()[0] == [0.1, 9.0]


def test_schedule_constants_are_found_in_a_diff():
    s = Settings(schedule=("MAGIC",))
    assert early_stop.schedule_names("-LEARNING_RATE = 1e-3\n+LEARNING_RATE = 2e-3\n", s) \
        == ["LEARNING_RATE"]
    assert early_stop.schedule_names("+warmupSteps = 10  # more\n", s) == ["warmupSteps"]
    assert early_stop.schedule_names("-FINAL_LR_FRAC = 0.1\n", s) == ["FINAL_LR_FRAC"]
    assert early_stop.schedule_names("+MAGIC = 3\n", s) == ["MAGIC"]
    assert early_stop.schedule_names(" WARMUP = 1\n-DEPTH = 4\n+DEPTH = 6  # lr too\n",
                                     s) == []    # context lines and comments do not count
    settings = Settings()
    assert rule_for(settings, straight(), "-DEPTH = 4\n+DEPTH = 6\n") is not None
    assert rule_for(settings, straight(), "-WARMUP_FRAC = 0.05\n+WARMUP_FRAC = 0.1\n") is None
    assert rule_for(settings, straight()[:1], "-DEPTH = 4\n+DEPTH = 6\n") is None
    assert rule_for(None, straight(), "-DEPTH = 4\n+DEPTH = 6\n") is None


def test_check_task_says_whether_the_pattern_read_a_curve():
    assert early_stop.progress_line([]).startswith("progress_pattern: no progress line")
    assert early_stop.progress_line([[0.1, 3.0], [1.0, 1.25]]) == (
        "progress_pattern: a loss curve of 2 points, from 10% of the budget (loss 3) to "
        "100% (loss 1.25)")


def test_task_yaml_keys_are_checked(tmp_path):
    def task(extra: str) -> Path:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "train.py").write_text(TRAIN)
        (folder / "task.yaml").write_text(
            "name: t\neditable: [train.py]\nrun: python train.py\nmetric: score\n" + extra)
        return folder
    assert load_task(task(f"progress_pattern: '{PATTERN}'\nearly_stop: true\n")).early_stop
    with pytest.raises(TaskError, match="early_stop needs progress_pattern"):
        load_task(task("early_stop: {z: 2}\n"))
    with pytest.raises(TaskError, match="unknown key 'zz'"):
        load_task(task(f"progress_pattern: '{PATTERN}'\nearly_stop: {{zz: 2}}\n"))
    with pytest.raises(TaskError, match="progress_pattern needs a group named loss"):
        load_task(task("progress_pattern: 'loss ([0-9.]+)'\n"))


def test_a_stopped_run_ends_its_candidate_as_a_discard_with_the_reason():
    from loop.engine.lifecycle import Cancel, Candidate, Finish, Run
    from loop.record import Record
    from loop.words import RunKey, Status
    why = "stopped at 40% of its budget: loss 3.1 vs the best's 2.61 ± 0.04 there"
    c = Candidate(Record(iteration=3, status="", description="x", parent="tip", commit="c3"))
    assert c.begin("tip") == Run((RunKey.candidate(0),))
    assert c.ran(RunKey.candidate(0), None, Status.STOPPED, why) == Cancel()
    assert c.forget(set()) == Finish(Status.DISCARD, why)
    assert c.rec.samples == [] and c.rec.stats["stopped_runs"] == 1
    # a confirmation run stopped while a lower one is cancelled: the stop's reason stays
    c = Candidate(Record(iteration=4, status="", description="y", parent="tip", commit="c4"))
    c.begin("tip")
    c.ran(RunKey.candidate(0), 1.0, "ok", "", [[0.5, 2.0], [1.0, 1.0]])
    c.runs_out = {RunKey.candidate(1), RunKey.candidate(2)}
    c.first_on_base = 0
    assert c.ran(RunKey.candidate(2), None, Status.STOPPED, why) == Cancel()
    assert c.ran(RunKey.candidate(1), None, "crash", "killed") == Cancel()
    assert c.forget(set()) == Finish(Status.DISCARD, why)
    assert (c.rec.status, c.rec.reason) == ("discard", why)
    assert c.rec.curves == [[[0.5, 2.0], [1.0, 1.0]]]      # curves of the runs in samples


# -- a real run -------------------------------------------------------------------------------

def spec_for(tmp_path: Path, offset: float, noise: float, tail: float,
             rule: StopRule | None, end: str = "\r") -> RunSpec:
    folder = tmp_path / f"run-{offset}-{noise}"
    folder.mkdir()
    (folder / "train.py").write_text(
        TRAIN.replace("OFFSET = 0.0", f"OFFSET = {offset}").replace(
            "TAIL = 0.0", f"TAIL = {tail}").replace("gauss(0, 0.02)", f"gauss(0, {noise})")
        .replace('end="\\r"', f"end={end!r}"))
    from loop.run.process import experiment_env
    return RunSpec("python train.py", folder, experiment_env({"AUTORESEARCH_SEED": "7"}),
                   60.0, folder / "run.log", r"^score:\s*([0-9.]+)",
                   progress_pattern=PATTERN, budget_s=60.0, stop_rule=rule)


@pytest.mark.parametrize("end", ["\r", "\n"], ids=["carriage-returns", "newlines"])
def test_a_clearly_worse_run_is_stopped_by_its_progress_lines(tmp_path, end):
    rule = StopRule(Band.of(straight()), Settings())
    spec = spec_for(tmp_path, offset=1.0, noise=0.02, tail=60, rule=rule, end=end)
    assert f"end={end!r}" in (spec.folder / "train.py").read_text()
    result = run_experiment(spec)
    assert result.status == Status.STOPPED and result.metric is None     # no truncated metric
    assert result.detail.startswith("stopped at 4")               # 40% or 45%, lines 3 in a row
    assert "vs the best's" in result.detail
    assert len(result.curve) >= 8                                 # read from the \r lines
    assert f"=== {Status.STOPPED}: {result.detail} ===" in result.log_path.read_text()


def test_a_noisy_but_better_run_is_not_stopped(tmp_path):
    rule = StopRule(Band.of(straight()), Settings())
    result = run_experiment(spec_for(tmp_path, offset=-0.05, noise=0.05, tail=0, rule=rule))
    assert result.status == Status.OK and result.metric is not None
    assert len(result.curve) == 20 and result.curve[-1][0] == 1.0


# -- a night --------------------------------------------------------------------------------

def journal(repo: Path, tag: str, kind: str) -> list[dict]:
    lines = (repo / ".autoresearch" / tag / "journal.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


@pytest.mark.slow
def test_a_night_stops_the_worse_change_not_the_schedule_change_and_resumes(tmp_path,
                                                                             mlflow_uri):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN})
    git(repo, "config", "user.name", "T")
    worse = TRAIN.replace("OFFSET = 0.0", "OFFSET = 1.0").replace("TAIL = 0.0", "TAIL = 60")
    schedule = TRAIN.replace("OFFSET = 0.0", "OFFSET = 1.0").replace("WARMUP = 0.05",
                                                                     "WARMUP = 0.1")
    cfg = Config(task="task", tag="es", iterations=2, base_dir=repo, seed=3,
                 judge=JudgeConfig(baseline_runs=2))
    engine = Engine(cfg, out=lambda s: None, proposer=Variants(worse, schedule))
    engine.run()
    with open(repo / ".autoresearch/es/results.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["status"] for r in rows] == ["keep", "discard", "discard"]
    stopped, reshaped = rows[1], rows[2]
    assert stopped["reason"].startswith("stopped at ") and "vs the best's" in stopped["reason"]
    assert stopped["score"] == "" and stopped["runs"] == "1"      # no metric; its run counted
    assert not reshaped["reason"].startswith("stopped")           # ran its whole budget
    assert reshaped["score"] != ""
    best_curves = engine.parts.score.best_curves
    assert len(best_curves) >= 2 and all(len(c) == 20 for c in best_curves)
    assert len(journal(repo, "es", "end")[0]["curves"]) == 2      # journalled with the record
    # a resume rebuilds the same band from the journal
    again = Engine(cfg, out=lambda s: None, proposer=Variants(worse))
    again.run()
    assert again.parts.score.best_curves == best_curves
