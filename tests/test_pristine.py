"""Every run starts from exactly its commit: what a run leaves in its worktree (untracked or
ignored files, a FIFO, a socket, a nested repository, a folder it made unreadable) is gone
before the next run, a discarded attempt's files never reach a re-run of the best, and the
task's `inputs:` links are there again for each run."""
import os
import socket
import stat
import subprocess

import pytest

from conftest import git, make_repo
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.repo import pristine
from loop.setup.config import Config, JudgeConfig

TASK = """\
name: leftovers
editable: [train.py]
run: python train.py
metric: {name: score, direction: minimize}
inputs: [data/shard.bin]
time_budget_s: 20
grace_s: 5
"""

# What each run looks for when it starts, then leaves behind: an ignored checkpoint (nanoGPT's
# `init_from='resume'` reads out/ckpt.pt), an ignored file, an untracked one, a FIFO, and an
# ignored folder in the engine's state folder's name at the worktree's top.
TRAIN = """\
import os
X = 3.0
PLANTED = ["out", "model.pt", "notes.txt", "pipe", "../.autoresearch/planted"]
seen = [p for p in PLANTED if os.path.lexists(p)]
print("leftovers:", ", ".join(seen) or "none")
print("input:", open("data/shard.bin").read().strip())
os.makedirs("out", exist_ok=True)
open("out/ckpt.pt", "w").write("weights of this run")
open("model.pt", "w").write("x")
open("notes.txt", "w").write("x")
os.mkfifo("pipe")
os.makedirs("../.autoresearch/planted", exist_ok=True)
open("../.autoresearch/planted/evil.py", "w").write("x")
print(f"score: {(X - 1) ** 2:.6f}")
"""


class Worse:
    """Proposes a worse X each time: every attempt is discarded."""

    def propose(self, context):
        worse = TRAIN.replace("X = 3.0", f"X = {5 + context.iteration}.0")
        return Proposal(f"worse {context.iteration}", files={"train.py": worse})


def leftover_repo(tmp_path):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TASK, "train.py": TRAIN,
                                         ".gitignore": "*.pt\nout/\ndata/\n"})
    (repo / "task" / "data").mkdir()
    (repo / "task" / "data" / "shard.bin").write_text("prepared data\n")
    return repo


@pytest.mark.parametrize("workers", [1, 2], ids=["the-loops-worktree", "two-slots"])
def test_no_run_sees_what_an_earlier_run_left(tmp_path, mlflow_uri, workers):
    repo = leftover_repo(tmp_path)
    # the baseline twice, two discarded attempts, the best re-run after each proposal
    cfg = Config(task="task", tag="clean", iterations=2, base_dir=repo, seed=1,
                 workers=workers,
                 judge=JudgeConfig(rule="sequential", baseline_runs=2, refresh_every=1))
    Engine(cfg, out=lambda s: None, proposer=Worse()).run()
    logs = sorted((repo / ".autoresearch/clean/logs").glob("iter-*.log"))
    texts = {p.name: p.read_text() for p in logs if "grade" not in p.name}
    if workers == 1:           # the best, re-run after a discarded attempt, where it ran
        assert any("-best" in name for name in texts), texts.keys()
    assert len(texts) >= (5 if workers == 1 else 4), texts.keys()   # each slot ran twice
    for name, text in texts.items():
        assert "leftovers: none" in text, (name, text)
        assert "input: prepared data" in text, (name, text)   # the inputs: link, made again
    # the data the link pointed to is untouched, in the user's checkout
    assert (repo / "task" / "data" / "shard.bin").read_text() == "prepared data\n"


def test_sweep_leaves_exactly_the_commit(tmp_path):
    main = make_repo(tmp_path / "main", {"train.py": "x = 1\n", ".gitignore": "*.pt\nout/\n"})
    (main / "task" / "model.pt").write_text("the user's own")
    with pytest.raises(pristine.Leftover, match="not a linked worktree"):
        pristine.sweep(main)                      # a user's checkout is never swept
    assert (main / "task" / "model.pt").exists()
    repo = tmp_path / "repo"
    git(main, "worktree", "add", "-q", "--detach", str(repo))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the worktree's\n")
    task = repo / "task"
    (task / "out").mkdir()
    (task / "out" / "ckpt.pt").write_text("x")
    os.mkfifo(task / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(task / "sock"))
    sock.close()
    subprocess.run(["git", "init", "-q", str(task / "nested")], check=True)
    (task / "locked" / "deep").mkdir(parents=True)
    (task / "locked" / "deep" / "f").write_text("x")
    (task / "locked").chmod(0)
    os.symlink(outside, task / "link")
    (task / "train.py").write_text("x = 2\n")       # a tracked change is not the sweep's
    assert len(set(os.listdir(task)) - {".gitignore", "train.py"}) == 6
    pristine.sweep(repo)
    assert sorted(os.listdir(task)) == [".gitignore", "train.py"]
    assert (outside / "keep.txt").read_text() == "not the worktree's\n"   # links not followed
    assert git(repo, "status", "--porcelain", "--ignored") == "M task/train.py"
    assert stat.S_ISREG(os.lstat(task / "train.py").st_mode)
