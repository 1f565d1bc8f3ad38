"""The boundary with untrusted input (loop/untrusted.py): whatever a reply or a run writes,
the night goes on, and no record (terminal, results.tsv, commit messages, journal, MLflow)
holds a control character. Real git repos, real runs, the real `openai` client over HTTP."""
import csv
import json
import os
import re

from conftest import TOY_TRAIN, git, make_repo, run_cli
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

# prepare.py is protected, and `**/*.py` does not match it by fnmatch: only its one spelling
# keeps `././prepare.py` out
TASK = """\
name: toy
editable: [train.py, "**/*.py"]
protected: [prepare.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 10
grace_s: 5
"""
PREPARE = "# the protected harness\n"
HOSTILE = "move X\x00 to 1 \x1b[2J\x1b[31mred\u202e \ud800 end"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def hostile_repo(tmp_path):
    return make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TOY_TRAIN,
                                         "prepare.py": PREPARE, "lib/util.py": "N = 1\n"})


def rows(repo, tag):
    with open(repo / ".autoresearch" / tag / "results.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def assert_records_clean(repo, tag):
    """results.tsv, every attempt's commit message and the journal hold no control
    character (a log's line breaks aside), and prepare.py never changed."""
    table = (repo / ".autoresearch" / tag / "results.tsv").read_text()
    assert not CONTROL.search(table.replace("\t", "").replace("\n", "")), table
    refs = git(repo, "for-each-ref", "--format=%(refname)", f"refs/autoresearch/{tag}/")
    for ref in [*refs.splitlines(), f"autoresearch/{tag}"]:
        message = git(repo, "log", "-1", "--format=%B", ref)
        assert not CONTROL.search(message.replace("\n", "")), (ref, message)
    for line in (repo / ".autoresearch" / tag / "journal.jsonl").read_text().splitlines():
        for value in json.loads(line).values():
            assert not (isinstance(value, str) and CONTROL.search(value)), line
    assert git(repo, "show", f"autoresearch/{tag}:task/prepare.py") == PREPARE.rstrip("\n")


class Scripted:
    """A proposer that writes what a hostile model would, bypassing every edit format."""

    def __init__(self, script):
        self.script = script

    def propose(self, context):
        description, files = self.script[context.iteration - 1]
        return Proposal(description, files=files)


def test_hostile_proposals_are_failed_edits_and_the_night_goes_on(tmp_path, mlflow_uri):
    repo = hostile_repo(tmp_path)
    better = TOY_TRAIN.replace("X = 3.0", "X = 1.0")
    crash = TOY_TRAIN + 'raise RuntimeError("boom \\x1b[2J\\x1b]0;owned\\x07 \\x00")\n'
    script = [
        (HOSTILE, {"train.py": better}),                              # runs, kept
        ("edit the harness", {"././prepare.py": "print('score: 0')\n"}),
        ("plant a hook", {".git/hooks/x.py": "import os\n"}),
        ("plant byte code", {"__pycache__/x.py": "import os\n"}),
        ("a path git refuses", {"git~1/x.py": "import os\n"}),         # git's own check
        ("crash loudly", {"train.py": crash}),
    ]
    lines = []
    cfg = Config(task="task", tag="adv", iterations=len(script), base_dir=repo,
                 max_consecutive_failures=len(script) + 1, judge=JudgeConfig(rule="strict"))
    stop = Engine(cfg, out=lines.append, proposer=Scripted(script)).run()

    assert (stop.reason, stop.exit_code) == ("iterations", 0), stop.message
    table = rows(repo, "adv")
    assert [r["status"] for r in table] == ["keep", "keep", "bad_edit", "bad_edit", "bad_edit",
                                            "bad_edit", "crash"]
    assert table[1]["description"] == ("move X to 1 \\x1b[2J\\x1b[31mred\\u202e \\ud800 end")
    assert table[2]["reason"] == "prepare.py: protected file (the harness and grader may " \
                                 "not be edited)"
    assert table[3]["reason"] == ".git/hooks/x.py: inside .git/, which no edit may write"
    assert table[4]["reason"] == "__pycache__/x.py: inside __pycache__/, which no edit may write"
    assert table[5]["reason"].startswith("git refused the change: ")
    assert "\\x1b[2J\\x1b]0;owned\\x07" in table[6]["reason"]
    assert not any(CONTROL.search(line) for line in lines), lines
    assert_records_clean(repo, "adv")
    from mlflow.tracking import MlflowClient
    tags = MlflowClient(mlflow_uri).get_run(table[1]["mlflow_run_id"]).data.tags
    assert tags["description"] == table[1]["description"]


def json_reply(description, sets=(), edits=()):
    return json.dumps({"description": description,
                       "set": [{"name": n, "value": v} for n, v in sets],
                       "edits": [{"file": f, "search": s, "replace": r} for f, s, r in edits]})


def test_a_night_of_hostile_json_replies_over_http_finishes(tmp_path, mlflow_uri,
                                                           openai_server):
    repo = hostile_repo(tmp_path)
    harness = json_reply("edit the harness", edits=[("././prepare.py", PREPARE, "pass\n")])
    openai_server.models = ["m"]
    openai_server.script(
        json_reply(HOSTILE, sets=[("X", "1.0")]),                   # 1: kept, cleaned
        json_reply("a huge Y", sets=[("Y", "2**4000000000")]),      # 2: a repair turn...
        json_reply("Y to 4", sets=[("Y", "4")]),                    # ... that is answered
        harness, harness, harness)                                  # 3: bad_edit
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-x"}
    res = run_cli("run", "--task", "task", "--tag", "night", "--iterations", "3", "--judge",
                  "strict", "--proposer", "llm", "--model", "m", cwd=repo, env=env)

    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "\x1b" not in res.stdout + res.stderr
    table = rows(repo, "night")
    assert [r["status"] for r in table] == ["keep", "keep", "keep", "bad_edit"]
    assert table[1]["description"] == "move X to 1 \\x1b[2J\\x1b[31mred\\u202e \\ud800 end"
    repair = openai_server.requests[2]["messages"][-1]["content"]
    assert "the value '2**4000000000' is not a number this engine reads: 2**4000000000 is " \
           "beyond the range of a float (about 1.8e308)" in repair
    assert "prepare.py: protected file" in table[3]["reason"]
    assert len(openai_server.requests) == 6
    assert_records_clean(repo, "night")
