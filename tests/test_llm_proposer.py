"""The LLM proposer against a real OpenAI-compatible HTTP server (tests/openai_server.py),
through the real `openai` client: formats, retries, refusals, repair turns, usage, prompt."""
from __future__ import annotations

import re

import pytest
from llm_task import EXPECTED, GOOD, PROGRAM, TRAIN, context, proposer, tiny_task
from llm_task import no_openai_env  # noqa: F401 (an autouse fixture: importing it turns it on)
from openai_server import Reply

from loop.setup.config import ProposerConfig
from loop.proposers.base import Attempt, ProposerFatal
from loop.proposers.llm import LLMProposer
from loop.proposers.prompts import render_journal


@pytest.fixture
def task(tmp_path):
    return tiny_task(tmp_path, TRAIN)


# -- the three edit formats ----------------------------------------------------------------

DIFF = ("Hypothesis: raise LR to 1e-3 to converge faster\n```diff\n--- a/train.py\n"
        "+++ b/train.py\n@@ -1,4 +1,4 @@\n import torch\n \n-LR = 3e-4\n+LR = 1e-3\n```\n")
WHOLE = f"Description: raise LR to 1e-3 to converge faster\n\ntrain.py\n```python\n{EXPECTED}```\n"


@pytest.mark.parametrize("reply", [GOOD, DIFF, WHOLE], ids=["search-replace", "diff", "whole"])
def test_each_edit_format_becomes_a_proposal(openai_server, task, reply):
    openai_server.script(reply)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.error is None
    assert proposal.files == {"train.py": EXPECTED}
    assert proposal.description == "raise LR to 1e-3 to converge faster"
    assert openai_server.requests[0]["model"] == "test-model"


def test_a_no_op_block_beside_a_real_one_is_one_proposal_with_a_note(openai_server, task):
    """The real block applies in the first turn (no repair asked), the no-op is noted."""
    openai_server.script(GOOD + "\ntrain.py\n```python\n<<<<<<< SEARCH\nSTEPS = 100\n"
                                "=======\nSTEPS = 100\n>>>>>>> REPLACE\n```\n")
    proposal = proposer(openai_server).propose(context(task))
    assert (proposal.error, proposal.files) == (None, {"train.py": EXPECTED})
    assert proposal.usage.requests == 1
    assert "STEPS = 100" in proposal.artifacts["edit_notes.md"]
    assert "changes nothing" in proposal.artifacts["edit_notes.md"]


# -- transient errors are retried; refusals stop the loop -----------------------------------

