"""The experiment sandbox against an experiment that tries everything at once.

One baseline run whose train.py reads keys (its own environment, every /proc/*/environ),
connects to a listener on the host's loopback, writes into the user's checkout, the
engine's state folder, HOME and /tmp, changes git config and refs, rewrites its worktree's
.git pointer, reads the private data, and leaves a double-forked daemon. Each attempt must
fail inside, and the host side must show that none of it happened."""
from __future__ import annotations

import csv
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import git, needs_sandbox, require, run_cli
from helpers import fake_bwrap
from graded_toy import TRAIN, baseline_error, make_graded_repo
from loop.run import sandbox
from loop.setup.config import Config, JudgeConfig
from loop.engine.engine import Engine

NO_SANDBOX = sandbox.unavailable()
SECRET = "sk-sandbox-test-do-not-leak"

ATTACKS = """
import os, socket, subprocess, sys, time
from pathlib import Path
REPO, STATE, PRIVATE = Path({repo!r}), Path({state!r}), Path({private!r})
ENGINE_PID, PORT, TOKEN, SECRET = {engine_pid}, {port}, {token!r}, {secret!r}

def attempt(name, action):
    try:
        got = action()
    except Exception as exc:
        print(f"attempt {{name}}: blocked ({{type(exc).__name__}})", flush=True)
        return
    print(f"attempt {{name}}: {{'SUCCEEDED' if got else 'blocked (nothing found)'}}", flush=True)

def scan_environs():
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and SECRET.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
                return True
        except OSError:
            pass
    return False

def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(b"leak")
    return True

def write(path, mode="a"):
    with open(path, mode) as f:
        f.write("planted by the experiment\\n")
    return True

def git(*args):
    return subprocess.run(["git", *args], capture_output=True).returncode == 0

attempt("own_env", lambda: any(SECRET in v for v in os.environ.values()))
attempt("engine_environ",
        lambda: SECRET.encode() in open(f"/proc/{{ENGINE_PID}}/environ", "rb").read())
attempt("any_environ", scan_environs)
attempt("network", connect)
attempt("checkout_file", lambda: write(REPO / "task" / "train.py"))
attempt("checkout_new", lambda: write(REPO / f"planted-{{TOKEN}}", "w"))
attempt("journal", lambda: write(STATE / "journal.jsonl"))
attempt("results", lambda: write(STATE / "results.tsv"))
attempt("home", lambda: write(Path.home() / f"planted-{{TOKEN}}", "w"))
attempt("git_dir", lambda: write(REPO / ".git" / f"planted-{{TOKEN}}", "w"))
attempt("worktree_pointer", lambda: write(Path.cwd().parent / ".git", "w"))
attempt("git_config", lambda: git("config", "core.fsmonitor", f"touch {{REPO}}/fired-{{TOKEN}}"))
attempt("git_update_ref", lambda: git("update-ref", "refs/heads/main", "HEAD~0") and
        git("update-ref", f"refs/heads/evil-{{TOKEN}}", "HEAD"))
attempt("git_delete_ref", lambda: git("update-ref", "-d", "refs/heads/main"))
attempt("private", lambda: bool(open(PRIVATE / "answers.txt").read()))
write("/tmp/planted-" + TOKEN, "w")          # allowed: /tmp inside is the run's own, dropped
subprocess.run(["/bin/sh", "-c",
                f"setsid {{sys.executable}} -c 'import time; time.sleep(300)' {{TOKEN}} &"])
time.sleep(0.3)
print("attempts done", flush=True)
"""


