"""Several experiments at once: slots, candidates finishing out of order (kept, their change
made again on the new best and measured again, or proposed again there when it does not
apply), the same change never run twice, a crash while others run,
kill -9 with runs in flight, and proposals requested ahead from a slow LLM server."""
import os
import signal
import subprocess
import sys
import threading

import pytest

from conftest import git, make_repo, processes_with_env, run_cli
from helpers import (GATED_TRAIN, EditsByIteration, assert_same_story, ended,
                     gated_repo, journal, run_in_thread, wait_for)
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine
from loop.errors import ConfigError
from loop.proposers.base import Proposal
from loop.run.backends.devices import THREAD_VARS, slot_envs


ADJACENT_TRAIN = GATED_TRAIN.replace(
    "A = 4.0\n# A and B are apart, so that changes to each merge cleanly (git conflicts on "
    "adjacent lines)\n\nB = 4.0\n", "A = 4.0\nB = 4.0\n")


def two_slots_in_order(repo, gates, made=None, **config):
    """Iterations 1 and 2 on two slots under the strict rule (`made`: a proposer object;
    `config`: more Config fields), both staged on the baseline,
    then let finish in order (1, then 2); returns the console lines and the engine's box."""
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 judge=JudgeConfig(rule="strict"), **config)
    lines: list[str] = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=made))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    for n in (1, 2):
        (gates / str(n)).write_text("")
        assert wait_for(lambda n=n: ended(repo, n)), "\n".join(lines)
    thread.join(120)
    return lines, box


def test_out_of_order_keep_replay_and_proposed_again(tmp_path, mlflow_uri):
    """1 finishes first (kept); 2 would be kept, its change is made again on 1 and kept only
    after being measured again there; 3 would be kept too, but its change touches the line 1
    changed: it is not lost, the proposer is asked again on the new best (told what the
    change was), and that answer is measured and kept."""
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 2.0")],                        # 8 -> 6
             2: [("B = 4.0", "B = 1.0")],                        # 8 -> 5 on the old base
             3: [("A = 4.0", "A = 0.5"), ("B = 4.0", "B = 2.0")],  # 2.5: A's line again
             ("redo", 3): [("A = 2.0", "A = 0.5")]}              # on 1 + 2: 0.5 + 1 = 1.5
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=3, workers=3,
                 judge=JudgeConfig(rule="strict"))
    lines = []
    proposer = EditsByIteration(edits)
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=proposer))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 4)
    for n in (1, 2, 3):
        (gates / str(n)).write_text("")
        assert wait_for(lambda n=n: ended(repo, n)), "\n".join(lines)
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep", "keep"], "\n".join(lines)
    assert float(table[1]["score"]) == 6.0
    assert float(table[2]["score"]) == 3.0            # measured again on the new base (2 + 1)
    assert table[2]["reason"].startswith("replayed onto")
    assert float(table[3]["score"]) == 1.5            # the answer, measured on 1 + 2
    assert table[3]["reason"].startswith("proposed again on ")
    assert "no longer has the line `A = 4.0`" in table[3]["reason"]
    assert not any("conflict" in r["reason"] for r in table)
    [(n, redo)] = proposer.redos
    assert n == 3 and redo.description == "edit 3" and "better by" in redo.verdict
    assert "-A = 4.0" in redo.patch and "+A = 0.5" in redo.patch
    # one linear history: 3 on 2 on 1
    kept = git(repo, "rev-list", "main..autoresearch/t").split()
    assert len(kept) == 3
    assert git(repo, "rev-parse", f"{kept[1]}^") == kept[2]
    assert git(repo, "rev-parse", table[1]["attempt_ref"]) == kept[2]
    final = git(repo, "show", "autoresearch/t:task/train.py")
    assert "A = 0.5" in final and "B = 1.0" in final
    # every attempt keeps its ref, those before a replay or a new proposal too
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/autoresearch/t/").split()
    assert any("/attempt-2-on-" in r for r in refs) and any("/attempt-3-on-" in r for r in refs)
    replays = [e for e in journal(repo) if e["event"] == "replay"]
    assert [e["iteration"] for e in replays] == [2, 3] and replays[0]["samples"] == [5.0]


