"""Runs written to exhaust the machine are that run's named failure, and the night goes on:
a flood of output is kept capped (head and tail, the metric still read), a memory bomb is
stopped at `memory_limit_gb` and named out of memory. Real nights, real subprocesses, low
limits (this machine is shared)."""
import csv

from conftest import TOY_TASK, TOY_TRAIN, make_repo
from loop.engine.engine import Engine
from loop.proposers.base import Proposal
from loop.setup.config import Config, JudgeConfig

FLOOD = TOY_TRAIN.replace("X = 3.0", "X = 2.5") + (
    "import sys\n"
    "line = 'x' * 999 + '\\n'\n"
    "for _ in range(50_000):                 # 50 MB in a second or two\n"
    "    sys.stdout.write(line)\n"
    "print('score: 0.5')\n")
MEMORY_BOMB = TOY_TRAIN + (
    "blocks = [bytearray(64 * 2**20) for _ in range(64)]   # 4 GB, past the 0.5 GB cap\n")
HONEST = TOY_TRAIN.replace("X = 3.0", "X = 2.0")


class Scripted:
    def __init__(self, *attempts):
        self.attempts = attempts

    def propose(self, context):
        description, text = self.attempts[context.iteration - 1]
        return Proposal(description, files={"train.py": text})


def test_a_flood_and_a_memory_bomb_are_each_their_runs_failure_and_the_night_goes_on(
        tmp_path, mlflow_uri):
    repo = make_repo(tmp_path / "repo", {"task.yaml": TOY_TASK, "train.py": TOY_TRAIN,
                                         "grade.py": "# protected harness\n"})
    cfg = Config(task="task", tag="h", iterations=3, base_dir=repo, log_cap_mb=1.0,
                 memory_limit_gb=0.5, judge=JudgeConfig(rule="strict"))
    stop = Engine(cfg, out=lambda s: None, proposer=Scripted(
        ("flood stdout", FLOOD), ("allocate 4 GB", MEMORY_BOMB), ("step X", HONEST))).run()
    assert stop.exit_code == 0, stop.message
    with open(repo / ".autoresearch/h/results.tsv") as f:
        rows = {r["description"]: r for r in csv.DictReader(f, delimiter="\t")}
    flood, bomb, honest = rows["flood stdout"], rows["allocate 4 GB"], rows["step X"]
    assert flood["status"] == "keep" and float(flood["score"]) == 0.5     # read past 50 MB
    log = (repo / ".autoresearch/h/logs/iter-0001.log").read_bytes()
    assert len(log) < 1.1 * 2**20 and b"=== log capped: " in log
    assert bomb["status"] == "crash"
    assert bomb["reason"].startswith("out of memory: the run hit memory_limit_gb=0.5"), bomb
    assert honest["status"] == "discard" and float(honest["score"]) == 5.0   # went on
