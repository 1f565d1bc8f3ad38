"""`autoresearch doctor`: one line per protection, probed for real; exit 1 when a required
one is missing."""
from conftest import run_cli
from conftest import needs_sandbox
from helpers import fake_bwrap

NAMES = ["sandbox", "network", "PID", "processes", "filesystem", "git hardening", "secrets",
         "GPU/torch", "MLflow store", "disk"]


def lines_by_name(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        for name in NAMES:
            if line[9:].startswith(name + " "):
                found[name] = line
    return found


@needs_sandbox
def test_doctor_reports_each_protection_on_a_sandboxed_machine(toy_repo, mlflow_uri):
    res = run_cli("doctor", cwd=toy_repo)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = lines_by_name(res.stdout)
    assert list(lines) == NAMES, res.stdout
    for name in ("sandbox", "network", "PID", "filesystem", "secrets"):
        assert lines[name].startswith("ok "), lines[name]
    assert "blocked" in lines["network"] and "invisible" in lines["PID"]
    assert mlflow_uri in lines["MLflow store"] and "GB free" in lines["disk"]
    assert "torch " in lines["GPU/torch"]
    assert lines["processes"].startswith(("ok ", "warn ")), lines["processes"]


def test_doctor_fails_when_a_required_sandbox_is_missing(toy_repo, tmp_path, mlflow_uri):
    (toy_repo / "strict.yaml").write_text("task: task\nsandbox: required\n")
    env = fake_bwrap(tmp_path)
    res = run_cli("doctor", "--config", "strict.yaml", cwd=toy_repo, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = lines_by_name(res.stdout)
    assert lines["sandbox"].startswith("MISSING") and "[required]" in lines["sandbox"]
    assert lines["network"].startswith("warn") and lines["PID"].startswith("warn")
    assert "required protection missing: sandbox" in res.stdout
    # auto: the same machine is usable, with its warnings
    (toy_repo / "auto.yaml").write_text("task: task\n")
    res = run_cli("doctor", "--config", "auto.yaml", cwd=toy_repo, env=env)
    assert res.returncode == 0 and lines_by_name(res.stdout)["sandbox"].startswith("warn")


@needs_sandbox
def test_doctor_in_a_clone_under_tmp_reports_no_false_alarm(toy_repo, mlflow_uri):
    """A clone under /tmp with its venv inside it (as CI makes): the sandbox binds the venv,
    so the clone's folder exists in the sandbox's own /tmp; the probe's write there is no
    write into the repository."""
    import os
    assert str(toy_repo).startswith("/tmp/")
    venv_bin = toy_repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    res = run_cli("doctor", cwd=toy_repo, env=env)
    lines = lines_by_name(res.stdout)
    assert lines["filesystem"].startswith("ok "), res.stdout
    assert res.returncode == 0, res.stdout + res.stderr
    assert not list(toy_repo.glob(".doctor-probe-*"))