def test_a_change_next_to_a_kept_one_is_made_again_not_lost(tmp_path, mlflow_uri):
    """Issue 16: with constants on adjacent lines, a 3-way merge refused a would-be keep
    because the line above it was kept meanwhile. The change is made again on the tip."""
    repo, gates = gated_repo(tmp_path, ADJACENT_TRAIN)
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("B = 4.0", "B = 1.0")]}
    lines, box = two_slots_in_order(repo, gates, EditsByIteration(edits))
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep"], table[2]["reason"]
    assert float(table[2]["score"]) == 3.0 and table[2]["reason"].startswith("replayed onto")
    final = git(repo, "show", "autoresearch/t:task/train.py")
    assert "A = 2.0\nB = 1.0\n" in final


def test_a_crash_in_one_slot_while_another_runs(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    (gates / "crash-1").write_text("")
    edits = {1: [("A = 4.0", "A = 3.0")], 2: [("B = 4.0", "B = 3.0")]}
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 judge=JudgeConfig(rule="strict"))
    lines = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    (gates / "1").write_text("")
    assert wait_for(lambda: ended(repo, 1))
    assert not ended(repo, 2)                          # the other slot is still running
    (gates / "2").write_text("")
    thread.join(120)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"]
    assert "exit code 1" in table[1]["reason"]
    assert float(table[2]["score"]) == 7.0


def _holding(gates):
    return processes_with_env(f"GATE_DIR={gates}")


def test_kill_9_with_three_runs_in_flight_then_resume(tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_uri}
    args = ["run", "--task", "task", "--tag", "t", "--iterations", "3", "--judge", "strict",
            "--workers", "3"]
    proc = subprocess.Popen([sys.executable, "-m", "loop", *args], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_for(lambda: (repo / ".autoresearch/t/journal.jsonl").exists() and
                     sum(e["event"] == "begin" for e in journal(repo)) == 4)
    assert wait_for(lambda: len(_holding(gates)) >= 3)      # three runs are waiting
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -9
    for n in (1, 2, 3):
        (gates / str(n)).write_text("")
    res = run_cli(*args, cwd=repo, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("interrupted; redoing it") == 3
    assert not _holding(gates)
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 4
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/autoresearch/t/").split()
    assert sum("/interrupted-" in r for r in refs) == 3
    from helpers import mlflow_runs
    client, parents, _ = mlflow_runs(mlflow_uri)
    from mlflow.entities import ViewType
    runs = client.search_runs([parents[0].info.experiment_id], run_view_type=ViewType.ALL,
                              max_results=1000)
    assert all(r.info.status != "RUNNING" for r in runs if r.info.run_id != parents[0].info.run_id)


def test_slot_devices():
    assert slot_envs(1) == [{}]
    assert slot_envs(2, gpus=["0", "3"]) == [{"CUDA_VISIBLE_DEVICES": "0"},
                                             {"CUDA_VISIBLE_DEVICES": "3"}]
    cpu = slot_envs(4, gpus=[], cores=16)
    assert all(env[v] == "4" for env in cpu for v in THREAD_VARS)
    assert slot_envs(2, devices=("1", "1")) == [{"CUDA_VISIBLE_DEVICES": "1"}] * 2
    with pytest.raises(ConfigError, match="visible GPU"):
        slot_envs(3, gpus=["0"])


def test_workers_flag_is_checked(toy_repo):
    res = run_cli("run", "--task", "task", "--workers", "0", cwd=toy_repo)
    assert res.returncode == 2 and "workers" in res.stderr + res.stdout


def _edit_reply(name, old, new):
    from openai_server import Reply
    return Reply(f"Description: set {name} to {new}\n\ntrain.py\n```python\n<<<<<<< SEARCH\n"
                 f"{name} = {old}\n=======\n{name} = {new}\n>>>>>>> REPLACE\n```\n", delay_s=0.5)


def _note_reply(word):
    from openai_server import Reply
    return Reply(f"Description: note {word}\n\ntrain.py\n```python\n<<<<<<< SEARCH\n"
                 f"import os, pathlib, time\n=======\nimport os, pathlib, time\n# {word}\n"
                 f">>>>>>> REPLACE\n```\n", delay_s=0.5)


def test_proposals_are_requested_ahead_from_a_slow_server(tmp_path, mlflow_uri, openai_server):
    """While both slots are busy, the next proposals are already being asked for, two at a
    time; no more are asked for than the iterations allow."""
    from loop.setup.config import ProposerConfig
    repo, gates = gated_repo(tmp_path)
    # 3 and 4 are asked for on the baseline and start after 1 or 2 is kept: their changes
    # are made again on the new best (they apply there, so the server is asked nothing more)
    openai_server.script(_edit_reply("A", "4.0", "3.0"), _edit_reply("B", "4.0", "3.5"),
                         _note_reply("three"), _note_reply("four"))
    proposer = ProposerConfig(kind="llm", model="m", base_url=openai_server.base_url,
                              concurrency=2, ahead=2)
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=4, workers=2,
                 proposer=proposer, judge=JudgeConfig(rule="strict"))
    lines = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append))
    # two candidates run (held at their gates) and two more proposals are asked for meanwhile
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    assert wait_for(lambda: len(openai_server.requests) == 4), "\n".join(lines)
    assert not any(e["event"] == "end" and e["iteration"] > 0 for e in journal(repo))
    for n in range(1, 5):
        (gates / str(n)).write_text("")
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    assert len(openai_server.requests) == 4             # nothing asked beyond the budget
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 5 and table[0]["status"] == "keep"
    assert all(r["status"] in ("keep", "discard") for r in table[1:])