class Listener:
    """A TCP listener on the host's loopback that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def outside_tmp():
    """A folder outside /tmp (which the sandbox empties), so that the user's checkout and
    the state folder are visible inside, and must be read-only there, not merely absent."""
    base = Path.home() / ".cache" / f"autoresearch-sandbox-test-{uuid.uuid4().hex[:8]}"
    base.mkdir(parents=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def alive_with(token: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and token.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(pid)
        except OSError:
            pass
    return found


@needs_sandbox
def test_every_attempt_fails_inside_the_sandbox(outside_tmp, mlflow_uri, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    token = f"sbx{uuid.uuid4().hex[:10]}"
    listener = Listener()
    repo_dir, private_dir = outside_tmp / "repo", outside_tmp / "held-out"
    state = repo_dir / ".autoresearch" / "sbx"
    train = TRAIN + textwrap.dedent(ATTACKS.format(
        repo=str(repo_dir), state=str(state), private=str(private_dir), engine_pid=os.getpid(),
        port=listener.port, token=token, secret=SECRET))
    repo, private = make_graded_repo(outside_tmp, train=train)
    assert (repo, private) == (repo_dir, private_dir)
    refs_before = git(repo, "for-each-ref", "refs/heads")
    try:
        cfg = Config(task="task", tag="sbx", iterations=0, base_dir=repo, sandbox="required",
                     judge=JudgeConfig(rule="strict", baseline_runs=1))
        engine = Engine(cfg, out=lambda s: None)
        assert engine.setup.sandbox == "bwrap"
        engine.run()
    finally:
        listener.close()
    log = (state / "logs" / "iter-0000.log").read_text()
    attempts = [line for line in log.splitlines() if line.startswith("attempt ")]
    assert len(attempts) == 15 and "attempts done" in log, log
    assert not [a for a in attempts if "SUCCEEDED" in a], attempts
    # the grader still read the private data: the run was graded, honestly
    with open(state / "results.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["status"] for r in rows] == ["keep"]
    assert float(rows[0]["error"]) == pytest.approx(baseline_error(), abs=1e-5)
    # the host side: nothing it tried happened
    assert listener.accepted == 0
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo, "for-each-ref", "refs/heads").replace(
        git(repo, "for-each-ref", "refs/heads/autoresearch"), "").strip() == \
        refs_before.strip()
    assert subprocess.run(["git", "config", "--get", "core.fsmonitor"], cwd=repo,
                          capture_output=True).stdout == b""
    assert "planted" not in (state / "journal.jsonl").read_text()
    assert not list(repo.rglob(f"*{token}*")) and not (Path.home() / f"planted-{token}").exists()
    assert not Path(f"/tmp/planted-{token}").exists()
    assert (repo / ".autoresearch/.worktrees/sbx/.git").read_text().startswith("gitdir:")
    deadline = time.monotonic() + 5
    while alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_with(token) == [], "the daemon outlived its run"


def test_required_refuses_to_start_without_a_sandbox(toy_repo, tmp_path, mlflow_uri):
    (toy_repo / "run.yaml").write_text("task: task\nsandbox: required\niterations: 0\n")
    res = run_cli("run", "--config", "run.yaml", "--tag", "req", cwd=toy_repo,
                  env=fake_bwrap(tmp_path))
    assert res.returncode == 2, res.stderr
    assert "sandbox: required" in res.stderr and "Permission denied" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (toy_repo / ".autoresearch" / "req").exists(), "it touched state before refusing"
    assert "autoresearch/req" not in git(toy_repo, "branch", "--list")


def test_auto_without_a_sandbox_warns_and_records_it(toy_repo, tmp_path, mlflow_uri):
    (toy_repo / "run.yaml").write_text("task: task\niterations: 0\n")
    res = run_cli("run", "--config", "run.yaml", "--tag", "fb", cwd=toy_repo,
                  env=fake_bwrap(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith("warning: no sandbox: bwrap cannot")
    import mlflow
    client = mlflow.MlflowClient(mlflow_uri)
    [parent] = [r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])
        if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.tags["sandbox"] == "unavailable"
    assert parent.data.params["sandbox"] == "unavailable"


@needs_sandbox
def test_python_and_torch_work_inside(tmp_path):
    """The venv's interpreter and torch run under the read-only filesystem binding."""
    from loop.run.process import Limits, experiment_env
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    (tmp_path / "job.py").write_text(
        "import os, tempfile, torch\n"
        "x = torch.ones(4)\n"
        "open(os.path.join(tempfile.gettempdir(), 'scratch'), 'w').write('ok')\n"
        "print('score:', float(x.sum()))\n")
    res = run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, experiment_env(), 120,
                                 tmp_path / "log", r"^score:\s*([0-9.]+)",
                                 limits=Limits("required")))
    assert (res.status, res.metric) == ("ok", 4.0), (tmp_path / "log").read_text()


