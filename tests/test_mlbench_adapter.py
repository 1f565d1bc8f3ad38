"""ML-Bench through `autoresearch task mlbench`: instances in the dataset's column format
(saved as JSON lines, as `datasets`' to_json writes them), a small target repository of our
own, and ML-Bench's pass rule run by the protected grader inside the sandbox."""
import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from loop.adapters import mlbench
from loop.adapters.mlbench_grade import arguments_match, assess, type_fits
from loop.errors import UsageError
from loop.advice.check_task import check_task

TRAIN = """\
import argparse, sys, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--sleep", type=float, default=0)
a = p.parse_args()
time.sleep(a.sleep)
print("trained", a.lr, a.epochs)
"""


def make_repo(root: Path) -> Path:
    (root / "examples").mkdir(parents=True)
    (root / "README.md").write_text("# tinyfit\n\nRun examples/train.py --lr X --epochs N.\n")
    (root / "examples" / "train.py").write_text(TRAIN)
    return root


def row(i, instruction, arguments, out_type="Bash Script", github="https://github.com/x/tinyfit"):
    return {"github_id": 9, "github": github, "repo_id": i, "id": 100 + i, "path": "./examples",
            "arguments": str(arguments), "instruction": instruction, "oracle": "README part",
            "type": out_type, "output": "python train.py ...", "prefix_code": ""}


ROWS = [row(1, "Train with lr 0.01 for 3 epochs", {"lr": "0.01", "epochs": "3"}),
        row(2, "Train with lr 0.5", {"lr": "0.5"}),
        row(3, "Print the learning rate 0.25 in Python", {"lr": "0.25"}, "Python Code"),
        row(4, "Train slowly with lr 0.1", {"lr": "0.1"}),
        row(5, "Train with lr 0.2 for 2 epochs", {"lr": "0.2", "epochs": "2"})]

ANSWERS = {
    101: ["python train.py --lr 0.01 --epochs 3"],                     # passes
    102: ["python train.py --lr 0.05 ", "python train.py --lr 0.5 "],  # 1st lacks 0.5: pass@2
    103: ["python train.py --lr 0.25 "],                               # a script, Python asked
    104: ["python train.py --lr 0.1 --sleep 30"],                      # still running: a pass
    105: ["python train.py --lr 0.2 --epochs 2 --bogus"],              # exits 2
}
SCRIPTED_AGENT = f"""\
import json, os
ANSWERS = {json.dumps({str(k): v for k, v in ANSWERS.items()})}
out = os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "commands.jsonl")
with open(out, "w") as f:
    for line in open("instructions.jsonl"):
        item = json.loads(line)
        f.write(json.dumps({{"id": item["id"], "outputs": ANSWERS[str(item["id"])]}}) + "\\n")
"""


def save_rows(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_pass_rule_is_ml_benchs(tmp_path):
    assert arguments_match("python train.py --LR 0.01 --epochs 3", {"lr": "0.01", "e": 3})
    assert not arguments_match("python train.py --lr 0.01", {"lr": "0.01", "epochs": "3"})
    assert type_fits("bash run.sh --x 1", "Bash Script")
    assert type_fits("python a.py ", "Bash Script")
    assert not type_fits("import os\nprint(1)", "Bash Script")
    assert type_fits("import os\nprint(1)", "Python Code")
    assert not type_fits("python a.py --x", "Python Code")
    repo = make_repo(tmp_path / "tinyfit")
    code = {"id": 1, "path": "./examples", "arguments": "{'lr': '0.25'}", "type": "Python Code"}
    assert assess(code, ["import sys\nprint(0.25)"], repo, 5, "", print) == {1: 1, 2: 1, 5: 1}
    assert assess(code, ["import sys\nprint(0.25); sys.exit(1)", "print('lr', 0.25)"], repo,
                  5, "", print) == {1: 0, 2: 1, 5: 1}


def test_a_task_from_saved_instances_is_graded_by_the_pass_rule_in_the_sandbox(
        tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repos" / "tinyfit")
    other = row(9, "elsewhere", {"a": 1}, github="https://github.com/y/other")
    rows = save_rows(tmp_path / "ml-bench-quarter.jsonl", ROWS + [other])
    monkeypatch.setenv(mlbench.ROOT_VAR, str(tmp_path / "repos"))
    out = mlbench.make_task(rows, repo, tmp_path / "task", exec_timeout_s=2)
    spec = yaml.safe_load((out / "task.yaml").read_text())
    told = [json.loads(l) for l in (out / "instructions.jsonl").read_text().splitlines()]
    assert [t["id"] for t in told] == [101, 102, 103, 104, 105]          # not the other repo
    assert not {"arguments", "type", "output"} & set(told[0])            # answers stay private
    assert "Train with lr 0.01 for 3 epochs" in spec["description"]
    assert spec["private"] == "${AUTORESEARCH_MLBENCH}/mlbench-tinyfit.private"
    assert "/" + tmp_path.name not in (out / "task.yaml").read_text()     # no machine path
    (out / "agent.py").write_text(SCRIPTED_AGENT)
    lines = []
    _, result = check_task(out, out=lines.append)
    assert result.status == "ok", (result.detail, lines)
    assert result.metric == pytest.approx(2 / 5)                         # 101 and 104
    assert not (repo / "examples" / "temp.py").exists()                  # ran in a copy


def test_instances_of_another_shape_or_repo_are_refused_in_one_line(tmp_path):
    repo = make_repo(tmp_path / "tinyfit")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "instruction": "x"}) + "\n")
    with pytest.raises(UsageError, match="not ML-Bench's instance format"):
        mlbench.make_task(bad, repo, tmp_path / "t")
    rows = save_rows(tmp_path / "rows.jsonl", [row(1, "x", {"a": 1},
                                                   github="https://github.com/y/other")])
    out = run_cli("task", "mlbench", str(rows), "--repo", str(repo), "--out",
                  str(tmp_path / "t"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no instance is for tinyfit" in out.stderr
