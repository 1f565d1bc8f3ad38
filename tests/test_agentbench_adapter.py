"""AgentBench's OS-interaction items through `autoresearch task agentbench`: a checkout of
the real layout (data/os_interaction/data/<n>/*.json, scripts/<n>/, res/dockerfiles/) with
our own small items, their scripts resolved the way AgentBench resolves them, and its
verdict rules (match, regex, the chain of check scripts with a null for the example).
Episodes need Docker; where `docker info` fails the task is refused in one line."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from loop.adapters import agentbench
from loop.adapters.agentbench_grade import argv_for, episode, judge
from loop.errors import UsageError

INTEGER_MATCH = "from sys import argv\nexit(0 if int(argv[1]) == int(argv[2]) else 1)\n"
ITEMS = [
    {"description": "How many lines does /root/notes.txt have? Answer with the number only.",
     "create": {"local": "default", "init": {"file": "init/notes.sh"}},
     "evaluation": {"check": [None, {"language": "python", "file": "check/integer-match.py"}],
                    "example": {"code": "wc -l < /root/notes.txt"}},
     "labels": ["file"]},
    {"description": "What is the name of the hidden file in /root/r1?",
     "create": {"local": "default", "init": {"code": "mkdir -p /root/r1 && touch /root/r1/.x"}},
     "start": "sleep 100 &",
     "evaluation": {"match": ".x"}, "labels": ["file"]},
    {"description": "Print a version string like v1.2.",
     "evaluation": {"match": {"regex": r"^v\d+\.\d+$"}}},
]


def make_checkout(root: Path) -> Path:
    os_root = root / "data" / "os_interaction"
    (os_root / "data" / "1").mkdir(parents=True)
    (os_root / "data" / "1" / "demo.json").write_text(json.dumps(ITEMS, indent=1))
    scripts = os_root / "scripts" / "1"
    (scripts / "init").mkdir(parents=True)
    (scripts / "check").mkdir()
    (scripts / "init" / "notes.sh").write_text("printf 'a\\nb\\nc\\n' > /root/notes.txt\n")
    (scripts / "check" / "integer-match.py").write_text(INTEGER_MATCH)
    (os_root / "res" / "dockerfiles").mkdir(parents=True)
    (os_root / "res" / "dockerfiles" / "default").write_text("FROM ubuntu\nCMD [\"bash\"]\n")
    return os_root / "data" / "1" / "demo.json"


def local(language, code, params):
    out = subprocess.run(argv_for(language, code, params), capture_output=True, text=True)
    return out.returncode, out.stdout


def test_items_are_read_with_their_scripts_resolved_as_agentbench_does(tmp_path):
    data = make_checkout(tmp_path / "AgentBench")
    items = agentbench.load_items(data, data.parents[2] / "scripts" / "1")
    notes, hidden, version = items
    assert notes["init"] == [["bash", "printf 'a\\nb\\nc\\n' > /root/notes.txt\n"]]
    assert notes["check"] == [None, ["python", INTEGER_MATCH]]
    assert notes["example"] == ["bash", "wc -l < /root/notes.txt"]
    assert hidden["match"] == {"answer": ".x", "strip": True} and hidden["start"][0] == "bash"
    assert version["image"] == "default" and version["match"] == {"regex": r"^v\d+\.\d+$"}


def test_the_verdict_follows_agentbench_rules(tmp_path):
    items = agentbench.load_items(make_checkout(tmp_path / "AgentBench"),
                                  tmp_path / "AgentBench/data/os_interaction/scripts/1")
    notes, hidden, version = items
    notes = {**notes, "example": ["bash", "echo 3"]}      # the example script's output: 3
    assert judge("3", notes, local) and judge(" 3\n", notes, local)
    assert not judge("4", notes, local)
    assert judge(" .x \n", hidden, local) and not judge(".y", hidden, local)
    assert judge("v1.2", version, local) and not judge("version 1.2", version, local)


def test_an_episode_runs_the_agents_commands_then_judges_its_answer(tmp_path):
    items = agentbench.load_items(make_checkout(tmp_path / "AgentBench"),
                                  tmp_path / "AgentBench/data/os_interaction/scripts/1")
    work = tmp_path / "box"
    work.mkdir()

    class Box:                     # a stand-in for the container: the commands run in `work`
        def run(self, argv, detach=False):
            argv = [a.replace("/root", str(work)) for a in argv]
            if detach:
                return 0, ""
            return local("bash", argv[2], argv[4:]) if argv[0] == "bash" else \
                local("python", argv[2], argv[3:])

        def execute(self, language, code, params):
            return self.run(argv_for(language, code, params))

    class Agent:
        def act(self, description, history):
            if not history:
                return {"bash": "wc -l < /root/notes.txt"}
            return {"answer": history[-1]["output"].strip()}

    assert episode(Agent(), items[0], Box(), 8, 800, print)
    assert (work / "notes.txt").read_text() == "a\nb\nc\n"             # the init script ran

    class Stubborn:
        def act(self, description, history):
            return {"bash": "true"}
    assert not episode(Stubborn(), items[0], Box(), 3, 800, print)   # round limit: a fail


@pytest.mark.skipif(agentbench.docker_unavailable() is None, reason="Docker works here")
def test_without_docker_the_task_is_refused_in_one_line(tmp_path):
    data = make_checkout(tmp_path / "AgentBench")
    with pytest.raises(UsageError, match="needs Docker, which is not available here"):
        agentbench.make_task(data, tmp_path / "t")
    out = run_cli("task", "agentbench", str(data), "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "docker info" in out.stderr and not (tmp_path / "t").exists()


def test_where_docker_runs_the_task_folder_holds_no_answers(tmp_path, monkeypatch):
    """(Docker itself is replaced here by its absence check only; the episodes need it.)"""
    monkeypatch.setattr(agentbench, "docker_unavailable", lambda: None)
    data = make_checkout(tmp_path / "AgentBench")
    monkeypatch.setenv(agentbench.ROOT_VAR, str(tmp_path / "AgentBench"))
    out = agentbench.make_task(data, tmp_path / "t", warn=lambda line: None)
    from loop.setup.task import load_task
    task = load_task(out)
    assert task.metric.name == "success_rate" and task.editable == ("agent.py",)
    private = Path(task.private)
    assert json.loads((private / "items.json").read_text())[1]["match"]["answer"] == ".x"
    assert (private / "dockerfiles" / "default").is_file()
    folder_text = "".join(p.read_text() for p in out.iterdir() if p.is_file())
    assert "int(argv[1]) == int(argv[2])" not in folder_text                # the check script
    assert "integer-match" not in folder_text and "wc -l < /root/notes.txt" not in folder_text


def test_agentbenchs_own_tolerances_and_script_pairing_are_kept(tmp_path):
    data = make_checkout(tmp_path / "AgentBench")
    odd = {"description": "q", "create": [None, {"language": "python", "file": "x.py"}],
           "evaluation": {"match": "1"}}          # as one item of data/5/new.json is shipped
    (data.parent / "odd.json").write_text(json.dumps([odd]))
    item, = agentbench.load_items(data.parent / "odd.json", data.parents[2] / "scripts" / "1")
    assert item["image"] == "default" and item["init"] == []
    dev = data.parents[1] / "dev.json"                          # data/dev.json -> scripts/dev/
    dev.write_text("[]")
    assert agentbench.default_scripts(dev) == data.parents[2] / "scripts" / "dev"
    assert agentbench.default_scripts(data) == data.parents[2] / "scripts" / "1"
