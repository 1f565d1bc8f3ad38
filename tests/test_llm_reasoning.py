"""Reasoning models through the real `openai` client, against a server answering in the
JSON of vLLM, Ollama, llama.cpp or the DeepSeek API: the thinking is split off before
parsing (a draft edit in it is never applied), never sent back, kept and counted."""
from __future__ import annotations

import pytest
from llm_task import no_openai_env  # noqa: F401
from openai_server import Reply
from llm_task import EXPECTED, GOOD, TRAIN, context, proposer, tiny_task

# a draft inside the thinking that would apply, and would be wrong
DRAFT = ("Let me try lowering STEPS first.\n\ntrain.py\n```python\n<<<<<<< SEARCH\n"
         "STEPS = 100\n=======\nSTEPS = 1\n>>>>>>> REPLACE\n```\nNo, LR matters more.")


@pytest.fixture
def task(tmp_path):
    return tiny_task(tmp_path, TRAIN)


@pytest.mark.parametrize("shape, content", [
    ("vllm", f"<think>\n{DRAFT}\n</think>\n\n{GOOD}"),      # no reasoning parser: tags
    ("ollama", f"<think>\n{DRAFT}\n</think>\n\n{GOOD}"),
    ("llamacpp", f"<think>\n{DRAFT}\n</think>\n\n{GOOD}"),  # --reasoning-format none
    ("vllm", f"{DRAFT}\n</think>\n\n{GOOD}"),               # Qwen3/R1 template opened the tag
], ids=["vllm-tags", "ollama-tags", "llamacpp-tags", "close-tag-only"])
def test_thinking_in_the_content_is_never_applied(openai_server, task, shape, content):
    openai_server.script(Reply(content, shape=shape))
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.error is None
    assert proposal.files == {"train.py": EXPECTED}             # not STEPS = 1
    assert "STEPS = 1\n" in proposal.artifacts["reasoning.md"]
    assert "<think>" not in proposal.artifacts["response.md"]
    assert proposal.description == "raise LR to 1e-3 to converge faster"
    # these servers report no reasoning tokens: counted from the thinking's length
    assert proposal.usage.reasoning_tokens == len(DRAFT) // 4


@pytest.mark.parametrize("shape", ["vllm", "deepseek", "ollama", "llamacpp"])
def test_thinking_in_a_separate_field_is_kept_not_parsed(openai_server, task, shape):
    # the field holds the draft; some servers also leave stray tags in it
    openai_server.script(Reply(GOOD, shape=shape, reasoning=DRAFT, reasoning_tokens=321))
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert DRAFT in proposal.reasoning and DRAFT in proposal.artifacts["reasoning.md"]
    expected = 321 if shape == "deepseek" else len(DRAFT) // 4
    assert proposal.usage.reasoning_tokens == expected


def test_thinking_is_not_sent_back_on_a_repair_turn(openai_server, task):
    bad = GOOD.replace("LR = 3e-4\n=", "LR = 0.0003\n=")
    openai_server.script(Reply(f"<think>{DRAFT}</think>{bad}", shape="ollama"), GOOD)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    sent = openai_server.requests[1]["messages"]
    assert sent[2]["role"] == "assistant" and "STEPS = 1" not in sent[2]["content"]
    assert proposal.artifacts["reasoning.md"].count("No, LR matters more.") == 1


def test_reply_cut_off_while_thinking_asks_for_shorter_thinking(openai_server, task):
    cut = Reply(f"<think>\n{DRAFT}\nAlternatively", shape="vllm", finish_reason="length")
    openai_server.script(cut, Reply(f"<think>short</think>{GOOD}", shape="vllm"))
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {"train.py": EXPECTED}
    assert "still thinking" in openai_server.user_messages(1)[-1]


def test_cut_off_while_thinking_twice_says_to_raise_max_tokens(openai_server, task):
    cut = Reply(f"<think>\n{DRAFT}\nAlternatively", shape="llamacpp", finish_reason="length")
    openai_server.script(cut, cut)
    proposal = proposer(openai_server, max_tokens=512).propose(context(task))
    assert proposal.files == {}
    assert "max_tokens=512 while the model was still thinking" in proposal.error
    assert "raise proposer.max_tokens" in proposal.error


def test_unclosed_thinking_with_a_stop_reason_is_no_edit(openai_server, task):
    openai_server.script(*[Reply(f"<think>\n{DRAFT}", shape="ollama")] * 3)
    proposal = proposer(openai_server).propose(context(task))
    assert proposal.files == {} and "no edit found" in proposal.error
