"""Nights side by side: two engines on different tags in one repository at once, without
the sandbox. Each guards its own tag's refs, its branch and the user's refs; the other
night's refs move freely while it runs. A git failure inside the loop is a one-line stop
that a second start resumes."""
import csv
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import git
from loop.repo.workspace import Workspace, worktree_path
from loop.repo.taglock import TagLock


def store(repo):
    return f"sqlite:///{repo.parent / 'mlflow.db'}"


def start_night(repo, tag, iterations, *extra):
    """`autoresearch run` in a subprocess, sandbox off, on the MLflow store beside the repo."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": store(repo)}
    return subprocess.Popen(
        [sys.executable, "-m", "loop", "run", "--task", "task", "--tag", tag,
         "--iterations", str(iterations), "--judge", "strict", "--sandbox", "off", *extra],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def events(repo, tag):
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rows(repo, tag):
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def refs(repo, prefix):
    out = git(repo, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    return dict(line.split(" ", 1)[::-1] for line in out.splitlines())


def assert_night_intact(repo, tag, iterations):
    """Nothing blamed, nothing displaced; journal, results.tsv and git tell one story."""
    journal = events(repo, tag)
    assert not [e for e in journal if e["event"] == "tamper"], tag
    ends = {e["iteration"]: e for e in journal if e["event"] == "end"}
    assert sorted(ends) == list(range(iterations + 1)), tag
    table = rows(repo, tag)
    assert [int(r["iteration"]) for r in table] == sorted(ends)
    for row in table:
        end = ends[int(row["iteration"])]
        assert row["status"] == end["status"] and "tampered" not in row["reason"], row
        assert end["commit"].startswith(row["commit"]), row
        if end["attempt_ref"]:                     # every attempt, kept or not, survives
            assert git(repo, "rev-parse", end["attempt_ref"]) == end["commit"], row
    assert refs(repo, f"refs/autoresearch/{tag}/displaced/") == {}
    kept = [e["commit"] for e in journal if e["event"] == "end" and e["status"] == "keep"]
    assert git(repo, "rev-parse", f"autoresearch/{tag}") == kept[-1]
    return table


def mlflow_iterations(repo, tag):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(store(repo))
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              f"tags.`autoresearch.tag` = '{tag}'", max_results=1000)
    assert len([r for r in runs if "mlflow.parentRunId" not in r.data.tags]) == 1
    return sorted(int(r.data.tags["iteration"]) for r in runs
                  if "mlflow.parentRunId" in r.data.tags)


def run_side_by_side(repo, a_iterations, b_iterations, *extra):
    main = git(repo, "rev-parse", "main")
    nights = {"a": start_night(repo, "a", a_iterations, *extra),
              "b": start_night(repo, "b", b_iterations, "--seed", "1", *extra)}
    for tag, proc in nights.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{tag}: {out}\n{err}"
        assert "Traceback" not in err and "tampered" not in out, f"{tag}: {out}\n{err}"
        # both made the new store at once: one is kept, neither loses it
        assert "MLflow store unavailable" not in out, f"{tag}: {out}"
    for tag, iterations in (("a", a_iterations), ("b", b_iterations)):
        assert_night_intact(repo, tag, iterations)
        assert mlflow_iterations(repo, tag) == list(range(iterations + 1))
    assert git(repo, "rev-parse", "main") == main
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_two_nights_in_one_repo_keep_every_ref_and_blame_nothing(toy_repo):
    """b stops before a: a's later checks see b's last moves and its lock let go."""
    run_side_by_side(toy_repo, 6, 3)


@pytest.mark.slow
def test_two_nights_of_twelve_iterations_with_two_slots_each(toy_repo):
    """The issue's acceptance: 12 iterations each, side by side; with slots too (their
    worktrees and several runs in flight per night)."""
    run_side_by_side(toy_repo, 12, 12, "--workers", "2")


def opened(repo, tag):
    ws = Workspace(repo, tag, worktree_path(repo, tag))
    ws.open()
    return ws


def test_a_running_nights_refs_are_its_own_and_a_finished_nights_are_guarded(toy_repo):
    mine, other = opened(toy_repo, "t"), opened(toy_repo, "o")
    staged = mine.stage_on(mine.tip(), "task", {"train.py": "X = 5\n"}, "m")
    mine_attempt = mine.keep_ref("attempt-1", staged)
    theirs = other.stage_on(other.tip(), "task", {"train.py": "X = 6\n"}, "o")
    lock = TagLock(toy_repo / ".autoresearch" / "o" / "lock")
    lock.acquire()                                 # the other night is running
    before = mine.snapshot()
    other.keep_ref("attempt-1", theirs)            # its own moves, mid-run of ours
    other.advance(theirs, other.tip())
    git(toy_repo, "update-ref", "-d", mine_attempt)    # ours: a run of ours did this
    notes = " ".join(mine.check_tamper(before, "1-0"))
    assert "refs/autoresearch/t/attempt-1 was deleted" in notes
    assert "/o/" not in notes and "autoresearch/o" not in notes, notes
    assert git(toy_repo, "rev-parse", "refs/autoresearch/o/attempt-1") == theirs
    assert git(toy_repo, "rev-parse", "autoresearch/o") == theirs

    # it stops between two of our looks: what it did before stopping is still its own
    before = mine.snapshot()
    other.keep_ref("kept-late", theirs)
    lock.release()
    assert mine.check_tamper(before, "2-0") == []
    assert git(toy_repo, "rev-parse", "refs/autoresearch/o/kept-late") == theirs

    # long finished (its lock untouched for an hour): its refs are guarded like the user's
    hour_ago = time.time() - 3600
    os.utime(toy_repo / ".autoresearch" / "o" / "lock", (hour_ago, hour_ago))
    before = mine.snapshot()
    git(toy_repo, "update-ref", "-d", "refs/autoresearch/o/attempt-1")
    git(toy_repo, "update-ref", "-d", "refs/heads/autoresearch/o")   # checked out there
    notes = " ".join(mine.check_tamper(before, "3-0"))
    assert "refs/autoresearch/o/attempt-1 was deleted" in notes
    assert "refs/heads/autoresearch/o was deleted" in notes
    assert git(toy_repo, "rev-parse", "refs/autoresearch/o/attempt-1") == theirs
    assert git(toy_repo, "rev-parse", "autoresearch/o") == theirs


def test_a_night_running_from_another_checkout_of_the_repo_is_seen(toy_repo):
    """A second night started in a linked worktree of the same repository (its own
    .autoresearch/ there) shares the refs: its lock is found there."""
    mine = opened(toy_repo, "t")
    second = toy_repo.parent / "second"
    git(toy_repo, "worktree", "add", "-q", "--detach", str(second), "main")
    lock = TagLock(second / ".autoresearch" / "o" / "lock")
    lock.acquire()
    try:
        before = mine.snapshot()
        git(second, "branch", "autoresearch/o", "main")
        git(second, "update-ref", "refs/autoresearch/o/attempt-1", "main")
        assert mine.check_tamper(before, "1-0") == []
    finally:
        lock.release()
    assert git(toy_repo, "rev-parse", "refs/autoresearch/o/attempt-1") == \
        git(toy_repo, "rev-parse", "main")


def test_the_users_refs_are_guarded_while_another_night_runs(toy_repo):
    mine, _ = opened(toy_repo, "t"), opened(toy_repo, "o")
    main = git(toy_repo, "rev-parse", "main")
    git(toy_repo, "tag", "v1", "main")
    lock = TagLock(toy_repo / ".autoresearch" / "o" / "lock")
    lock.acquire()
    try:
        before = mine.snapshot()
        git(toy_repo, "update-ref", "-d", "refs/tags/v1")
        moved = mine.stage_on(mine.tip(), "task", {"a.py": ""}, "x")
        git(toy_repo, "update-ref", "refs/heads/main", moved)
        notes = " ".join(mine.check_tamper(before, "1-0"))
    finally:
        lock.release()
    assert "refs/heads/main was moved" in notes and "refs/tags/v1 was deleted" in notes
    assert git(toy_repo, "rev-parse", "main") == main == git(toy_repo, "rev-parse", "v1")


def test_a_look_at_a_tags_lock_never_refuses_its_engine(tmp_path):
    """Another engine's look (`tag_active`) holds the lock shared for an instant: an engine
    starting right then waits it out instead of saying the tag is already running."""
    path = tmp_path / "o" / "lock"
    path.parent.mkdir()
    path.write_text("")
    look = open(path, "rb")
    fcntl.flock(look, fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.2, look.close).start()
    lock = TagLock(path)
    lock.acquire()
    assert path.read_text() == f"pid {os.getpid()}"
    lock.release()
    assert path.read_text() == ""


def test_a_git_failure_mid_loop_is_a_one_line_stop_and_resumes(toy_repo):
    """A stale lock file (a git that crashed) makes the engine's own ref move fail at
    iteration 2: one line, exit 1, the journal intact; without it, the same command goes on."""
    stale = toy_repo / ".git" / "refs" / "autoresearch" / "t" / "attempt-2.lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    night = start_night(toy_repo, "t", 3)
    out, err = night.communicate(timeout=300)
    assert night.returncode == 1, out + err
    assert "Traceback" not in err, err
    stop = [line for line in out.splitlines() if line.startswith("stopped:")]
    assert len(stop) == 1, out
    assert "cannot lock ref 'refs/autoresearch/t/attempt-2'" in stop[0]
    assert stop[0].endswith("the journal is intact; run the same command to resume")
    journal = events(toy_repo, "t")
    assert journal[-1]["event"] == "stop" and journal[-1]["reason"] == "git"
    assert [e["iteration"] for e in journal if e["event"] == "end"] == [0, 1]
    assert {"event": "abandon", "iteration": 2}.items() <= journal[-2].items()  # rolled back

    stale.unlink()
    night = start_night(toy_repo, "t", 3)
    out, err = night.communicate(timeout=300)
    assert night.returncode == 0, out + err
    assert "resume: tag t, baseline and 1 iteration done" in out
    assert_night_intact(toy_repo, "t", 3)


def test_a_new_stores_temp_file_is_removed_only_when_its_maker_is_gone(tmp_path):
    """Two nights making the same new MLflow store at once: neither deletes the file the
    other is making (a killed start's is still cleared)."""
    from loop.state.store import create_store
    path = tmp_path / "mlflow.db"
    maker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        making = tmp_path / f".mlflow.db.creating-{maker.pid}-0a1b2c3d"
        killed = tmp_path / f".mlflow.db.creating-{gone.pid}"
        making.write_bytes(b"half made")
        killed.write_bytes(b"half made")
        create_store(f"sqlite:///{path}")
        assert making.exists() and not killed.exists()
    finally:
        maker.kill()
        maker.wait()
    from mlflow.tracking import MlflowClient
    assert MlflowClient(f"sqlite:///{path}").search_experiments()     # the store works
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["mlflow.db", making.name])


