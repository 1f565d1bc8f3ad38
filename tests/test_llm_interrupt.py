"""Ctrl-C while the LLM is still answering: a real `autoresearch run` subprocess, a real
SIGINT, the real `openai` client streaming from tests/openai_server.py. The process ends
at once (it used to wait for the request to time out), the tag stays locked while it
lives, and a restart finds journal, results.tsv and branch in agreement."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import run_cli
from openai_server import Reply
from helpers import as_from_a_terminal, assert_same_story
from llm_task import SEARCH_REPLACE

# The answer is 600 s away and so is the request's timeout (proposer.timeout_s): an engine that
# waited for either is still running long after this, which is all the wait below asks.
EXIT_WAIT_S = 120


def _run_args(tag: str, iterations: int) -> list[str]:
    return ["run", "--task", "task", "--tag", tag, "--iterations", str(iterations),
            "--judge", "strict", "--proposer", "llm", "--model", "test-model"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_request_ends_the_engine_at_once_and_the_tag_stays_locked_until_then(
        toy_repo, mlflow_uri, openai_server, sig):
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "sk-t"}
    openai_server.script(Reply(SEARCH_REPLACE, delay_s=600))     # reading a long prompt
    proc = subprocess.Popen([sys.executable, "-m", "loop", *_run_args("t", 1)], cwd=toy_repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 120
    while not openai_server.requests and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    assert openai_server.requests, "the engine never asked the LLM"

    second = run_cli(*_run_args("t", 1), cwd=toy_repo, env=env)
    assert second.returncode == 2
    assert "already running" in second.stderr

    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {EXIT_WAIT_S} s after the signal: it waits for the LLM\n"
                    + proc.communicate()[0])
    assert proc.returncode == 130, out
    # it hung up mid-answer: the server saw the connection close while holding the reply
    assert openai_server.wait_for("closed"), "the request was never cancelled"
    kinds = [kind for kind, _ in openai_server.events]
    assert kinds.count("closed") == 1 and kinds[-1] == "closed", kinds   # and asked no more

    openai_server.script(SEARCH_REPLACE)                 # the restart redoes iteration 1
    res = run_cli(*_run_args("t", 1), cwd=toy_repo, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    table = assert_same_story(toy_repo, mlflow_uri)
    assert [r["status"] for r in table] == ["keep", "keep"]
    assert table[1]["description"].startswith("move X to 1.0")
