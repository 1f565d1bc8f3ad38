"""How the LLM proposer waits, against a real streaming server (tests/openai_server.py)
through the real `openai` client: a slow answer is waited for, a stalled one is shut
before the retry, a slow server is named as such (never an outage), Ctrl-C ends a request
in flight, and each request is recorded (size, speed, cached share)."""
from __future__ import annotations

import json
import threading
import time

import pytest
from llm_task import GOOD, no_openai_env, tiny_task  # noqa: F401
from openai_server import Reply

from loop.proposers.base import Context, ProposerFatal
from loop.proposers.llm import LLMProposer
from loop.setup.config import ProposerConfig

TRAIN = "import torch\n\nLR = 3e-4\nSTEPS = 100\n"
EXPECTED = TRAIN.replace("LR = 3e-4", "LR = 1e-3")


@pytest.fixture
def task(tmp_path):
    return tiny_task(tmp_path, TRAIN, protected=False, description="a tiny model")


def context(task):
    return Context(iteration=1, task=task, files={"train.py": TRAIN}, program="",
                   history=[], best_metric=2.5, seed=7)


def proposer(server, **overrides) -> LLMProposer:
    settings = dict(kind="llm", model="test-model", base_url=server.base_url, timeout_s=5.0,
                    stall_s=5.0, max_retries=3, repair_turns=0)
    settings.update(overrides)
    return LLMProposer(ProposerConfig(**settings), backoff_scale=0.0)


def test_a_slow_but_alive_stream_is_not_timed_out(openai_server, task):
    # the whole answer takes longer than either wait; no silence is longer than one
    openai_server.script(Reply(GOOD, delay_s=0.6, token_delay_s=0.12))
    proposal = proposer(openai_server, timeout_s=1.0, stall_s=0.6).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 1
    assert openai_server.requests[0]["stream"] is True
    record = json.loads(proposal.artifacts["requests.json"])[0]
    assert record["seconds"] > 1.0 and record["first_token_s"] >= 0.6


def test_a_stalled_stream_is_closed_before_the_retry_which_sends_another_seed(
        openai_server, task):
    openai_server.script(Reply(GOOD, stall_after=3, stall_s=60), GOOD)
    proposal = proposer(openai_server, stall_s=0.5).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    kinds = [kind for kind, _ in openai_server.events]
    assert kinds == ["request", "closed", "request"]     # closed, then the retry
    seeds = [r["seed"] for r in openai_server.requests]
    assert seeds[0] != seeds[1]


def test_a_server_too_slow_for_the_first_token_stops_in_one_line_not_as_an_outage(
        openai_server, task):
    openai_server.script(Reply(GOOD, delay_s=60), Reply(GOOD, delay_s=60), GOOD)
    with pytest.raises(ProposerFatal) as err:
        proposer(openai_server, timeout_s=0.5).propose(context(task))
    message = str(err.value)
    assert "too slow" in message and "--llm-timeout" in message
    assert "unavailable" not in message
    assert len(openai_server.requests) == 2        # SLOW_ATTEMPTS, not max_retries + 1
    assert openai_server.wait_for("closed", 2)
    assert [kind for kind, _ in openai_server.events] == ["request", "closed"] * 2


def test_the_proposal_cap_ends_an_answer_still_being_written(openai_server, task):
    openai_server.script(Reply(GOOD * 4, token_delay_s=0.1))
    proposal = proposer(openai_server, proposal_timeout_s=1.0).propose(context(task))
    assert proposal.files == {}
    assert "proposal_timeout_s=1s" in proposal.error
    assert openai_server.wait_for("closed")
    assert [kind for kind, _ in openai_server.events] == ["request", "closed"]


def test_cancel_ends_a_request_in_flight_at_once(openai_server, task):
    openai_server.script(Reply(GOOD, delay_s=120))
    llm = proposer(openai_server)
    outcome: list = []
    worker = threading.Thread(target=lambda: outcome.append(_run(llm, task)), daemon=True)
    worker.start()
    while not openai_server.requests:
        time.sleep(0.05)
    llm.cancel()
    worker.join(timeout=10)      # a generous bound: the watchdog looks 5 times a second
    assert not worker.is_alive()
    assert outcome == ["Cancelled"]
    assert openai_server.wait_for("closed")
    assert [kind for kind, _ in openai_server.events] == ["request", "closed"]


def _run(llm, task) -> str:
    try:
        llm.propose(context(task))
        return "answered"
    except Exception as exc:
        return type(exc).__name__