LOCKS_THE_BRANCH = '''\
import os
flag = {flag!r}
if not os.path.exists(flag):        # once: a git of the experiment's that crashed
    open(flag, "w").close()
    open({lock!r}, "w").close()
'''


def test_a_git_failure_after_an_iteration_ended_keeps_it(tmp_path):
    """git fails after the baseline's end is journalled (its branch's ref is locked, so the
    worktree's reset fails): the stop rolls nothing back, the resume goes on from there."""
    from conftest import TOY_TASK, TOY_TRAIN, make_repo
    repo = tmp_path / "repo"
    lock = repo / ".git" / "refs" / "heads" / "autoresearch" / "t.lock"
    train = LOCKS_THE_BRANCH.format(flag=str(tmp_path / "once"), lock=str(lock)) + TOY_TRAIN
    make_repo(repo, {"task.yaml": TOY_TASK, "train.py": train, "grade.py": "#\n"})
    night = start_night(repo, "t", 2)
    out, err = night.communicate(timeout=300)
    assert night.returncode == 1 and "Traceback" not in err, out + err
    assert "autoresearch/t.lock': File exists" in out, out
    journal = events(repo, "t")
    assert [e["event"] for e in journal if e.get("iteration") == 0] == ["begin", "end"]
    lock.unlink()
    night = start_night(repo, "t", 2)
    out, err = night.communicate(timeout=300)
    assert night.returncode == 0, out + err
    assert_night_intact(repo, "t", 2)
    assert mlflow_iterations(repo, "t") == [0, 1, 2]
