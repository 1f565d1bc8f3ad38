"""Benchmarks' tasks through the generic task interface, each run by the real loop end to
end (mutate proposer, git, MLflow SQLite) with its metric from the benchmark's grader."""
import csv
from pathlib import Path

import pytest

from bench_layouts import COMP, make_mlagentbench, make_mlebench
from conftest import git, make_repo, run_cli
from loop.adapters import mlagentbench, mlebench
from loop.adapters.metrics import score
from loop.setup.config import Config, JudgeConfig, load_config
from loop.engine.engine import Engine
from loop.advice.check_task import check_task
from loop.setup.task import load_task

ROOT = Path(__file__).resolve().parent.parent


def rows(repo, tag):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def commit_all(repo, message="add task"):
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", message)


def run_loop(repo, task, tag, iterations=2, **kw):
    cfg = Config(task=task, tag=tag, iterations=iterations, base_dir=repo,
                 judge=JudgeConfig(rule="strict"), **kw)
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    return rows(repo, tag)


# -- MLE-bench ------------------------------------------------------------------------------
def test_medal_thresholds_follow_the_number_of_teams():
    desc = [1 - i / 1000 for i in range(2000)]                 # higher is better
    th = mlebench.thresholds(desc[:50])                        # < 100 teams: top 10/20/40 %
    assert (th["gold"], th["silver"], th["bronze"]) == (desc[4], desc[9], desc[19])
    th = mlebench.thresholds(desc[:150])                       # 100-249: gold is 10th place
    assert (th["gold"], th["silver"], th["bronze"]) == (desc[9], desc[29], desc[59])
    th = mlebench.thresholds(desc[:500])                       # 250-999: 10+0.2%, 50th, 100th
    assert (th["gold"], th["silver"], th["bronze"]) == (desc[10], desc[49], desc[99])
    th = mlebench.thresholds(desc)                             # 1000+: 10+0.2%, top 5 %, 10 %
    assert (th["gold"], th["silver"], th["bronze"]) == (desc[13], desc[99], desc[199])
    assert mlebench.rank(desc[12], th) == {"medal": "gold", "above_median": True}
    assert mlebench.rank(desc[150], th)["medal"] == "bronze"
    asc = [i / 100 for i in range(50)]                         # lower is better (e.g. RMSE)
    th = mlebench.thresholds(asc)
    assert th["lower_is_better"] and mlebench.rank(0.0, th)["medal"] == "gold"
    assert mlebench.rank(0.49, th) == {"medal": "none", "above_median": False}


@pytest.mark.parametrize("metric,truth,pred,expected", [
    ("accuracy", ["yes", "no", "yes"], ["yes", "yes", "yes"], 2 / 3),
    ("rmse", ["1", "2"], ["1", "4"], 2 ** 0.5),
    ("mae", ["1", "2"], ["2", "4"], 1.5),
    ("auc", ["1", "0", "1", "0"], ["0.9", "0.1", "0.4", "0.6"], 0.75),
])
def test_builtin_metrics(metric, truth, pred, expected):
    answers = [{"id": str(i), "t": v} for i, v in enumerate(truth)]
    sub = [{"id": str(i), "t": v} for i, v in enumerate(pred)]
    assert score(metric, answers, sub, "id", ["t"]) == pytest.approx(expected)