@needs_sandbox
def test_shared_memory_is_writable_without_a_memory_limit(tmp_path):
    """karpathy/minGPT's Trainer (DataLoader num_workers=4) crashed in the corpus's night:
    with no memory limit /dev/shm was a folder of the read-only /dev, and a DataLoader
    worker's queue (a multiprocessing lock, a POSIX semaphore there) failed with EROFS."""
    from loop.run.process import Limits, experiment_env
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    (tmp_path / "job.py").write_text(
        "import multiprocessing, os\n"
        "lock = multiprocessing.get_context('fork').Lock()\n"
        "with lock:\n"
        "    open('/dev/shm/corpus-probe', 'w').write('ok')\n"
        "print('score:', len(open('/dev/shm/corpus-probe').read()))\n")
    res = run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, experiment_env(), 120,
                                 tmp_path / "log", r"^score:\s*([0-9.]+)",
                                 limits=Limits("required")))
    assert (res.status, res.metric) == ("ok", 2.0), (tmp_path / "log").read_text()
    assert not Path("/dev/shm/corpus-probe").exists()      # the run's own, not the host's


@pytest.mark.parametrize("mode", ["required", "off"])
def test_a_run_deep_in_a_checkout_can_still_bind_unix_sockets(tmp_path, mode):
    """karpathy/minGPT's adder timed out in the corpus's night: cloned a few folders deep, its
    scratch $TMPDIR (beside the night's logs) was too long for the Unix socket multiprocessing
    binds there to share a DataLoader worker's tensors (`AF_UNIX path too long`)."""
    if mode == "required" and NO_SANDBOX:
        pytest.skip(NO_SANDBOX)
    from loop.run.process import Limits, experiment_env, scratch_link
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    deep = tmp_path / ("a-folder-of-projects-" * 3) / "the-repo" / ".autoresearch" / "night"
    deep.mkdir(parents=True)
    (tmp_path / "job.py").write_text(
        "from multiprocessing.connection import Listener\n"
        "with Listener(family='AF_UNIX') as listener:\n"
        "    print('score:', len(listener.address))\n")
    res = run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, experiment_env(), 120,
                                 deep / "logs" / "iter-0000.log", r"^score:\s*([0-9]+)",
                                 limits=Limits(mode)))
    assert res.status == "ok", (deep / "logs" / "iter-0000.log").read_text()
    assert not os.path.lexists(scratch_link(deep / "logs" / ".scratch-iter-0000.log"))


def test_links_a_killed_engine_left_to_gone_scratches_are_swept(tmp_path):
    """An engine killed with -9 mid-run never removes the short $TMPDIR link it made; the next
    run that needs one sweeps every such link whose scratch is gone, and no other file."""
    from loop.run.process import Limits, experiment_env, scratch_link
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    gone = tmp_path / "gone" / ".scratch-iter-0007.log"
    stale = scratch_link(gone)
    stale.symlink_to(gone, target_is_directory=True)
    someone_elses = Path(tempfile.gettempdir()) / f"ar-{tmp_path.name}-not-ours"
    someone_elses.symlink_to(tmp_path / "missing")
    try:
        deep = tmp_path / ("a-folder-of-projects-" * 3) / "night"
        deep.mkdir(parents=True)
        (tmp_path / "job.py").write_text("print('score: 1')\n")
        res = run_experiment(RunSpec(f"{sys.executable} job.py", tmp_path, experiment_env(),
                                     120, deep / "iter-0000.log", r"^score:\s*([0-9]+)",
                                     limits=Limits("off")))
        assert res.status == "ok"
        assert not os.path.lexists(stale)
        assert os.path.lexists(someone_elses)               # not a scratch's: left alone
    finally:
        stale.unlink(missing_ok=True)
        someone_elses.unlink(missing_ok=True)


