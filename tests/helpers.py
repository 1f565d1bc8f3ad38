"""What several test modules share: reading a night's records back (results.tsv, the
journal, MLflow) and checking they tell one story, scripted proposers, the gated task whose
runs finish in the order a test decides, process survivors, and init's plain repos.

A test module imports from here (or conftest, or a named helper module such as
llm_task.py), never from another test module: tests/test_tests.py checks it."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

from conftest import TOY_TRAIN, git, make_repo, run_cli
from loop.proposers.base import Proposal
from loop.pids import alive
from loop.run.capture import CappedLog

# -- a night's records ---------------------------------------------------------------------


def rows(repo, tag="t"):
    """results.tsv of `tag`, one dict a row."""
    with open(repo / ".autoresearch" / tag / "results.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def journal(repo, tag="t"):
    """The journal's events of `tag` (none before it exists)."""
    path = repo / ".autoresearch" / tag / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ended(repo, n, tag="t"):
    """Whether iteration `n` of `tag` has its `end` event."""
    return any(e["event"] == "end" and e["iteration"] == n for e in journal(repo, tag))


def mlflow_runs(uri, tag="t"):
    """The MLflow client, the night's parent runs and its child runs by iteration."""
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("autoresearch/toy")
    runs = client.search_runs([exp.experiment_id], f"tags.`autoresearch.tag` = '{tag}'",
                              max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = sorted((r for r in runs if "mlflow.parentRunId" in r.data.tags),
                      key=lambda r: int(r.data.tags["iteration"]))
    return client, parents, children


def assert_same_story(repo, uri, tag="t"):
    """Branch, results.tsv and MLflow agree; every attempt is retrievable."""
    table = rows(repo, tag)
    assert [int(r["iteration"]) for r in table] == list(range(len(table)))
    assert table[0]["status"] == "keep" and table[0]["description"].startswith("baseline")
    keeps = [r for r in table[1:] if r["status"] == "keep"]
    base = git(repo, "rev-parse", "main")
    kept_commits = git(repo, "rev-list", f"{base}..autoresearch/{tag}").split()
    assert len(kept_commits) == len(keeps)
    client, parents, children = mlflow_runs(uri, tag)
    assert len(parents) == 1
    assert [int(c.data.tags["iteration"]) for c in children] == list(range(len(table)))
    # one definition of kept: the baseline row says keep (karpathy's results.tsv) but its
    # MLflow run is tagged baseline, so commits = keep rows after it = runs tagged keep
    assert len([c for c in children if c.data.tags["status"] == "keep"]) == len(keeps)
    kept_history = client.get_metric_history(parents[0].info.run_id, "kept")
    assert kept_history and kept_history[-1].value == len(keeps)
    for row, run in zip(table, children):
        baseline = row["iteration"] == "0" and row["status"] == "keep"
        assert run.data.tags["status"] == ("baseline" if baseline else row["status"])
        assert run.info.run_id == row["mlflow_run_id"]
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        if row["status"] != "bad_edit":
            full = git(repo, "rev-parse", row["commit"])       # retrievable by its short sha
            assert run.data.tags["git.commit"] == full
        if int(row["iteration"]) > 0 and row["status"] != "bad_edit":
            assert git(repo, "rev-parse", row["attempt_ref"]) == run.data.tags["git.commit"]
            msg = git(repo, "log", "-1", "--format=%B", row["attempt_ref"])
            assert msg.splitlines()[0] == row["description"]
            trailer = msg.split("Autoresearch-MLflow-Run: ")[1].split()[0]
            # pending-: MLflow was unavailable when the commit was made (the run came later)
            assert trailer == row["mlflow_run_id"] or trailer.startswith("pending-")
            assert f"Autoresearch-Iteration: {row['iteration']}" in msg
    return table


# -- waiting for something to happen (a generous wait, never a claim about speed) ----------


def wait_for(predicate, timeout=60):
    """Whether `predicate()` came true within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def run_in_thread(engine):
    """engine.run() on a daemon thread; its Stop lands in box["stop"]."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("stop", engine.run()), daemon=True)
    thread.start()
    return thread, box


def survivors(token: str) -> list[int]:
    """Host pids of live processes whose command line holds `token` (pids printed inside a
    PID namespace mean nothing outside it, so tests look processes up by a unique token)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read() and alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def wait_gone(token: str, seconds: float = 30.0) -> list[int]:
    """The processes holding `token` still alive after waiting up to `seconds` for none
    (0: look once)."""
    deadline = time.monotonic() + seconds
    while survivors(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return survivors(token)


# -- scripted proposers: a real proposer's shape, no randomness ----------------------------


class EditsByIteration:
    """Edits by iteration number, each made on the files the proposer was shown; asked to
    make a change again (context.redo), the edits under ("redo", n)."""

    def __init__(self, edits):
        self.edits = edits
        self.redos = []

    def propose(self, context):
        text = context.files["train.py"]
        redo = getattr(context, "redo", None)
        key = ("redo", context.iteration) if redo else context.iteration
        if redo:
            self.redos.append((context.iteration, redo))
        for old, new in self.edits[key]:
            text = text.replace(old, new)
        return Proposal(f"edit {context.iteration}", files={"train.py": text})


class TextsInOrder:
    """Proposes the given (train.py text, description) pairs in order."""

    def __init__(self, *texts):
        self.texts = list(texts)

    def propose(self, context):
        text, description = self.texts[context.iteration - 1]
        return Proposal(description, files={"train.py": text})


class Variants:
    """Proposes the given train.py texts in turn, round and round (a real, applicable edit
    each time)."""

    def __init__(self, *variants):
        self.variants = list(variants)

    def propose(self, context):
        text = self.variants[(context.iteration - 1) % len(self.variants)]
        return Proposal(f"variant {context.iteration}", files={"train.py": text})


# -- the toy task, varied ------------------------------------------------------------------


def train(x="3.0", y="2", noise="0.0", extra=""):
    """The toy train.py with its knobs and noise set (and `extra` appended)."""
    return (TOY_TRAIN.replace("X = 3.0", f"X = {x}").replace("Y = 2", f"Y = {y}")
            .replace("NOISE = 0.0", f"NOISE = {noise}") + extra)


def noisy_repo(toy_repo):
    """The toy task with run-to-run noise, so the noise judge repeats runs and has a band."""
    path = toy_repo / "task" / "train.py"
    path.write_text(path.read_text().replace("NOISE = 0.0", "NOISE = 0.2"))
    git(toy_repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "noisy")
    return toy_repo


GATED_TASK = """\
name: toy
editable: [train.py]
protected: [grade.py]
run: python train.py
metric: {name: score, direction: minimize}
time_budget_s: 60
grace_s: 5
env: {GATE_DIR: '%s'}
"""

# Each run waits for a gate file named after its iteration: the test decides the order in
# which runs finish, so "out of order" is exact, not a race.
GATED_TRAIN = """\
import os, pathlib, time
A = 4.0
# A and B are apart, so that changes to each merge cleanly (git conflicts on adjacent lines)

B = 4.0
gate = pathlib.Path(os.environ["GATE_DIR"]) / os.environ["AUTORESEARCH_ITERATION"]
while not gate.exists():
    time.sleep(0.05)
if (pathlib.Path(os.environ["GATE_DIR"]) / ("crash-" + gate.name)).exists():
    raise SystemExit("told to crash")
print(f"score: {A + B:.6f}")
"""


def gated_repo(tmp_path, train=GATED_TRAIN):
    """A repo of the gated task and its gates folder, the baseline's gate open."""
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "0").write_text("")
    repo = make_repo(tmp_path / "repo", {"task.yaml": GATED_TASK % gates,
                                         "train.py": train, "grade.py": "# protected\n"})
    return repo, gates