def test_rate_limit_is_retried_honouring_retry_after(openai_server, task):
    """The server asks for a second's pause: the retry comes no sooner, as the server saw
    it (the test's proposer backs off 0 s by itself, so only retry-after makes the wait)."""
    openai_server.script(Reply(status=429, headers={"retry-after": "1"}), GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 2 and proposal.usage.requests == 1
    asked = [at for kind, at in openai_server.events if kind == "request"]
    assert asked[1] - asked[0] >= 1.0, "the retry did not wait what retry-after asked"


def test_server_errors_past_retries_and_patience_stop_the_loop(openai_server, task):
    # an outage is not the code's bad_edit: after the retries and patience_s, the loop stops
    openai_server.script(*[Reply(status=500)] * 3)
    with pytest.raises(ProposerFatal, match=r"unavailable for 0s.*after 2 retries: 500"):
        proposer(openai_server, max_retries=2, patience_s=0).propose(context(task))
    assert len(openai_server.requests) == 3


def test_client_timeout_is_retried(openai_server, task):
    openai_server.script(Reply(GOOD, delay_s=1.5), GOOD)
    proposal = proposer(openai_server, timeout_s=0.5).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 2


def test_unauthorized_is_fatal_and_names_the_key_variable(openai_server, task, monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-wrong")
    openai_server.script(Reply(status=401, error={"message": "Incorrect API key provided"}))
    with pytest.raises(ProposerFatal) as err:
        proposer(openai_server, api_key_env="TEST_LLM_KEY").propose(context(task))
    assert "401 Unauthorized" in str(err.value) and "$TEST_LLM_KEY" in str(err.value)
    assert len(openai_server.requests) == 1                        # no retry on 401
    assert openai_server.headers[0]["authorization"] == "Bearer sk-wrong"


def test_unknown_model_is_fatal(openai_server, task):
    openai_server.script(Reply(status=404, error={"message": "model not found"}))
    with pytest.raises(ProposerFatal, match="404 Not Found.*'test-model'"):
        proposer(openai_server).propose(context(task))


def test_exhausted_quota_is_fatal_not_retried(openai_server, task):
    openai_server.script(Reply(status=429, error={"message": "You exceeded your quota",
                                                  "code": "insufficient_quota"}))
    with pytest.raises(ProposerFatal, match="out of quota"):
        proposer(openai_server).propose(context(task))
    assert len(openai_server.requests) == 1


def test_unsupported_parameter_is_dropped_and_the_request_resent(openai_server, task):
    openai_server.script(Reply(status=400, error={
        "message": "Unsupported value: 'temperature' does not support 0.7 with this model.",
        "param": "temperature", "code": "unsupported_value"}), GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert "temperature" in openai_server.requests[0]
    assert "temperature" not in openai_server.requests[1]


def test_no_key_and_no_server_is_fatal_but_a_local_server_needs_none(openai_server, task):
    with pytest.raises(ProposerFatal, match=r"no API key: set \$OPENAI_API_KEY"):
        LLMProposer(ProposerConfig(kind="llm", model="m"))
    openai_server.script(GOOD)
    proposer(openai_server).propose(context(task))
    assert openai_server.headers[0]["authorization"] == "Bearer sk-local"


# -- repair turns ----------------------------------------------------------------------------

def test_bad_edit_is_sent_back_and_repaired_on_the_second_turn(openai_server, task):
    bad = GOOD.replace("LR = 3e-4\n=", "LR = 0.0003\n=")
    openai_server.script(bad, GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    second = openai_server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == bad
    assert "SEARCH text was not found in train.py" in second[3]["content"]
    assert "LR = 3e-4" in second[3]["content"]                      # the "did you mean" lines
    assert proposal.usage.requests == 2


def test_truncated_reply_gets_one_shorter_retry(openai_server, task):
    openai_server.script(Reply(GOOD[:60], finish_reason="length"), GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert "cut off" in openai_server.user_messages(1)[-1]


def test_truncated_twice_is_a_failed_proposal(openai_server, task):
    openai_server.script(*[Reply(GOOD, finish_reason="length")] * 2)
    proposal = proposer(openai_server, repair_turns=3).propose(context(task))
    assert proposal.files == {} and "cut off" in proposal.error
    assert len(openai_server.requests) == 2


def test_repair_turns_exhausted_is_a_failed_proposal(openai_server, task):
    openai_server.script(*["I have no idea, sorry."] * 3)
    proposal = proposer(openai_server, repair_turns=2).propose(context(task))
    assert proposal.files == {} and "no edit found" in proposal.error
    assert len(openai_server.requests) == 3
    assert proposal.artifacts["response.md"].count("I have no idea") == 3


# -- usage and cost --------------------------------------------------------------------------

def test_usage_and_cost_sum_over_the_iteration(openai_server, task):
    openai_server.script(Reply("no edit here", prompt_tokens=1000, completion_tokens=100,
                               cached_tokens=400, reasoning_tokens=30),
                         Reply(GOOD, prompt_tokens=1200, completion_tokens=50))
    proposal = proposer(openai_server, price_input_per_m=2.0, price_output_per_m=8.0,
                        price_cached_input_per_m=0.5).propose(context(task))
    u = proposal.usage
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.reasoning_tokens,
            u.requests) == (2200, 150, 400, 30, 2)
    assert u.cost_usd == pytest.approx((1800 * 2.0 + 400 * 0.5 + 150 * 8.0) / 1e6)


def test_reply_without_usage_counts_zero_tokens(openai_server, task):
    openai_server.script(Reply(GOOD, usage=False))
    proposal = proposer(openai_server, price_input_per_m=5.0).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert (proposal.usage.prompt_tokens, proposal.usage.cost_usd, proposal.usage.requests) \
        == (0, 0.0, 1)


# -- the prompt ----------------------------------------------------------------------------------

def test_prompt_holds_program_task_code_and_journal(openai_server, task):
    history = [Attempt(1, "switch to SGD", "discard", 2.9, -0.4),
               Attempt(2, "remove the warmup", "crash", None, None, reason="exit 1",
                       log_tail="Traceback ...\nRuntimeError: shape mismatch")]
    openai_server.script(GOOD)
    p = proposer(openai_server).propose(context(task, history, iteration=3))
    system, user = (m["content"] for m in openai_server.requests[0]["messages"])
    assert "train.py" in system and "prepare.py" in system and "simpler is better" in system
    for expected in ("zebra-42", "val_loss (minimize", "LR = 3e-4", "switch to SGD",
                     "remove the warmup", "RuntimeError: shape mismatch", "iteration 3"):
        assert expected in user
    assert p.artifacts["prompt.md"].count("zebra-42") == 1


def test_journal_stays_bounded_over_a_long_night(openai_server, task):
    history = [Attempt(i, f"idea number {i % 37} with some explanation of why it helps",
                       "keep" if i % 25 == 0 else ("crash" if i % 7 == 0 else "discard"),
                       3.0 - i / 1000, 0.001, log_tail="x" * 3000 if i % 7 == 0 else "")
               for i in range(1, 501)]
    journal = render_journal(history, 6000)
    assert len(journal) <= 6000
    assert "#500" in journal and "500 attempts so far" in journal
    assert re.search(r"^x1[34] \(1[12] discard, [12] crash; last #\d+\): idea number", journal,
                     re.M)                                       # repeats deduplicated
    openai_server.script(GOOD)
    proposer(openai_server, journal_chars=6000).propose(context(task, history, 501))
    user = openai_server.requests[0]["messages"][1]["content"]
    assert len(user) < 6000 + len(TRAIN) + len(PROGRAM) + 1500


# -- a 200 that is no completion is an outage, never the code's bad_edit --------------------

BROKEN_200 = {"garbage-json": Reply(raw="<html>proxy error</html>"), "empty-body": Reply(raw=""),
              "choices-empty": Reply(choices=[]), "content-null": Reply(null_content=True),
              "not-an-object": Reply(raw="[]")}


@pytest.mark.parametrize("broken", BROKEN_200.values(), ids=BROKEN_200.keys())
def test_a_broken_200_is_retried_like_a_5xx(openai_server, task, broken):
    openai_server.script(broken, GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.error is None and proposal.files == {"train.py": EXPECTED}
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize("broken", BROKEN_200.values(), ids=BROKEN_200.keys())
def test_broken_200s_past_retries_and_patience_stop_the_loop_not_a_bad_edit(
        openai_server, task, broken):
    openai_server.script(*[broken] * 3)
    with pytest.raises(ProposerFatal, match=r"unavailable for 0s.*no completion after 2 retries"):
        proposer(openai_server, max_retries=2, patience_s=0).propose(context(task))
    assert len(openai_server.requests) == 3