def test_a_commit_from_inside_a_slot_is_caught(tmp_path, mlflow_uri):
    """Slots run in detached worktrees: a run's `git commit` cannot move the branch, and
    it is still caught (its commit kept as a ref) and recorded as tampering."""
    repo, gates = gated_repo(tmp_path)
    sneaky = ('import subprocess\nopen("train.py", "a").write("# planted\\n")\n'
              'subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", '
              '"-qam", "sneaky"], check=True)\n')

    class Sneaky:
        def propose(self, context):
            text = context.files["train.py"].replace("A = 4.0", "A = 1.0") + sneaky
            return Proposal("commit from inside", files={"train.py": text})
    for n in range(3):
        (gates / str(n)).write_text("")
    # sandbox off: in the sandbox the commit fails outright (.git is read-only there); this
    # checks the engine's own detection, for machines without one
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=1, workers=2,
                 judge=JudgeConfig(rule="strict"), sandbox="off")
    Engine(cfg, out=lambda s: None, proposer=Sneaky()).run()
    table = assert_same_story(repo, mlflow_uri)
    assert table[1]["status"] == "crash"
    assert table[1]["reason"].startswith("tampered: the run committed in its worktree")
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/autoresearch/t/").split()
    assert any("/tampered-1-0" in r for r in refs)
    assert git(repo, "rev-list", "--count", "main..autoresearch/t") == "0"


class Answers:
    """The given edits in the order asked (from any thread), whatever the iteration; the
    last one again once they run out. Records what each call was shown."""

    def __init__(self, *edits):
        self.edits, self.seen = list(edits), []
        self.lock = threading.Lock()

    def propose(self, context):
        with self.lock:
            old, new = self.edits.pop(0) if len(self.edits) > 1 else self.edits[0]
            self.seen.append((context.iteration,
                              [(a.iteration, a.status, a.description) for a in context.history]))
        return Proposal(f"set {new}", files={"train.py": context.files["train.py"]
                                             .replace(old, new)})


def _changes(repo):
    """(parent, diff) of every iteration that ran, from the journal's records."""
    ends = {e["iteration"]: e for e in journal(repo) if e["event"] == "end"}
    return [(e["parent"], git(repo, "diff", e["parent"], e["commit"]))
            for n, e in sorted(ends.items()) if n > 0 and e["samples"]]