# -- a bwrap that cannot run -----------------------------------------------------------------


def fake_bwrap(tmp_path: Path) -> dict:
    """An environment whose PATH finds a bwrap that fails as it does where user namespaces
    are forbidden (Ubuntu's AppArmor default, some containers)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


# -- init's input: a plain repo, not yet a task ----------------------------------------------

PLAIN = """\
import os, random
LR = 0.01
WIDTH = 32
PEAK_FLOPS = 1e15          # display only: feeds the mfu line
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))
loss = (LR - 0.02) ** 2 * 1000 + (WIDTH - 48) ** 2 / 100 + random.Random(seed).gauss(0, 0.01)
mfu = 100 / PEAK_FLOPS
print(f"train_loss: {loss + 0.1:.4f}")
print(f"val_loss: {loss:.4f}")
print(f"mfu: {mfu:.2f}")
"""


def commit(repo: Path, msg: str = "files") -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Tester", "-c", "user.email=t@example.com", "commit", "-qm", msg)


def plain_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """A git repo holding `files` (PLAIN's train.py by default) and a README, one commit."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for rel, text in (files or {"train.py": PLAIN}).items():
        (root / rel).write_text(textwrap.dedent(text))
    (root / "README.md").write_text("# toy\n\nFit the two knobs of a toy loss.\n")
    commit(root, "initial")
    return root


def listing(root: Path) -> list[str]:
    """Every path under `root` outside .git, sorted."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if ".git" not in p.parts)


def init(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("init", *args, cwd=repo)


def init_on_the_test_split(repo: Path, metric: str, *args: str) -> subprocess.CompletedProcess:
    """init with no --metric on a script whose only held-out split is named test: exit 0 with
    that split's metric, said to be the test split the night selects on."""
    done = init(repo, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("metric:"))
    assert line.split()[1] == metric, line
    assert "the test split's" in line and "prints no validation metric" in line, line
    return done


def refused(repo: Path, *args: str) -> str:
    """init exits 2 with one line and writes nothing; the line."""
    before = {p: (repo / p).read_bytes() for p in listing(repo) if (repo / p).is_file()}
    done = init(repo, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert {p: (repo / p).read_bytes() for p in listing(repo) if (repo / p).is_file()} == before
    return done.stderr.strip()


def read_metric(text: str, pattern: str) -> float | None:
    """The last number `pattern` captures in `text`, read by the engine's own reader (the
    CappedLog scan every run's output goes through), or None."""
    import io
    log = CappedLog(io.BytesIO(), 1 << 16, {"metric": pattern})
    log.feed(text.encode())
    log.close()
    return log.value("metric")


def as_from_a_terminal() -> None:
    """A child's SIGINT as a terminal delivers Ctrl-C (a Popen `preexec_fn`): a suite started
    in the background by a script (CI, `cmd &`) inherits SIGINT ignored, and a Python child
    then never raises KeyboardInterrupt, so a test of Ctrl-C would wait out its command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def checked(repo: Path, where: str = ".") -> float:
    """check-task's baseline on the committed task: the number its metric read from a real
    run (the name may hold a slash, Lightning's `val/acc`)."""
    commit(repo, "autoresearch task")
    done = run_cli("check-task", where, cwd=repo)
    assert done.returncode == 0 and "status ok" in done.stdout, done.stdout + done.stderr
    found = re.search(r"status ok; \S+ = ([-\d.e]+)", done.stdout)
    assert found, done.stdout
    return float(found[1])
