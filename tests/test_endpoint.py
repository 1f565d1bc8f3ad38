"""The LLM endpoint: checked before anything runs (exit 2 with the reason), waited for when
it goes away mid-night (then exit 1), never counted as the code's bad_edit. Real `openai`
client against tests/openai_server.py, real sockets."""
import csv
import socket
import threading
import time

import pytest

from conftest import run_cli
from openai_server import Reply
from loop.engine.engine import Engine
from llm_task import SEARCH_REPLACE, UNIFIED_DIFF, WHOLE_FILE, llm_config


def closed_port_url() -> str:
    with socket.socket() as s:             # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def run_llm(repo, base_url, model="test-model"):
    return run_cli("run", "--task", "task", "--tag", "e", "--proposer", "llm", "--model", model,
                   "--base-url", base_url, "--iterations", "1", cwd=repo, timeout=120)


def test_an_unreachable_endpoint_stops_before_the_baseline(toy_repo, mlflow_uri):
    res = run_llm(toy_repo, closed_port_url())
    assert res.returncode == 2, res.stdout + res.stderr
    assert "unreachable" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (toy_repo / ".autoresearch" / "e" / "results.tsv").exists()   # nothing ran


def test_a_model_the_endpoint_does_not_serve_stops_before_the_baseline(toy_repo, mlflow_uri,
                                                                         openai_server):
    openai_server.models = ["qwen-coder", "llama-3"]
    res = run_llm(toy_repo, openai_server.base_url, model="gpt-typo")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "model 'gpt-typo' is not served" in res.stderr and "qwen-coder" in res.stderr
    assert not (toy_repo / ".autoresearch" / "e" / "results.tsv").exists()
    # not listed, so one 1-token request decided it (some endpoints list aliases only)
    assert [r["max_tokens"] for r in openai_server.requests] == [1]


def test_a_model_missing_from_the_list_but_answering_passes(toy_repo, mlflow_uri,
                                                             openai_server):
    openai_server.models = ["some-alias"]
    openai_server.script("pong", WHOLE_FILE)
    res = run_llm(toy_repo, openai_server.base_url)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "answers for test-model" in res.stdout


def test_a_served_model_passes_the_check_and_the_loop_runs(toy_repo, mlflow_uri, openai_server):
    openai_server.script(WHOLE_FILE)
    res = run_llm(toy_repo, openai_server.base_url)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"endpoint: {openai_server.base_url} serves test-model" in res.stdout
    assert len(openai_server.requests) == 1


def test_an_endpoint_gone_mid_night_is_waited_for_then_stops_with_exit_1(
        toy_repo, mlflow_uri, openai_server):
    openai_server.script(WHOLE_FILE, WHOLE_FILE)

    def stop_after_first_request():    # the server goes away once it has answered once
        while not openai_server.requests:
            time.sleep(0.01)
        time.sleep(0.2)
        openai_server.stop()
    threading.Thread(target=stop_after_first_request, daemon=True).start()
    cfg = llm_config(toy_repo, openai_server, iterations=3,
                     proposer={"max_retries": 0, "patience_s": 2.0})
    started = time.monotonic()
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 1 and stop.reason == "proposer", stop.message
    assert "unavailable for 2s (proposer.patience_s)" in stop.message
    assert time.monotonic() - started >= 2.0          # it waited its patience first
    with open(toy_repo / ".autoresearch" / "llm" / "results.tsv") as f:
        statuses = [r["status"] for r in csv.DictReader(f, delimiter="\t")]
    assert statuses[0] == "keep" and len(statuses) == 2     # baseline + the answered one
    assert "bad_edit" not in statuses                        # the outage is not the code's


