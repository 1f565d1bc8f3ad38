"""A sandboxed step reaches the endpoints its task declares and nothing else
(loop/run/netbridge.py): real bwrap, real listeners on this machine's loopback."""
import socket
import threading
from pathlib import Path

import pytest
import yaml

from conftest import needs_sandbox
from loop.run import netbridge
from loop.errors import TaskError
from loop.advice.check_task import check_task
from loop.setup.task import load_task

pytestmark = needs_sandbox


class Echo:
    """A TCP listener on 127.0.0.1 that answers every line with `<name>:<line>`."""

    def __init__(self, name: str):
        self.name = name
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.port = self.server.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.hits += 1
            with conn:
                data = conn.recv(1024)
                conn.sendall(f"{self.name}:{data.decode()}".encode())

    def close(self):
        try:
            self.server.shutdown(socket.SHUT_RDWR)     # wakes the accept() (close alone does not)
        except OSError:
            pass
        self.server.close()


PROBE = """\
import socket, sys
def probe(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(b"hi")
            return s.recv(100).decode() or "closed"
    except OSError as exc:
        return f"blocked ({type(exc).__name__})"
for port in sys.argv[2:]:
    print(f"{sys.argv[1]} {port} -> {probe(int(port))}")
"""


@pytest.fixture
def echoes():
    made = [Echo("run"), Echo("judge"), Echo("other")]
    yield made
    for e in made:
        e.close()


def write_task(folder: Path, run_port, judge_port, other_port, network=True) -> Path:
    folder.mkdir()
    (folder / "probe.py").write_text(PROBE)
    (folder / "train.py").write_text("X = 1\n")
    ports = f"{run_port} {judge_port} {other_port}"
    spec = {"name": "net", "editable": ["train.py"], "protected": ["probe.py"],
            "run": f"python probe.py run {ports}",
            "evaluate": f"python probe.py grader {ports} && echo 'score: 1'",
            "metric": "score", "time_budget_s": 20}
    if network:
        spec.update(network=[f"127.0.0.1:{run_port}"],
                    grader_network=[f"127.0.0.1:{judge_port}"])
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return folder


def test_each_step_reaches_its_declared_endpoints_and_no_other_port(tmp_path, echoes):
    run, judge, other = echoes
    lines = []
    _, result = check_task(write_task(tmp_path / "t", run.port, judge.port, other.port),
                           out=lines.append)
    assert result.status == "ok", lines
    assert other.hits == 0                   # undeclared: nothing listens for it inside
    assert run.hits == 2                     # the run and the grader reached it
    assert judge.hits == 1                   # the grader only


def test_with_nothing_declared_the_host_loopback_stays_unreachable(tmp_path, echoes):
    run, judge, other = echoes
    _, result = check_task(write_task(tmp_path / "t", run.port, judge.port, other.port,
                                      network=False), out=lambda line: None)
    assert result.status == "ok"
    assert run.hits == judge.hits == other.hits == 0


@pytest.mark.parametrize("value,why", [("10.0.0.5:8000", "host name"),
                                       ("127.0.0.1", "not host:port"),
                                       ("example.org:99999", "not host:port")])
def test_an_endpoint_the_sandbox_cannot_bridge_is_refused_when_the_task_loads(tmp_path, value,
                                                                              why):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "train.py").write_text("X = 1\n")
    (folder / "task.yaml").write_text(f"name: n\neditable: [train.py]\nrun: python train.py\n"
                                      f"metric: score\nnetwork: ['{value}']\n")
    with pytest.raises(TaskError, match=why):
        load_task(folder)


def test_host_names_get_a_loopback_address_of_their_own():
    inside = netbridge.inside_addresses(["judge.example.org:8443", "localhost:8000",
                                         "127.0.0.5:9000", "api.example.com:8443"])
    assert inside == {"judge.example.org:8443": "127.0.0.3:8443",
                      "localhost:8000": "127.0.0.1:8000", "127.0.0.5:9000": "127.0.0.5:9000",
                      "api.example.com:8443": "127.0.0.2:8443"}


def test_doctor_shows_what_the_task_opens_and_probes_it_from_inside(tmp_path, echoes):
    from loop.ui.doctor import check_endpoints
    run, judge, other = echoes
    judge.close()                                      # declared, but nothing answers now
    check = check_endpoints(True, write_task(tmp_path / "t", run.port, judge.port, other.port))
    assert check.state == "ok"
    assert f"127.0.0.1:{run.port} (run+grader, answering)" in check.line
    assert f"127.0.0.1:{judge.port} (grader only, not answering now)" in check.line
    assert "every other address blocked" in check.line
    assert "opens no address" in check_endpoints(True, None).line
