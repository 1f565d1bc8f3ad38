"""benchmarks/init_corpus.py: the runner that measures init on public repos, checked on tiny
repos of our own (bare mirrors made here, no network): its per-field comparison, the hint it
follows, and a whole run through the real `autoresearch init`."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import init_corpus  # noqa: E402
from init_corpus import Expect, compare, hint_of, init_argv  # noqa: E402

TRAIN = '''\
LEARNING_RATE = 0.01
SEQ_LEN = 64
WIDTH = 32

def main():
    loss = LEARNING_RATE * SEQ_LEN / WIDTH
    print(f"val_loss: {loss:.4f}")

if __name__ == "__main__":
    main()
'''
SILENT = 'import json\njson.dump({"lr": 0.1}, open("out.json", "w"))\n'


def _mirror(root: Path, name: str, files: dict[str, str]) -> str:
    """A bare mirror <root>/<owner>+<name>/repo of a one-commit repo; its commit."""
    work = root / "src" / name
    work.mkdir(parents=True)
    for rel, text in files.items():
        (work / rel).write_text(text)
    git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--bare", str(work),
                    str(root / "mirror" / f"me+{name}" / "repo")], check=True)
    return commit


def test_compare_marks_each_field():
    task = {"run": "python train.py", "editable": ["train.py"], "protected": ["prep.py"],
            "metric": {"name": "val_loss", "direction": "minimize"},
            "search_space": {"LEARNING_RATE": {"log_range": [0.001, 0.1]},
                             "SEQ_LEN": {"choices": [32, 64]}},
            "on_timeout": "last"}
    exp = Expect(script="train.py", metric=["val_loss", "validation_loss"],
                 direction="minimize", editable=["train.py"], protected=["prep.py"],
                 searched=["learning_rate"], measurement={"SEQ_LEN": "sets the validation batch"},
                 on_timeout="fail")
    got = compare(exp, task)
    assert {k: v.value for k, v in got.items()} == {
        "script": "right", "metric": "right", "reads": "-", "direction": "right",
        "editable": "right",
        "protected": "right", "search": "WRONG", "on_timeout": "WRONG", "next": "-"}
    assert got["search"].kind == "measurement searched"
    assert "SEQ_LEN (sets the validation batch)" in got["search"].why


def test_compare_a_metric_where_none_should_be_is_a_wrong_metric():
    got = compare(Expect(refuse="prints nothing"), {"metric": "best_score"})
    assert got["metric"].value == "WRONG" and got["metric"].kind == "wrong metric"


def test_compare_settings_by_flag_and_dotted_path():
    exp = Expect(searched=["learning_rate", "log-interval"])
    space = {"search_space": {"training.learning_rate": {}, "--log-interval": {}}}
    assert compare(exp, space)["search"].value == "right"
    missed = compare(Expect(searched=["dropout"]), space)["search"]
    assert missed.value == "WRONG" and missed.kind == "setting missed"


def test_hint_follows_a_named_flag_not_a_placeholder():
    assert hint_of("init: ... if that is your validation split, pass --metric test_loss",
                   []) == ["--metric", "test_loss"]
    assert hint_of("init: no metric found; pass --metric NAME --metric-pattern REGEX",
                   []) is None
    assert hint_of("pass --metric test_loss", ["--metric test_loss"]) is None
    assert hint_of("or read val_bpb unprotected: pass --metric val_bpb --metric-pattern "
                   "'^val_bpb:\\s*([0-9.]+)'", []) == [
        "--metric", "val_bpb", "--metric-pattern", "^val_bpb:\\s*([0-9.]+)"]
    assert init_argv(["--script", "t.py", "--args", "--cpu=True"]) == \
        ["--script", "t.py", "--args=--cpu=True"]


def test_a_run_over_mirrors_reports_fields_refusals_and_missing_repos(tmp_path, capsys):
    good = _mirror(tmp_path, "good", {"train.py": TRAIN})
    silent = _mirror(tmp_path, "silent", {"train.py": SILENT})
    manifest = {"repos": [
        {"id": "good", "repo": "me/good", "commit": good,
         "expect": {"script": "train.py", "metric": "val_loss", "direction": "minimize",
                    "editable": ["train.py"], "searched": ["LEARNING_RATE"],
                    "no_effect": {"NOT_THERE": "never defined"},
                    "sample": {"output": "val_loss: 0.0100\n", "values": {"val_loss": 0.01}}}},
        {"id": "silent", "repo": "me/silent", "commit": silent,
         "expect": {"refuse": "it prints no number"}},
        {"id": "absent", "repo": "me/absent", "commit": "0" * 40,
         "expect": {"metric": "val_loss"}}]}
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert init_corpus.main(["--mirror", str(tmp_path / "mirror"), "--manifest", str(path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.split() and line.split()[0] in ("good", "silent", "absent")}
    assert rows["good"][:6] == ["ok"] * 6       # init, script, metric, reads, direction, editable
    assert rows["good"][-1] == "ok"             # next: mutate has LEARNING_RATE to search
    assert rows["silent"] == ["refused*", "ok"]
    assert rows["absent"] == ["not", "fetched"]
    assert "absent: not fetched (fetch github:me/absent)" in out
    assert "right with no flags but scale-down: 2/2 (100 %)" in out
    assert "wrong with exit 0, by kind: none" in out


def test_reads_checks_the_pattern_on_a_sample_of_the_output():
    sample = {"output": "Train MAE: 7,504\nValidation MAE: 18,450\n",
              "values": {"validation_mae": 18450}}
    exp = Expect(metric="validation_mae", sample=sample)
    stops_at_comma = {"metric": {"name": "validation_mae",
                                 "pattern": r"Validation\s+MAE:\s*([0-9.]+)"}}
    got = compare(exp, stops_at_comma)["reads"]
    assert got.value == "WRONG" and got.kind == "wrong metric" and "reads 18.0" in got.why
    whole = {"metric": {"name": "validation_mae", "pattern": r"Validation\s+MAE:\s*([0-9,]+)"}}
    assert compare(exp, whole)["reads"].value == "right"     # a run reads 18,450 as 18450
    plain = Expect(metric="val_loss", sample={"output": "val_loss: 1.5\n",
                                              "values": {"val_loss": 1.5}})
    assert compare(plain, {"metric": "val_loss"})["reads"].value == "right"


def test_next_step_with_nothing_to_search_offline_is_wrong():
    task = {"metric": "val_loss"}
    got = compare(Expect(), task, {"proposer": {"kind": "mutate"}})["next"]
    assert got.value == "WRONG" and got.kind == "next step fails"
    assert compare(Expect(), task, {"proposer": {"kind": "llm"}})["next"].value == "right"
    spaced = {"metric": "val_loss", "search_space": {"LR": {"range": [0.1, 1.0]}}}
    assert compare(Expect(), spaced, {"proposer": {"kind": "tune"}})["next"].value == "right"


def test_stand_in_gives_init_an_environment_and_the_data_files(tmp_path):
    commit = _mirror(tmp_path, "shaped", {"prepare.py": "import tiktoken\nimport yaml\n"})
    entry = init_corpus.Entry(id="shaped", repo="me/shaped", commit=commit, standin={
        "venv": True, "stub_modules": ["tiktoken"], "files": ["~/.cache/shaped/val.bin"]})
    repo = init_corpus.checkout(tmp_path / "mirror", entry, tmp_path / "work")
    home = tmp_path / "home"
    init_corpus.stand_in(repo, entry, home)
    assert (home / ".cache" / "shaped" / "val.bin").is_file()
    done = subprocess.run([str(repo / ".venv" / "bin" / "python"), "-c", "import prepare"],
                          cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr     # the stub, and this Python's PyYAML
