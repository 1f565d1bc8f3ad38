"""Small benchmark tasks laid out exactly as their benchmarks lay them out, generated for
the adapter tests: an MLE-bench competition (registry entry + prepared data) and an
MLAgentBench task (env/ + scripts/)."""
from __future__ import annotations

import csv
import random
import textwrap
from pathlib import Path

COMP = "tiny-tabular"


def _rows(n: int, rng: random.Random):
    rows = []
    for i in range(n):
        f = [rng.gauss(0, 1) for _ in range(4)]
        color = rng.choice(["red", "green", "blue"])
        score = f[0] * f[1] + 0.8 * f[2] - 0.5 * f[3] ** 2 + (0.7 if color == "red" else -0.2)
        label = "yes" if score + rng.gauss(0, 0.3) > 0 else "no"
        rows.append({"id": f"p{i:04d}", "f1": f"{f[0]:.4f}", "f2": f"{f[1]:.4f}",
                     "f3": f"{f[2]:.4f}", "f4": f"{f[3]:.4f}", "color": color, "label": label})
    return rows


def _write(path: Path, rows: list[dict], columns: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def make_mlebench(root: Path, registry_files: bool = True, leaderboard: bool | str = True):
    """(registry folder, data dir): as `mlebench prepare -c tiny-tabular` would leave them.
    Registry: mlebench/competitions/<id>/{config.yaml, grade.py, leaderboard.csv,
    description.md}; data: <data>/<id>/prepared/{public,private}/."""
    rng = random.Random(0)
    train, test = _rows(400, rng), _rows(200, rng)
    cols = ["id", "f1", "f2", "f3", "f4", "color", "label"]
    data = root / "data"
    public = data / COMP / "prepared" / "public"
    private = data / COMP / "prepared" / "private"
    _write(public / "train.csv", train, cols)
    _write(public / "test.csv", test, cols[:-1])
    _write(public / "sample_submission.csv", [{"id": r["id"], "label": "no"} for r in test],
           ["id", "label"])
    _write(private / "test.csv", test, ["id", "label"])
    description = ("# Tiny tabular\n\nPredict `label` (yes/no) for each test row. "
                   "Metric: accuracy.\n")
    (public / "description.md").write_text(description)
    registry = root / "mlebench" / "competitions" / COMP
    registry.mkdir(parents=True)
    if registry_files:
        (registry / "description.md").write_text(description)
        (registry / "config.yaml").write_text(textwrap.dedent(f"""\
            id: {COMP}
            name: Tiny Tabular
            competition_type: simple
            awards_medals: true
            prizes: null
            description: mlebench/competitions/{COMP}/description.md

            dataset:
              answers: {COMP}/prepared/private/test.csv
              sample_submission: {COMP}/prepared/public/sample_submission.csv

            grader:
              name: accuracy
              grade_fn: mlebench.competitions.{COMP}.grade:grade

            preparer: mlebench.competitions.{COMP}.prepare:prepare
            """))
        (registry / "grade.py").write_text(textwrap.dedent("""\
            import pandas as pd


            class InvalidSubmissionError(Exception):
                pass


            def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
                if len(submission) != len(answers):
                    raise InvalidSubmissionError("submission and answers differ in length")
                merged = answers.merge(submission, on="id", suffixes=("_true", "_pred"))
                if len(merged) != len(answers):
                    raise InvalidSubmissionError("submission ids do not match the answers")
                return float((merged["label_true"].astype(str)
                              == merged["label_pred"].astype(str)).mean())
            """))
        if leaderboard == "lfs":   # a clone without git-lfs: a pointer in place of the CSV
            (registry / "leaderboard.csv").write_text(
                "version https://git-lfs.github.com/spec/v1\n"
                "oid sha256:" + "ab" * 32 + "\nsize 125841\n")
        elif leaderboard:   # 60 teams, best first (higher accuracy is better)
            teams = [{"teamId": 1000 + i, "score": f"{0.95 - i * 0.007:.5f}",
                      "submissionDate": "2024-01-01"} for i in range(60)]
            _write(registry / "leaderboard.csv", teams, ["teamId", "score", "submissionDate"])
    return registry, data


MLAB_TRAIN = '''\
import csv

EPOCHS = 20
LEARNING_RATE = 0.01
USE_PRODUCTS = 0   # 1: add x1*x2, x1^2, x2^2 as features


def load(name):
    with open(name) as f:
        return list(csv.DictReader(f))


def features(r):
    x1, x2 = float(r["x1"]), float(r["x2"])
    return [1.0, x1, x2] + ([x1 * x2, x1 * x1, x2 * x2] if USE_PRODUCTS >= 1 else [])


train, test = load("train.csv"), load("test.csv")
data = [(features(r), float(r["y"])) for r in train]
w = [0.0] * len(data[0][0])
for _ in range(EPOCHS):
    for x, y in data:
        err = sum(a * b for a, b in zip(w, x)) - y
        w = [wi - LEARNING_RATE * err * xi for wi, xi in zip(w, x)]
print("weights:", w)
with open("submission.csv", "w") as f:
    f.write("id,y\\n" + "".join(f"{r['id']},{sum(a * b for a, b in zip(w, features(r)))}\\n"
                                for r in test))
'''

MLAB_EVAL = '''\
import os
import sys
sys.path.append("../env")
import pandas as pd


def get_score(submission_folder="../env"):
    submission = pd.read_csv(os.path.join(submission_folder, "submission.csv"))
    answer = pd.read_csv(os.path.join(os.path.dirname(__file__), "answer.csv"))
    return float((submission["y"] - answer["y"]).abs().mean())


if __name__ == "__main__":
    print(get_score())
'''


MLAB_WORKSPACE_EVAL = '''\
import os


def get_score(submission_folder="../env"):
    model = os.path.join(submission_folder, "checkpoints")   # a model the run left behind
    return float(open(submission_folder + "/output/score.txt").read())
'''


def make_mlagentbench(root: Path, prepared: bool = True, incomplete: bool = False,
                      workspace_eval: bool = False) -> Path:
    """MLAgentBench/benchmarks/tiny-regression: env/ (starter, data), scripts/ (problem,
    read-only list, eval.py with get_score, answer.csv). Lower MAE is better."""
    rng = random.Random(1)
    task = root / "MLAgentBench" / "benchmarks" / "tiny-regression"
    rows = []
    for i in range(600):
        x1, x2 = rng.uniform(-2, 2), rng.uniform(-2, 2)
        rows.append({"id": i, "x1": f"{x1:.4f}", "x2": f"{x2:.4f}",
                     "y": f"{2 * x1 - x2 * x2 + 0.5 * x1 * x2 + rng.gauss(0, 0.1):.4f}"})
    _write(task / "env" / "train.csv", rows[:400], ["id", "x1", "x2", "y"])
    _write(task / "env" / "test.csv", rows[400:], ["id", "x1", "x2"])
    _write(task / "scripts" / "answer.csv", rows[400:], ["id", "y"])
    (task / "env" / "train.py").write_text(MLAB_TRAIN)
    (task / "env" / "data_description.txt").write_text("x1, x2: inputs; y: target.\n")
    (task / "scripts" / "eval.py").write_text(MLAB_WORKSPACE_EVAL if workspace_eval
                                              else MLAB_EVAL)
    if incomplete:   # as the real house-price and spaceship-titanic starters are shipped
        (task / "env" / "train.py").write_text(MLAB_TRAIN.replace(
            "for _ in range(EPOCHS):", "# *****\n# write and train the model here\n# *****\n"
            "for _ in range(EPOCHS):"))
    if not prepared:   # scripts/prepare.py not run yet: no data in env/, no answers
        for name in ("train.csv", "test.csv"):
            (task / "env" / name).unlink()
        (task / "scripts" / "answer.csv").unlink()
    (task / "scripts" / "research_problem.txt").write_text(
        "Given a training script on a dataset train.py, improve upon the current model "
        "performance (mean absolute error on the test set). Save test predictions to "
        "submission.csv as shown in train.py.")
    (task / "scripts" / "read_only_files.txt").write_text("./train.csv\n./test.csv\n")
    (task / "scripts" / "prepare.py").write_text("# data already prepared\n")
    return task


# -- MLE-bench competitions the built-in grader supports, for parity with MLE-bench's own ----
# id: (config.yaml grader name, id column, target column, what the answers hold)
PARITY = {
    "spaceship-titanic": ("accuracy", "PassengerId", "Transported", "bool"),
    "tabular-playground-series-dec-2021": ("multi-class-classification-accuracy", "Id",
                                           "Cover_Type", "class"),
    "random-acts-of-pizza": ("auc-roc", "request_id", "requester_received_pizza", "binary"),
    "tabular-playground-series-may-2022": ("auc-roc", "id", "target", "binary"),
    "statoil-iceberg-classifier-challenge": ("log-loss", "id", "is_iceberg", "binary"),
    "dogs-vs-cats-redux-kernels-edition": ("log-loss", "id", "label", "binary"),
    "new-york-city-taxi-fare-prediction": ("root-mean-squared-error", "key", "fare_amount",
                                           "real"),
    "petfinder-pawpularity-score": ("root-mean-squared-error", "Id", "Pawpularity", "1-100"),
}


def parity_answers(kind: str, n: int, rng: random.Random) -> list:
    if kind == "bool":
        return [rng.choice(["True", "False"]) for _ in range(n)]
    if kind == "class":
        return [str(rng.randint(1, 7)) for _ in range(n)]
    if kind == "binary":
        return [str(rng.randint(0, 1)) for _ in range(n)]
    if kind == "1-100":
        return [str(rng.randint(1, 100)) for _ in range(n)]
    return [f"{rng.uniform(2, 60):.2f}" for _ in range(n)]


def parity_ids(comp: str, n: int) -> list[str]:
    styles = {"spaceship-titanic": "{:04d}_01", "random-acts-of-pizza": "t3_{:x}",
              "new-york-city-taxi-fare-prediction": "2015-01-27 13:08:24.{:07d}",
              "petfinder-pawpularity-score": "{:032x}", "statoil-iceberg-classifier-challenge":
              "{:08x}"}
    return [styles.get(comp, "{}").format(7 * i + 3) for i in range(n)]


def parity_submissions(kind: str, ids: list[str], truth: list[str], id_col: str, target: str,
                       rng: random.Random) -> dict[str, list[dict]]:
    """Named submissions, good and bad, as a participant might write them."""
    def guess(y):
        if kind == "bool":
            return y if rng.random() < 0.8 else ("False" if y == "True" else "True")
        if kind == "class":
            return y if rng.random() < 0.6 else str(rng.randint(1, 7))
        if kind == "binary":
            return f"{min(1.0, max(0.0, 0.3 * int(y) + rng.uniform(0, 0.7))):.4f}"
        guessed = float(y) + rng.gauss(0, 3)
        return f"{min(100.0, max(1.0, guessed)) if kind == '1-100' else guessed:.3f}"
    good = [{id_col: i, target: guess(y)} for i, y in zip(ids, truth)]
    out = {"good": good, "shuffled": rng.sample(good, len(good)),
           "extra row": good + [{id_col: ids[0] + "9", target: good[0][target]}],
           "missing row": good[:-1],
           "duplicate id": good[:-1] + [dict(good[0])],
           "unknown id": good[:-1] + [{id_col: ids[-1] + "x", target: good[-1][target]}],
           "no target column": [{id_col: r[id_col], "prediction": r[target]} for r in good],
           "blank prediction": [dict(good[0], **{target: ""})] + good[1:],
           "NA prediction": [dict(good[0], **{target: "NA"})] + good[1:],
           "text prediction": [dict(good[0], **{target: "unknown"})] + good[1:]}
    if kind == "bool":
        as01 = {"True": "1", "False": "0"}
        out["coded 0/1"] = [dict(r, **{target: as01[r[target]]}) for r in good]
        out["lowercase"] = [dict(r, **{target: r[target].lower()}) for r in good]
        out["yes/no"] = [dict(r, **{target: "yes" if r[target] == "True" else "no"})
                         for r in good]
    if kind == "binary":
        out["hard 0/1"] = [dict(r, **{target: str(round(float(r[target])))}) for r in good]
        out["out of range"] = [dict(good[0], **{target: "1.2"})] + good[1:]
    if kind in ("real", "1-100"):
        out["out of range"] = [dict(good[0], **{target: "-5"})] + good[1:]
    return out


def write_csv(path: Path, rows: list[dict]) -> Path:
    columns = list(rows[0]) if rows else ["id"]
    _write(path, rows, columns)
    return path
