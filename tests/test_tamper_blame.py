"""Tampering is blamed on the run that did it, never on the next one (no sandbox).

A run that changes several things the engine owns at once (its journal, results.tsv, git
config, a ref, the loop's branch) is one `crash tampered: ...` that names all of them; the
honest run after it is judged on its own metric."""
import csv
import subprocess
import textwrap

from conftest import git
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

TRAIN = """\
import os
X = {x}
Y = 2
print(f"score: {{(X - 1) ** 2 + (Y - 4) ** 2:.6f}}")
"""

CHEAT = TRAIN + textwrap.dedent("""\
    import subprocess
    state = {state!r}
    open(os.path.join(state, "journal.jsonl"), "a").write("{{}}\\n")
    open(os.path.join(state, "results.tsv"), "a").write("forged\\n")
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@x"]
    subprocess.run(git + ["config", "core.sneaky", "yes"], check=True)
    subprocess.run(git + ["update-ref", "refs/heads/planted", "HEAD"], check=True)
    subprocess.run(git + ["commit", "-qam", "sneaky"], check=True)
    """)


class Scripted:
    def __init__(self, files):
        self.files = files

    def propose(self, context):
        return Proposal(f"step {context.iteration}", files=self.files[context.iteration - 1])


def rows(repo):
    with open(repo / ".autoresearch/blame/results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_every_kind_of_tampering_is_blamed_on_the_run_that_did_it(toy_repo, mlflow_uri):
    repo = toy_repo
    cheat = CHEAT.format(x=3.0, state=str(repo / ".autoresearch" / "blame"))
    script = [{"train.py": cheat}, {"train.py": TRAIN.format(x=1.0)}]
    cfg = Config(task="task", tag="blame", iterations=2, base_dir=repo, sandbox="off",
                 judge=JudgeConfig(rule="strict"), max_consecutive_failures=5)
    base = git(repo, "rev-parse", "HEAD")
    Engine(cfg, out=lambda s: None, proposer=Scripted(script)).run()

    table = rows(repo)
    assert [r["status"] for r in table] == ["keep", "crash", "keep"], table
    why = table[1]["reason"]
    # (results.tsv may have been rewritten by the engine meanwhile: MLflow's late run ids)
    for part in ("journal.jsonl", ".git/config", "refs/heads/planted",
                 "moved branch autoresearch/blame (its commit is kept as "
                 "refs/autoresearch/blame/tampered-1)"):
        assert part in why, why
    # the honest run after it is kept on its own metric; nothing is blamed on it
    assert "tampered" not in table[2]["reason"]
    assert float(table[2]["score"]) == 4.0
    assert git(repo, "rev-parse", "autoresearch/blame~1") == base
    assert "sneaky" not in git(repo, "config", "--list")
    assert "refs/heads/planted" not in git(repo, "for-each-ref")


SWITCH = TRAIN + textwrap.dedent("""\
    import subprocess
    subprocess.run(["git", "checkout", "-q", *{how!r}], check=True)
    """)


def test_a_run_that_switches_its_worktree_off_the_branch_is_blamed(toy_repo, mlflow_uri):
    """With one slot the run is in the loop's worktree, on the branch: a `git checkout` of
    another branch (or a detached HEAD) is undone at its end, not found by the next run."""
    repo = toy_repo
    script = [{"train.py": SWITCH.format(x=3.0, how=["-b", "mine"])},
              {"train.py": TRAIN.format(x=2.0)},
              {"train.py": SWITCH.format(x=2.0, how=["--detach"])},
              {"train.py": TRAIN.format(x=1.0)}]
    cfg = Config(task="task", tag="blame", iterations=4, base_dir=repo, sandbox="off",
                 judge=JudgeConfig(rule="strict"), max_consecutive_failures=5)
    Engine(cfg, out=lambda s: None, proposer=Scripted(script)).run()

    table = rows(repo)
    assert [r["status"] for r in table] == ["keep", "crash", "keep", "crash", "keep"], table
    assert "switched its worktree to refs/heads/mine" in table[1]["reason"]
    assert "switched its worktree to a detached HEAD" in table[3]["reason"]
    assert [float(table[i]["score"]) for i in (2, 4)] == [5.0, 4.0]
    worktree = repo / ".autoresearch/.worktrees/blame"
    assert git(worktree, "symbolic-ref", "HEAD") == "refs/heads/autoresearch/blame"
    assert "refs/heads/mine" not in git(repo, "for-each-ref")


def test_a_run_that_switches_a_slots_worktree_is_blamed(toy_repo, mlflow_uri):
    """Slots run detached: a `git checkout -b` there is undone at that run's end; left in
    place, the slot's HEAD names a branch the ref check deletes, and every later run in that
    slot failed ("slot error")."""
    repo = toy_repo
    # the honest runs take longer, so the switch is found at its own run's end (with runs
    # in flight side by side, a change to refs is blamed on the first run to end after it)
    slow = "import time\ntime.sleep(1.5)\n"
    script = [{"train.py": SWITCH.format(x=3.0, how=["-b", "mine"])}] + \
        [{"train.py": slow + TRAIN.format(x=3.0) + f"# try {i}\n"} for i in range(4)]
    cfg = Config(task="task", tag="blame", iterations=5, base_dir=repo, sandbox="off",
                 workers=2, judge=JudgeConfig(rule="strict"), max_consecutive_failures=5)
    Engine(cfg, out=lambda s: None, proposer=Scripted(script)).run()

    table = rows(repo)
    assert table[1]["status"] == "crash", table[1]
    assert "switched its worktree to refs/heads/mine" in table[1]["reason"]
    # every later run ran, in both slots, and was judged on its metric
    assert [(r["status"], r["score"]) for r in table[2:]] == [("discard", "8.000000")] * 4
    assert "refs/heads/mine" not in git(repo, "for-each-ref")
    for slot in (repo / ".autoresearch/.slots/blame").iterdir():
        on = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=slot)
        assert on.returncode != 0                   # detached, as the engine keeps it