def test_mlebench_competition_runs_the_loop(tmp_path, mlflow_uri, monkeypatch):
    registry, data = make_mlebench(tmp_path / "bench")
    monkeypatch.setenv(mlebench.DATA_ROOT_VAR, str(data))
    repo = make_repo(tmp_path / "repo", {"README.md": "research repo\n"}, task_dir=".")
    res = run_cli("task", "mlebench", str(registry), "--data-dir", str(data),
                  "--out", "comp", "--time-budget", "20", cwd=repo)
    assert res.returncode == 0, res.stderr
    task = load_task(repo / "comp")
    assert task.metric.name == "accuracy" and task.metric.direction == "maximize"
    assert task.private_dir == (data / COMP / "prepared" / "private").resolve()
    assert task.artifact == "submission.csv" and task.evaluate == "python grade.py"
    assert not list((repo / "comp").rglob("test.csv"))       # no answers in the task folder
    commit_all(repo)

    table = run_loop(repo, "comp", "mle", iterations=2)
    assert [r["status"] for r in table][0] == "keep"
    assert all(r["status"] in ("keep", "discard") for r in table), table
    # the metric is the competition's own grade of the submission the run handed over
    import pandas as pd
    sub = pd.read_csv(repo / ".autoresearch/mle/runs/0000-0/artifacts/submission.csv")
    answers = pd.read_csv(data / COMP / "prepared" / "private" / "test.csv")
    merged = answers.merge(sub, on="id", suffixes=("_t", "_p"))
    assert float(table[0]["accuracy"]) == pytest.approx(
        (merged["label_t"] == merged["label_p"]).mean(), abs=1e-5)
    log = (repo / ".autoresearch/mle/logs/iter-0000.log").read_text()
    assert "graded_by:         competition/grade.py" in log
    for line in ("leaderboard_teams: 60", "gold_threshold:", "medal:", "above_median:"):
        assert line in log
    # the worktree never held the answers
    worktree = repo / ".autoresearch/.worktrees/mle"
    assert worktree.is_dir()
    assert not any(p.name == "test.csv" for p in worktree.rglob("*"))


def test_mlebench_without_a_grader_uses_the_builtin_metric(tmp_path, monkeypatch):
    registry, data = make_mlebench(tmp_path / "bench", registry_files=False)
    monkeypatch.setenv(mlebench.DATA_ROOT_VAR, str(data))
    folder = mlebench.make_task(COMP, tmp_path / "task", data_dir=data, metric="accuracy",
                                time_budget_s=20)
    task = load_task(folder)
    assert task.metric.direction == "maximize"        # from the built-in metric's table
    lines = []
    _, result = check_task(folder, out=lines.append)
    assert result.status == "ok" and 0.5 < result.metric <= 1.0, lines
    with pytest.raises(Exception, match="not empty"):
        mlebench.make_task(COMP, folder, data_dir=data, metric="accuracy")
    with pytest.raises(Exception, match="prepare the competition"):
        mlebench.make_task("no-such-competition", tmp_path / "x", data_dir=data)


# -- MLAgentBench ---------------------------------------------------------------------------
def test_mlagentbench_task_runs_the_loop(tmp_path, mlflow_uri, monkeypatch):
    bench = make_mlagentbench(tmp_path / "mlab")
    monkeypatch.setenv(mlagentbench.ROOT_VAR, str(bench.parent))
    repo = make_repo(tmp_path / "repo", {"README.md": "research repo\n"}, task_dir=".")
    res = run_cli("task", "mlagentbench", str(bench), "--direction", "minimize",
                  "--metric", "mae", "--out", "regress", "--time-budget", "20", cwd=repo)
    assert res.returncode == 0, res.stderr
    task = load_task(repo / "regress")
    assert "improve upon the current model performance" in task.description
    assert task.editable == ("train.py",)
    assert set(task.protected) == {"grade.py", "train.csv", "test.csv"}
    assert task.private_dir == (bench / "scripts").resolve()
    assert not (repo / "regress" / "answer.csv").exists()
    commit_all(repo)

    table = run_loop(repo, "regress", "mlab", iterations=2)
    assert table[0]["status"] == "keep"
    assert all(r["status"] in ("keep", "discard") for r in table), table
    import pandas as pd
    sub = pd.read_csv(repo / ".autoresearch/mlab/runs/0000-0/artifacts/submission.csv")
    answer = pd.read_csv(bench / "scripts" / "answer.csv")
    assert float(table[0]["mae"]) == pytest.approx((sub["y"] - answer["y"]).abs().mean(),
                                                   abs=1e-5)
    assert not list((bench / "scripts").glob("__pycache__"))   # the grader left it as it was