def test_a_flapping_proxy_answering_broken_200s_is_waited_out_not_a_bad_edit(
        toy_repo, mlflow_uri, openai_server):
    from openai_server import Reply
    openai_server.script(Reply(raw="<html>502</html>"), SEARCH_REPLACE, Reply(raw=""),
                         Reply(choices=[]), UNIFIED_DIFF, Reply(null_content=True), WHOLE_FILE)
    cfg = llm_config(toy_repo, openai_server, iterations=3, max_consecutive_failures=1,
                     proposer={"max_retries": 0, "patience_s": 20.0})
    stop = Engine(cfg, out=lambda s: None).run()
    assert stop.exit_code == 0, stop.message
    with open(toy_repo / ".autoresearch" / "llm" / "results.tsv") as f:
        statuses = [r["status"] for r in csv.DictReader(f, delimiter="\t")]
    assert len(statuses) == 4 and "bad_edit" not in statuses, statuses
    assert len(openai_server.requests) == 7              # every broken answer was asked again


@pytest.mark.parametrize("models_raw, reply, said", [
    ("<html>login</html>", Reply(raw="<html>login</html>"), "a 200 whose body is not JSON"),
    ("", Reply(raw=""), "a 200 whose body is not JSON"),
    ('{"object": "list", "data": []}', Reply(choices=[]), "a 200 without choices"),
    (None, Reply(null_content=True), "a 200 whose message content is null"),
])
def test_a_200_that_is_no_completion_stops_before_the_baseline_in_one_line(
        toy_repo, mlflow_uri, openai_server, models_raw, reply, said):
    """What mid-night is an outage (retried, waited out) is, at the start, one clear line
    and exit 2, like an unreachable endpoint: not a traceback, not a night of bad_edits."""
    openai_server.models_raw = models_raw
    if models_raw is None:
        openai_server.models = ["an-alias"]        # not listed: one token decides
    openai_server.script(reply)
    res = run_llm(toy_repo, openai_server.base_url)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, \
        res.stderr
    assert "answers no completion" in res.stderr and said in res.stderr, res.stderr
    assert "is not served" not in res.stderr       # the model is not the problem
    assert not (toy_repo / ".autoresearch" / "e" / "results.tsv").exists()   # nothing ran


def test_an_outage_on_an_endpoint_without_a_models_list_ends_when_it_answers_again(
        toy_repo, mlflow_uri, openai_server):
    """Waiting out an outage polls the models list; a server that has none (404, as the
    start's check allows) is back when it answers at all, not never: the night went on
    waiting until `patience_s` ran out and stopped, though the server had answered."""
    from openai_server import Reply
    openai_server.models = None
    openai_server.script(Reply(status=503), WHOLE_FILE)
    cfg = llm_config(toy_repo, openai_server, iterations=1,
                     proposer={"max_retries": 0, "patience_s": 8.0})
    stop = Engine(cfg, out=lambda s: None).run()
    # waiting on until patience_s ran out would stop with exit 1, "unavailable for 8s"
    assert stop.exit_code == 0 and stop.reason != "proposer", stop.message
    assert len(openai_server.requests) == 2            # asked again once it answered


def test_a_night_on_an_endpoint_that_does_not_stream_runs_and_says_so_once(
        toy_repo, mlflow_uri, openai_server):
    openai_server.streams = False
    openai_server.script(SEARCH_REPLACE, UNIFIED_DIFF)
    res = run_cli("run", "--task", "task", "--tag", "e", "--proposer", "llm", "--model",
                  "test-model", "--base-url", openai_server.base_url, "--iterations", "2",
                  cwd=toy_repo, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    said = res.stdout + res.stderr
    assert said.count("note: the endpoint answers stream requests with one plain completion; "
                      "reading it as such") == 1, said
    assert "waiting for the LLM endpoint" not in said and "Traceback" not in said
    with open(toy_repo / ".autoresearch" / "e" / "results.tsv") as f:
        statuses = [r["status"] for r in csv.DictReader(f, delimiter="\t")]
    assert len(statuses) == 3 and "bad_edit" not in statuses, statuses
    assert len(openai_server.requests) == 2             # one per proposal: none retried