def test_the_engines_own_rewrite_of_results_is_never_tampering(tmp_path, monkeypatch):
    """MLflow's thread rewrites results.tsv when a late-created run gets its real id; a run
    ending meanwhile must not find a 'changed' results.tsv and be blamed for it."""
    import threading
    import time
    from loop.engine import records
    from loop.engine.records import RecordSink
    from loop.state.integrity import StateGuard
    from loop.state.journal import Journal
    from loop.record import Record
    from loop.state.results import results_text, write_results

    state = tmp_path / "state"
    state.mkdir()
    journal = Journal(state / "journal.jsonl")
    sink = RecordSink(state, "score", journal, None, "b", {}, False)
    sink.restore([Record(iteration=0, status="keep", description="baseline",
                         run_id="pending-1", metric=1.0)])
    guard = StateGuard(None, journal, sink.results_path, sink.expected_results,
                       lock=sink.lock)
    assert sink.expected_results() == sink.results_path.read_text()
    writing = threading.Event()

    def slow_write(*args):          # the real write, in a window as long as a busy disk's
        writing.set()
        time.sleep(0.3)
        write_results(*args)
    monkeypatch.setattr(records, "write_results", slow_write)
    tracker = threading.Thread(target=sink.tracked, args=(0, "real-run-id"))
    tracker.start()
    assert writing.wait(5)
    assert guard.after_run(None, "1-0") is None        # a run ends while it writes
    tracker.join()
    assert "real-run-id" in sink.results_path.read_text()
    # the text the guard expects is the rewritten one (remembered, not stale), and a row
    # added later is in it too
    assert sink.expected_results() == sink.results_path.read_text()
    sink.add(Record(iteration=1, status="discard", description="x", metric=2.0))
    assert sink.expected_results() == sink.results_path.read_text() == \
        results_text("score", sink.rows())
    assert guard.after_run(None, "2-0") is None


class CtrlCAfterRun:
    """Ctrl-C arriving when iteration `n`'s run has ended, before its result is checked."""

    def __init__(self, n):
        from loop.engine.progress import Progress
        self.plain, self.n, self.slot_of = Progress(out=lambda s: None), n, {}

    def __getattr__(self, name):
        return getattr(self.plain, name)

    def run_started(self, slot, rec, k, *args, **kw):
        self.slot_of[slot] = rec.iteration

    def run_finished(self, slot):
        if self.slot_of.get(slot) == self.n:
            raise KeyboardInterrupt


def test_a_branch_moved_by_an_interrupted_run_is_put_back_on_resume(toy_repo, mlflow_uri):
    """The run committed (moving the branch), then the loop was stopped before its check:
    the resume puts the branch back where the journal says it is, instead of building
    every later attempt on the run's commit."""
    repo = toy_repo
    commit = TRAIN.format(x=3.0) + textwrap.dedent("""\
        import subprocess
        open("train.py", "a").write("X = 1.0\\n")        # a forged best, committed
        subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit",
                        "-qam", "sneaky"], check=True)
        """)
    cfg = Config(task="task", tag="blame", iterations=2, base_dir=repo, sandbox="off",
                 judge=JudgeConfig(rule="strict"), max_consecutive_failures=5)
    base = git(repo, "rev-parse", "HEAD")
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted([{"train.py": commit}]),
                  progress=CtrlCAfterRun(1)).run()
    assert stop.exit_code == 130
    lines: list[str] = []
    honest = [{"train.py": TRAIN.format(x=2.0)}, {"train.py": TRAIN.format(x=2.5)}]
    Engine(cfg, out=lines.append, proposer=Scripted(honest)).run()
    table = rows(repo)
    assert [r["status"] for r in table] == ["keep", "keep", "discard"], table
    assert float(table[1]["score"]) == 5.0           # measured on the baseline's code
    assert git(repo, "rev-parse", "autoresearch/blame~1") == base
    assert "sneaky" not in git(repo, "log", "--format=%s", "autoresearch/blame")
    assert any("was past the last kept commit" in line and "put back" in line
               for line in lines), lines
    assert "tampered-resume-" in git(repo, "for-each-ref", "refs/autoresearch/blame/")