def test_mlagentbench_real_task_shapes_get_a_clear_word(tmp_path, monkeypatch):
    """As the real checkout holds them: data not prepared yet, an incomplete starter, an
    eval.py that grades a model left in the workspace (babylm, CLRS)."""
    said = []
    make = lambda bench, out: mlagentbench.make_task(bench, tmp_path / out, "minimize",  # noqa
                                                     warn=said.append)
    with pytest.raises(Exception, match="prepare the task first"):
        make(make_mlagentbench(tmp_path / "a", prepared=False), "ta")
    with pytest.raises(Exception, match="grades checkpoints, output/score.txt from the workspace"):
        make(make_mlagentbench(tmp_path / "b", workspace_eval=True), "tb")
    bench = make_mlagentbench(tmp_path / "c", incomplete=True)
    monkeypatch.setenv(mlagentbench.ROOT_VAR, str(bench.parent))
    folder = make(bench, "tc")
    assert [line for line in said if "incomplete starter" in line]
    assert not [line for line in said if "export" in line]     # the variable is set already
    assert str(tmp_path) not in "".join(p.read_text() for p in folder.glob("*.py")) + \
        (folder / "task.yaml").read_text()
    monkeypatch.delenv(mlagentbench.ROOT_VAR)
    with pytest.raises(Exception, match=f"needs the environment variable "
                                        f"{mlagentbench.ROOT_VAR}"):
        load_task(folder)


# -- a karpathy/autoresearch-style repo ------------------------------------------------------
KARPATHY_PREPARE = '''\
"""Read-only: data and the evaluation (stands in for karpathy/autoresearch's prepare.py)."""
TIME_BUDGET = 300


def evaluate_bpb(width, lr):
    """Stand-in for the real evaluation: lower is better, best near width 64, lr 0.01."""
    return 1.0 + ((width - 64) / 64) ** 2 + (lr - 0.01) ** 2 * 500
'''

KARPATHY_TRAIN = '''\
"""Editable (stands in for karpathy/autoresearch's train.py)."""
from prepare import evaluate_bpb

WIDTH = 32
LR = 0.02

val_bpb = evaluate_bpb(WIDTH, LR)
print("---")
print(f"val_bpb:          {val_bpb:.6f}")
print("training_seconds: 0.1")
print("total_seconds:    0.2")
print("peak_vram_mb:     45060.2")
print("mfu_percent:      39.80")
'''


def test_karpathy_style_repo_without_a_model_runs_after_init(tmp_path, mlflow_uri):
    """No model handed to the evaluation here (it takes two constants): init makes it a
    plain, unprotected task, and the loop runs it from what init wrote."""
    from loop.init.onboard import CONFIG_FILE, init
    repo = make_repo(tmp_path / "autoresearch", {
        "prepare.py": KARPATHY_PREPARE, "train.py": KARPATHY_TRAIN,
        "pyproject.toml": "[project]\nname = 'autoresearch'\n"}, task_dir=".")
    (repo / "program.md").write_text("Lower val_bpb. Only train.py may change.\n")
    commit_all(repo, "program")
    plan = init(repo, out=lambda s: None)
    assert (plan.shape, plan.metric, plan.protected) == ("script", "val_bpb", ["prepare.py"])
    commit_all(repo, "task")
    config = load_config(repo / CONFIG_FILE).with_overrides(iterations=3, tag="k")
    assert config.resolve(config.task) == repo.resolve() and config.judge.rule == "sequential"
    config.judge.rule = "strict"            # the stand-in has no noise: one run each
    stop = Engine(config, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    table = rows(repo, "k")
    assert float(table[0]["val_bpb"]) == pytest.approx(1.0 + 0.25 + 0.05, abs=1e-5)
    assert len(table) == 4 and table[0]["status"] == "keep"
    assert table[0]["memory_gb"] == "44.0"            # their peak_vram_mb line, in GB


# -- the other benchmarks: example task folders, offline stand-in scorers ---------------------
@pytest.mark.parametrize("name,metric,direction", [
    ("mlrbench-review", "review_score", "maximize"),
    ("mlbench-repo", "pass_rate", "maximize"),
    ("agentbench-agent", "success_rate", "maximize"),
])
def test_benchmark_examples_are_valid_tasks_with_offline_scorers(tmp_path, name, metric,
                                                                 direction):
    folder = ROOT / "examples" / name
    task = load_task(folder)
    assert (task.metric.name, task.metric.direction) == (metric, direction)
    assert task.evaluate and not task.is_editable(task.evaluate.split()[-1])
    _, result = check_task(folder, out=lambda s: None)
    assert result.status == "ok" and result.metric is not None, result.detail
