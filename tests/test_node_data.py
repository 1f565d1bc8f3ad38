"""What reaches a Ray node (loop/run/backends/reach.py), on a local Ray whose workers run in a
bwrap mount namespace where the test's world folder shows the node's own, empty one: the head
sees the repo and its data, the workers see none of it, for real. The data is shipped, put
in place or re-rooted on the node and graded there with the local backend's metric; a copy
changed on the node is a tampered crash; what cannot be shipped is refused at start."""
from __future__ import annotations

import shutil
import sys

import pytest

from conftest import require
from node_data import XS, expected_error, hidden_by, make_world
from helpers import EditsByIteration, rows
from loop.engine.engine import Engine
from loop.errors import UsageError
from loop.run.backends.reach import Need, Reach, human, plan
from loop.setup.config import Config, JudgeConfig

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """(world: what the head sees, node: what the workers see in its place)."""
    require("sandbox", None if shutil.which("bwrap") else
            "bwrap is needed to give the Ray workers a view of their own")
    base = tmp_path_factory.mktemp("nodes")
    world, node = base / "world", base / "node"
    world.mkdir()
    node.mkdir()
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={
        "py_executable": " ".join(hidden_by(node, world, [sys.executable]))})
    yield world, node
    ray.shutdown()


def night(repo, tag, backend="ray", iterations=0, sandbox="auto", edits=None):
    cfg = Config(task="task", tag=tag, base_dir=repo, iterations=iterations, backend=backend,
                 sandbox=sandbox, judge=JudgeConfig(rule="strict"))
    return Engine(cfg, out=lambda line: None, proposer=EditsByIteration(edits or {})).run()


@pytest.mark.slow
def test_data_the_node_lacks_is_shipped_checked_there_and_refused_once_changed(
        nodes, mlflow_uri):
    world, node = nodes
    repo = make_world(world / "a")
    data, there = world / "a" / "data", node / "a" / "data"
    night(repo, "local", backend="local")
    local = float(rows(repo, "local")[0]["error"])
    assert local == pytest.approx(expected_error(), abs=1e-6)   # the Slurm test relies on it

    night(repo, "t")     # the sandbox where bwrap works, as on a real node
    [base] = rows(repo, "t")
    assert base["status"] == "keep", base
    assert float(base["error"]) == local
    # held_out and read_only were put at their own path on the node (the grader opens the
    # held-out file by name); private and the input were unpacked in the run's own folder
    assert (there / "answers.txt").read_text() == (data / "answers.txt").read_text()
    assert (there / "ro" / "xs.txt").read_text() == (data / "ro" / "xs.txt").read_text()
    assert not (there / "private").exists()

    # next night: the node holds held_out and read_only (used in place); a run writes into
    # the node's read-only copy (no sandbox to stop it): tampered, though the head's is intact
    write = "open(os.path.join(ro, 'xs.txt'), 'a').write('9\\n')\nprint(\"training done\")"
    stop = night(repo, "tamper", iterations=1, sandbox="off",
                 edits={1: [('print("training done")', write)]})
    assert stop.exit_code == 0, stop.message
    table = rows(repo, "tamper")
    assert [r["status"] for r in table] == ["keep", "crash"], table
    assert float(table[0]["error"]) == local
    assert f"tampered: the read-only data {data / 'ro'} changed since the loop started" in \
        table[1]["reason"], table[1]
    assert (data / "ro" / "xs.txt").read_text() == " ".join(map(str, XS)) + "\n"
    assert (there / "ro" / "xs.txt").read_text().endswith("9\n")

    # the node now holds another copy at that path: never written over, refused at start
    with pytest.raises(UsageError) as refused:
        night(repo, "again")
    message = str(refused.value)
    assert "\n" not in message
    assert f"has another {data / 'ro'} than this machine" in message, message


@pytest.mark.slow
def test_data_too_big_to_ship_is_refused_at_start(nodes, mlflow_uri):
    world, _ = nodes
    repo = make_world(world / "big", read_only_extra=300 * 2**20)    # sparse: no disk
    with pytest.raises(UsageError) as refused:
        night(repo, "t")
    message = str(refused.value)
    assert "\n" not in message
    assert f"cannot see {world / 'big' / 'data' / 'ro'} (300 MiB" in message, message
    assert "over the 256 MiB shipped to a node); put it on a filesystem the nodes share" in \
        message, message
    assert not (repo / ".autoresearch" / "t" / "results.tsv").exists()    # no baseline


def test_the_plan_ships_what_a_node_lacks_within_the_limit():
    needs = (Need("held_out", "/d/answers", "h", 1, size=2**19),
             Need("read_only", "/d/ro", "r", 1, size=2**20),
             Need("private", "/d/private", "p", 1, size=5))
    seen = {"node": "n1", "digests": ["h", "r", "p"], "creatable": [True] * 3}
    assert plan(needs, [seen]) == Reach(needs, (), "n1")
    lacks = {"node": "n2", "digests": [None, "r", "other"], "creatable": [True] * 3}
    assert plan(needs, [seen, lacks]).shipped == (0, 2)   # a different private: re-rooted
    with pytest.raises(UsageError, match=r"node n2 cannot see /d/ro \(1 MiB; 1.5 MiB with "
                                         r"the rest it lacks, over the 1 MiB shipped"):
        plan(needs, [{**lacks, "digests": [None, None, "p"]}], limit=2**20)
    with pytest.raises(UsageError, match="node n2 cannot see /d/answers and cannot create it"):
        plan(needs, [{**lacks, "creatable": [False] * 3}])
    assert human(300 * 2**20) == "300 MiB" and human(3 * 10**9) == "3 GB"