def test_the_same_change_is_not_run_twice_the_proposer_is_asked_again(tmp_path, mlflow_uri):
    """Issue 16: with two slots, iterations 1 and 2 were both `Set CHUNK to 6 (was 4)` on
    one parent, and the second ended as a 0-run discard. The engine asks again instead."""
    repo, gates = gated_repo(tmp_path)
    proposer = Answers(("A = 4.0", "A = 3.0"), ("A = 4.0", "A = 3.0"), ("B = 4.0", "B = 3.0"))
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 judge=JudgeConfig(rule="strict"))
    lines = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=proposer))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3), \
        "\n".join(lines)
    for n in (1, 2):
        (gates / str(n)).write_text("")
    thread.join(120)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 3 and all(int(r["runs"]) > 0 for r in table), table
    changes = _changes(repo)
    assert len(set(changes)) == len(changes) == 2       # two different changes, both run
    assert sorted(r["description"] for r in table[1:]) == ["set A = 3.0", "set B = 3.0"]
    assert len(proposer.seen) == 3                      # asked once more
    # the repeat is journalled (its cost counts on resume) and said on the console
    drops = [e for e in journal(repo) if e["event"] == "drop"]
    assert [e["description"] for e in drops] == ["set A = 3.0"]
    assert any("is iteration 1's change again" in l or "is iteration 2's change again" in l
               for l in lines), "\n".join(lines)


def test_a_proposer_that_only_repeats_itself_is_a_bad_edit_after_three_answers(
        tmp_path, mlflow_uri):
    repo, gates = gated_repo(tmp_path)
    proposer = Answers(("A = 4.0", "A = 3.0"))
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2, workers=2,
                 judge=JudgeConfig(rule="strict"))
    lines = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=proposer))
    # 2 ends while 1 is still running on the same base (its gate is closed)
    assert wait_for(lambda: ended(repo, 2) or ended(repo, 1)), "\n".join(lines)
    (gates / "1").write_text("")
    (gates / "2").write_text("")
    thread.join(120)
    table = assert_same_story(repo, mlflow_uri)
    statuses = sorted((r["status"], int(r["runs"])) for r in table[1:])
    assert statuses == [("bad_edit", 0), ("keep", 1)], table
    bad = next(r for r in table if r["status"] == "bad_edit")
    assert bad["reason"].startswith("the proposer answered 3 times with a change already "
                                    "tried on this base"), bad["reason"]
    assert len(proposer.seen) == 4
    # the first two repeats are drops; the third is the bad_edit's record, its cost counted
    # there once (it was also journalled as a drop, so max_cost_usd saw it twice)
    drops = [e for e in journal(repo) if e["event"] == "drop"]
    assert len(drops) == 2, drops


ADJACENT_TASK = """\
name: toy
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 60
grace_s: 5
search_space:
  DEPTH: {range: [1, 12], integer: true}
  WIDTH: {range: [1, 12], integer: true}
  HEADS: {range: [1, 12], integer: true}
"""

# every constant on the line next to another's: a line-based merge conflicts on any two
ADJACENT_CONSTANTS = """\
import time
DEPTH = 1
WIDTH = 1
HEADS = 1
time.sleep(0.4)
print(f"score: {(12 - DEPTH) ** 2 + (12 - WIDTH) ** 2 + (12 - HEADS) ** 2:.6f}")
"""


def test_a_four_slot_mutate_night_repeats_nothing_and_loses_no_keep(tmp_path, mlflow_uri):
    """Issue 16's done-when: 4 slots, mutate, constants on adjacent lines. No change is run
    twice on one base, and no would-be keep is lost to a conflict: every one is measured
    again on the best of its time."""
    repo = make_repo(tmp_path / "repo", {"task.yaml": ADJACENT_TASK,
                                         "train.py": ADJACENT_CONSTANTS,
                                         "grade.py": "# protected\n"})
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=14, workers=4,
                 judge=JudgeConfig(rule="strict"))
    lines = []
    stop = Engine(cfg, out=lines.append).run()
    assert stop.reason == "iterations", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert len(table) == 15
    assert all(int(r["runs"]) > 0 for r in table), "\n".join(lines)   # no 0-run discard
    assert not any("conflict" in r["reason"] or r["reason"].startswith("would be kept")
                   for r in table), "\n".join(lines)
    changes = _changes(repo)
    assert len(set(changes)) == len(changes) == 14
    descriptions = [r["description"] for r in table]
    assert len(set(descriptions)) == len(descriptions)
    # the night did replay would-be keeps onto a newer best (what conflicted before)
    replays = [e for e in journal(repo) if e["event"] == "replay"]
    assert replays and any(r["reason"].startswith("replayed onto") for r in table), \
        "\n".join(lines)


