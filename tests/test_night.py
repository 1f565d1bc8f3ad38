"""The engine's loop (loop/engine/night.py with staging, flight, keep, the scheduler and the
judge) against a backend that runs nothing (tests/table_backend.py): a run's metric is read
off its commit's train.py. Git, the journal, results.tsv and MLflow are real; no experiment
process starts, so each night here takes seconds. The whole-night tests with real runs are
test_parallel_slots.py, test_engine.py and test_views_agree.py."""
import re

from conftest import git, make_repo
from helpers import (EditsByIteration, assert_same_story, journal, run_in_thread, rows,
                     wait_for)
from loop.engine.engine import Engine
from loop.engine.night import MAX_REPEATED_ANSWERS
from loop.proposers.base import Proposal, Usage
from loop.setup.config import Config, JudgeConfig
from table_backend import TableBackend

TASK = """\
name: toy
editable: [train.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 10
"""
# A and B sit apart so that a change to each applies after the other was kept
TRAIN = "A = 4.0\n\n# a comment between\n\nB = 4.0\nprint(f'score: {A + B}')\n"


def score(files, job):
    """A + B, as train.py would print it."""
    text = files["train.py"]
    return sum(float(re.search(rf"^{name} = (\S+)", text, re.M)[1]) for name in "AB")


def night(tmp_path, proposer, iterations, workers=1, held=(), **config):
    """Run a night on the fake backend; `held` iterations answer when the test releases them
    (in the order given by `release`). Returns (repo, table, console lines, backend)."""
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN})
    made = {}

    def backend(**kw):
        made["it"] = TableBackend(score, held, **kw)
        return made["it"]
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=iterations, workers=workers,
                 judge=JudgeConfig(rule="strict"), **config)
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=proposer,
                                       backend=backend))
    return repo, thread, box, lines, made


def finish(thread, box, lines):
    thread.join(120)
    assert not thread.is_alive() and "stop" in box, "\n".join(lines)
    return box["stop"]


def test_a_better_change_is_kept_and_a_worse_one_restored(tmp_path, mlflow_uri):
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("B = 4.0", "B = 9.0")]}
    repo, thread, box, lines, _ = night(tmp_path, EditsByIteration(edits), 2)
    assert finish(thread, box, lines).reason == "iterations"
    table = assert_same_story(repo, mlflow_uri)
    assert [(r["status"], float(r["score"])) for r in table] == [
        ("keep", 8.0), ("keep", 6.0), ("discard", 11.0)]
    assert "A = 2.0" in git(repo, "show", "autoresearch/t:task/train.py")
    assert "B = 9.0" in git(repo, "show", f"{table[2]['attempt_ref']}:task/train.py")


def test_a_keep_whose_base_moved_is_replayed_on_the_tip_and_measured_there(tmp_path,
                                                                          mlflow_uri):
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("B = 4.0", "B = 1.0")]}
    repo, thread, box, lines, made = night(tmp_path, EditsByIteration(edits), 2, workers=2,
                                           held=(1, 2))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    made["it"].release(1)
    assert wait_for(lambda: len(rows(repo)) == 2)
    made["it"].release(2)
    finish(thread, box, lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep"]
    assert float(table[2]["score"]) == 3.0 and table[2]["reason"].startswith("replayed onto")
    replays = [e for e in journal(repo) if e["event"] == "replay"]
    assert [(e["iteration"], e["samples"]) for e in replays] == [(2, [5.0])]
    # iteration 2 ran twice: on its base, then on the tip
    assert [j.iteration for j in made["it"].submitted].count(2) == 2


def test_a_change_that_no_longer_applies_on_the_tip_is_proposed_again_there(tmp_path,
                                                                            mlflow_uri):
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("A = 4.0", "A = 1.0")],
             ("redo", 2): [("A = 2.0", "A = 0.5")]}
    proposer = EditsByIteration(edits)
    repo, thread, box, lines, made = night(tmp_path, proposer, 2, workers=2, held=(1, 2))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    made["it"].release(1)
    assert wait_for(lambda: len(rows(repo)) == 2)
    made["it"].release(2)
    finish(thread, box, lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep"], table[2]["reason"]
    assert float(table[2]["score"]) == 4.5 and table[2]["reason"].startswith("proposed again")
    [(n, redo)] = proposer.redos
    assert n == 2 and "-A = 4.0" in redo.patch and "+A = 1.0" in redo.patch


class SameChangeEachTime:
    """Iteration 1 sets A = 9.0 (worse: discarded, so the base stays); every later answer
    sets A = 9.0 again, each costing 0.01 $."""

    def __init__(self):
        self.answers = 0

    def propose(self, context):
        self.answers += 1
        text = context.files["train.py"].replace("A = 4.0", "A = 9.0")
        return Proposal(f"answer {self.answers}", files={"train.py": text},
                        usage=Usage(requests=1, cost_usd=0.01))


def test_answers_repeating_a_judged_change_end_as_a_bad_edit_and_each_is_paid_once(
        tmp_path, mlflow_uri):
    proposer = SameChangeEachTime()
    repo, thread, box, lines, made = night(tmp_path, proposer, 2)
    finish(thread, box, lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "discard", "bad_edit"]
    assert f"answered {MAX_REPEATED_ANSWERS} times" in table[2]["reason"]
    # 1 answer for iteration 1, MAX_REPEATED_ANSWERS for iteration 2: every one paid once,
    # the repeats as journalled drops, the last as the bad_edit's own record
    assert proposer.answers == 1 + MAX_REPEATED_ANSWERS
    drops = [e["cost_usd"] for e in journal(repo) if e["event"] == "drop"]
    ends = [e for e in journal(repo) if e["event"] == "end"]
    paid = sum(drops) + sum((e.get("record") or e).get("usage", {}).get("cost_usd", 0)
                            for e in ends)
    assert len(drops) == MAX_REPEATED_ANSWERS - 1
    assert abs(paid - 0.01 * proposer.answers) < 1e-9