@needs_sandbox
def test_home_is_hidden_but_for_what_a_run_needs(outside_tmp, monkeypatch):
    """HOME is an allow-list: credentials wherever a tool keeps them (~/.config/git/
    credentials, ~/.npmrc, ~/.ssh) and anything else there are not readable inside; the data
    cache (writable to training), the model caches, a folder on PATH and a data folder the
    task's environment names are."""
    from loop.run.process import Limits, experiment_env
    from loop.run.runner import run_experiment
    from loop.run.spec import RunSpec
    home = outside_tmp / "home"
    files = {".ssh/id_ed25519": "PRIVATE KEY", ".config/git/credentials": "https://u:tok@h",
             ".npmrc": "//registry.npmjs.org/:_authToken=npm_secret", "notes.txt": "private",
             ".cache/huggingface/token": "hf_secret", ".cache/huggingface/hub/w.txt": "weights",
             ".cache/autoresearch/data.txt": "cached", "datasets/d1/x.txt": "declared",
             ".local/bin/hello": "#!/bin/sh\necho hello-from-home\n"}
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text + "\n")
    (home / ".local/bin/hello").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / '.local/bin'}{os.pathsep}{os.environ['PATH']}")
    work = outside_tmp / "work"
    work.mkdir()
    (work / "job.py").write_text(textwrap.dedent("""
        import os, subprocess
        home = os.environ["HOME"]
        def read(rel):
            try:
                return open(os.path.join(home, rel)).read().strip() or "empty"
            except OSError as exc:
                return type(exc).__name__
        for rel in %r:
            print(rel, "->", read(rel))
        open(os.path.join(home, ".cache/autoresearch/new.txt"), "w").write("filled")
        print("PATH tool ->", subprocess.run(["hello"], capture_output=True, text=True).stdout)
        print("score: 1")
        """ % (list(files),)))
    env = experiment_env({"MY_DATA": str(home / "datasets" / "d1")})
    res = run_experiment(RunSpec(f"{sys.executable} job.py", work, env, 60, work / "log",
                                 r"^score:\s*([0-9.]+)", limits=Limits("required")))
    log = (work / "log").read_text()
    assert res.status == "ok", log
    for rel in (".ssh/id_ed25519", ".config/git/credentials", ".npmrc", "notes.txt"):
        assert f"{rel} -> FileNotFoundError" in log, log
    assert ".cache/huggingface/token -> " in log and "hf_secret" not in log
    for rel, text in ((".cache/huggingface/hub/w.txt", "weights"),
                      (".cache/autoresearch/data.txt", "cached"),
                      ("datasets/d1/x.txt", "declared")):
        assert f"{rel} -> {text}" in log, log
    assert "PATH tool -> hello-from-home" in log
    assert (home / ".cache/autoresearch/new.txt").read_text() == "filled"


@needs_sandbox
def test_a_venv_under_tmp_is_still_there_inside(tmp_path):
    """/tmp is emptied in the sandbox, but an engine installed there (a CI clone in /tmp
    with its venv) must still run: its interpreter and PATH folders are bound read-only."""
    venv = Path(f"/tmp/autoresearch-venv-test-{uuid.uuid4().hex[:8]}")
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "hello"
    tool.write_text("#!/bin/sh\necho hello-from-tmp\n")
    tool.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{venv / 'bin'}{os.pathsep}{old}"
    try:
        cmd = sandbox.wrap(["hello"], work, [work], [], None)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        os.environ["PATH"] = old
        shutil.rmtree(venv)
    assert out.returncode == 0 and "hello-from-tmp" in out.stdout, out.stderr


class _UserCommitsDuringTheNight:
    """A proposer whose first call stands in for the user: while the loop runs, they commit
    on their own `main` (the proposal itself changes X)."""

    def __init__(self, repo):
        self.repo, self.calls = repo, 0

    def propose(self, context):
        from loop.proposers.base import Proposal
        self.calls += 1
        if self.calls == 1:
            (self.repo / "notes.md").write_text("the user's own work\n")
            git(self.repo, "add", "notes.md")
            git(self.repo, "-c", "user.name=U", "-c", "user.email=u@e", "commit", "-qm", "mine")
        text = context.files["train.py"].replace("X = 3.0", f"X = {2.0 + self.calls / 10}")
        return Proposal(f"X step {self.calls}", files={"train.py": text})


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_users_own_commit_during_the_night(tmp_path, mlflow_uri, mode):
    """In the sandbox runs cannot write .git, so the ref watch is off and the user's commit
    on main stays; without it the engine cannot tell who moved main, so it puts it back
    (kept under displaced/) and says so, as README documents."""
    if mode == "auto":
        require("sandbox", NO_SANDBOX)
    from conftest import TOY_TASK, TOY_TRAIN, make_repo
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                         "grade.py": "#\n"})
    cfg = Config(task="task", tag="t", base_dir=repo, iterations=2,
                 judge=JudgeConfig(rule="strict"), sandbox=mode)
    Engine(cfg, out=lambda s: None, proposer=_UserCommitsDuringTheNight(repo)).run()
    subject = git(repo, "log", "-1", "--format=%s", "main")
    with open(repo / ".autoresearch/t/results.tsv") as f:
        reasons = [r["reason"] for r in csv.DictReader(f, delimiter="\t")]
    if mode == "auto":
        assert subject == "mine" and not any("tampered" in r for r in reasons), reasons
    else:
        assert subject != "mine" and any("refs/heads/main was moved" in r for r in reasons)
        assert git(repo, "for-each-ref", "refs/autoresearch/t/displaced/")