def test_a_loop_that_stops_while_a_change_is_proposed_again_says_so(tmp_path, mlflow_uri):
    """The proposer gives up (ProposerFatal) when asked to make a change again: the night
    stops, and the would-be keep ends as a discard that says what happened, in words."""
    from loop.proposers.base import ProposerFatal

    class GivesUp(EditsByIteration):
        def propose(self, context):
            if getattr(context, "redo", None):
                raise ProposerFatal("the endpoint is gone")
            return super().propose(context)
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("A = 4.0", "A = 1.0")]}   # one line
    lines, box = two_slots_in_order(repo, gates, GivesUp(edits))
    assert box["stop"].reason == "proposer", "\n".join(lines)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "discard"]
    assert table[2]["reason"] == (
        f"would be kept (better by 1 (> 0)), but its change does not apply to the best kept "
        f"since its base {table[0]['commit']} (train.py no longer has the line `A = 4.0`); "
        f"the loop stopped before it was proposed again"), table[2]["reason"]


def test_an_llm_change_that_no_longer_applies_is_proposed_again_with_what_it_was(
        tmp_path, mlflow_uri, openai_server):
    """2's block changes the line 1 kept: it would be kept, and the model is asked again on
    the new best, shown the change and why it no longer applies; its answer is measured."""
    from loop.setup.config import ProposerConfig
    repo, gates = gated_repo(tmp_path)
    openai_server.script(_edit_reply("A", "4.0", "2.0"), _edit_reply("A", "4.0", "1.0"),
                         _edit_reply("A", "2.0", "1.0"))
    proposer = ProposerConfig(kind="llm", model="m", base_url=openai_server.base_url)
    lines, box = two_slots_in_order(repo, gates, proposer=proposer)
    assert box["stop"].reason == "iterations", "\n".join(lines)
    assert len(openai_server.requests) == 3
    asked = openai_server.requests[2]["messages"][1]["content"]
    assert "# Make this change again" in asked and "train.py no longer has the line " \
        "`A = 4.0`" in asked and "+A = 1.0" in asked
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "keep"], "\n".join(lines)
    assert float(table[2]["score"]) == 5.0 and table[2]["reason"].startswith("proposed again")


def test_a_keep_made_again_on_the_tip_as_a_change_in_flight_is_not_run_twice(
        tmp_path, mlflow_uri):
    """2 would be kept; made again on 1's keep it is exactly 3's change (in flight there):
    not run a second time, it ends saying which iteration measures it."""
    from loop.setup.config import ProposerConfig
    repo, gates = gated_repo(tmp_path)
    edits = {1: [("A = 4.0", "A = 2.0")], 2: [("B = 4.0", "B = 1.0")],
             3: [("B = 4.0", "B = 1.0")]}             # 3 is proposed on 1's keep
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=3, workers=2,
                 proposer=ProposerConfig(ahead=0), judge=JudgeConfig(rule="strict"))
    lines = []
    thread, box = run_in_thread(Engine(cfg, out=lines.append, proposer=EditsByIteration(edits)))
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 3)
    (gates / "1").write_text("")
    assert wait_for(lambda: sum(e["event"] == "begin" for e in journal(repo)) == 4), \
        "\n".join(lines)
    (gates / "2").write_text("")
    assert wait_for(lambda: ended(repo, 2)), "\n".join(lines)
    (gates / "3").write_text("")
    thread.join(120)
    table = assert_same_story(repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep", "discard", "keep"], table
    assert table[2]["reason"] == (
        f"would be kept (better by 1 (> 0)), but made again on the best now "
        f"{table[1]['commit']} it is iteration 3's change, measured there")
    assert int(table[2]["runs"]) == 1 and float(table[3]["score"]) == 3.0
    changes = _changes(repo)
    assert len(set(changes)) == len(changes)