@pytest.mark.parametrize("shape,field", [("openai", "cached_tokens"), ("llamacpp", "cache_n")])
def test_cached_prompt_tokens_are_read_and_recorded(openai_server, task, shape, field):
    reply = Reply(GOOD, shape=shape, prompt_tokens=900, cached_tokens=800, cache_n=800)
    openai_server.script(reply)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.usage.cached_tokens == 800 and proposal.usage.prompt_tokens == 900
    record = json.loads(proposal.artifacts["requests.json"])[0]
    assert record["cached_tokens"] == 800
    assert record["prompt_tokens_estimate"] > 0 and record["prompt_chars"] > 0


# -- the context window ---------------------------------------------------------------------

def _long_history():
    from loop.proposers.base import Attempt
    return [Attempt(i, f"idea number {i}: try a learning rate of {i}e-4 with warm-up", "discard",
                    2.6, -0.1, "no gain") for i in range(1, 60)]


def test_a_prompt_over_the_window_is_fitted_journal_first(openai_server, task):
    openai_server.props = {"default_generation_settings": {"n_ctx": 2200}}
    openai_server.script(GOOD)
    llm = proposer(openai_server)
    assert "context window 2200 tokens (llama.cpp /props n_ctx)" in llm.check_endpoint()
    ctx = context(task)
    ctx.history = _long_history()
    proposal = llm.propose(ctx)
    assert proposal.files == {"train.py": EXPECTED}
    record = json.loads(proposal.artifacts["requests.json"])[0]
    assert record["context_window"] == 2200
    assert record["prompt_tokens_estimate"] <= 2200 - 1024
    assert record["left_out"] and record["left_out"][0].startswith("journal cut to")
    sent = openai_server.user_messages(0)[0]
    assert "LR = 3e-4" in sent                            # the code is still there


def test_a_prompt_that_cannot_fit_is_refused_in_one_line(openai_server, task):
    openai_server.props = {"default_generation_settings": {"n_ctx": 600}}
    with pytest.raises(ProposerFatal) as err:
        proposer(openai_server).propose(context(task))
    message = str(err.value)
    assert "\n" not in message
    assert "context window is 600 tokens" in message and "the prompt needs about" in message
    assert openai_server.requests == []                   # nothing sent to be truncated


def test_the_window_is_read_from_vllm_and_ollama(openai_server):
    from loop.proposers.window import discover
    openai_server.max_model_len = 32768
    assert discover(openai_server.base_url, "test-model", "k") == \
        (32768, "vLLM /v1/models max_model_len")
    openai_server.max_model_len = None
    openai_server.ollama_show = {"parameters": "temperature 0.7\nnum_ctx 8192",
                                 "model_info": {"qwen2.context_length": 32768}}
    assert discover(openai_server.base_url, "test-model", None) == \
        (8192, "Ollama /api/show num_ctx")
    openai_server.ollama_show = {"parameters": "", "model_info": {"qwen2.context_length": 32768}}
    assert discover(openai_server.base_url, "test-model", None)[0] == 4096   # its default
    openai_server.ollama_show = None
    assert discover(openai_server.base_url, "test-model", None) == (None, "")


def test_a_server_refusing_stream_options_is_streamed_without_them(openai_server, task):
    openai_server.script(Reply(status=400, error={
        "message": "Unsupported parameter: 'stream_options' is not supported here.",
        "param": "stream_options", "code": "unsupported_parameter"}), GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert "stream_options" not in openai_server.requests[1]
    assert openai_server.requests[1]["stream"] is True


# -- an endpoint that does not stream ----------------------------------------------------------

def test_a_plain_completion_answering_a_stream_request_is_read_as_the_completion(
        openai_server, task, caplog):
    # a gateway that answers stream: true with one application/json chat completion
    openai_server.streams = False
    openai_server.script(Reply(GOOD, prompt_tokens=321, completion_tokens=45),
                         Reply(GOOD))
    llm = proposer(openai_server, patience_s=0)      # an outage would stop it at once
    first = llm.propose(context(task))
    second = llm.propose(context(task))
    assert first.files == second.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 2                    # no retry: nothing was broken
    assert all(r["stream"] is True for r in openai_server.requests)
    record = json.loads(first.artifacts["requests.json"])[0]
    assert record["prompt_tokens"] == 321 and record["completion_tokens"] == 45
    assert record["finish"] == "stop"
    notes = [r.getMessage() for r in caplog.records if "plain completion" in r.getMessage()]
    assert notes == ["note: the endpoint answers stream requests with one plain completion; "
                     "reading it as such"]                       # said once, not per request


def test_a_plain_json_that_is_no_completion_is_still_a_broken_answer(openai_server, task):
    openai_server.streams = False
    openai_server.script(Reply(choices=[]), Reply(GOOD))
    proposal = proposer(openai_server, patience_s=0).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 2                    # retried like any broken 200
