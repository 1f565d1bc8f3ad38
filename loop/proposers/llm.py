"""The LLM proposer: one chat conversation per iteration through the official `openai`
client (any OpenAI-compatible endpoint), then parse + apply the reply's edits.

Failure policy, so a night of experiments survives a flaky endpoint:
  * transient (connection, timeout, 408/409/429, 5xx, and a 200 that is no completion:
    garbage or empty body, `choices: []`, `content: null`): retried with exponential backoff and
    jitter, honouring retry-after; when retries run out, the endpoint is waited for up to
    `patience_s` (loop/proposers/endpoint.py), then ProposerFatal stops the loop (exit 1):
    an outage is never counted as the code's bad_edit;
  * the endpoint refusing us (400/401/403/404/422, out of quota): ProposerFatal, the loop
    stops with one line saying what to fix;
  * an edit that does not parse or apply, or a reply cut off at max_tokens: the error goes
    back to the model in the same conversation (repair turns), then Proposal(error=...).
Reasoning models' thinking (a `reasoning`/`reasoning_content` field, or <think> tags in the
content) is split off before parsing, never sent back, kept as reasoning.md and counted.
The parts: the conversation and its repair turns (loop/proposers/conversation.py), one
request with its retries (loop/proposers/transport.py), what a completion is and how a
request fails (loop/proposers/completion.py), what it cost (loop/proposers/cost.py).
`openai` is imported lazily so importing this module stays cheap."""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import warnings

from loop.edits.describe import clean_description
from loop.edits.formats import AUTO_FALLBACK, AUTO_FIRST, FORMATS
from loop.proposers import prompts
from loop.proposers.base import Context, Proposal, ProposerFatal
from loop.proposers.completion import SchemaRefused, Unavailable
from loop.proposers.conversation import Conversation
from loop.proposers.endpoint import check
from loop.proposers.stream import OverCap
from loop.proposers.transport import Call, Transport
from loop.proposers.window import Window
from loop.setup.config import ProposerConfig

log = logging.getLogger(__name__)

LOCAL_DUMMY_KEY = "sk-local"       # local servers ignore the key, but the client wants one
CONNECT_TIMEOUT_S = 30.0           # a server that does not even accept the connection
_tracing_enabled = False


def make(config, seed: int = 0) -> LLMProposer:
    """The `llm` kind of loop/proposers/registry.py."""
    return LLMProposer(config)


class LLMProposer:
    def __init__(self, config: ProposerConfig, *, backoff_scale: float = 1.0):
        """`backoff_scale` multiplies every backoff wait (tests use 0)."""
        import openai  # lazy: the SDK is heavy and only this proposer needs it

        self.config = config
        self.backoff_scale = backoff_scale
        self.base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(config.api_key_env) or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url:
            key = LOCAL_DUMMY_KEY
        if not key:
            raise ProposerFatal(f"no API key: set ${config.api_key_env} (or point "
                                f"proposer.base_url / $OPENAI_BASE_URL at a local server)")
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=key, max_retries=0,
            timeout=openai.Timeout(config.timeout_s, connect=CONNECT_TIMEOUT_S))
        self.cancelled = threading.Event()     # set once: the loop stops (see cancel)
        self.window = Window(self.base_url, config.model, key, config.max_tokens)
        self.transport = Transport(config, self.client, self.base_url, self.window,
                                   self.cancelled, backoff_scale)
        # the edit format (loop/edits/formats.py); `auto` is json until the server refuses
        # a schema with a 400, then search_replace for the rest of the night
        self.format = AUTO_FIRST if config.edit_format == "auto" else \
            FORMATS.get(config.edit_format)
        if config.tracing:
            _enable_tracing()

    # -- one iteration -------------------------------------------------------------------------
    def propose(self, context: Context) -> Proposal:
        try:
            return self._converse(context)
        except SchemaRefused as exc:
            log.warning("LLM endpoint refused a JSON schema (%s); edit_format auto asks for "
                        "SEARCH/REPLACE blocks from now on", exc)
            self.format = AUTO_FALLBACK
            return self._converse(context)

    def _converse(self, context: Context) -> Proposal:
        c, fmt = self.config, self.format
        schema = fmt.response_format(context.files)
        messages, left_out = self._fitted(context, fmt)
        talk = Conversation(context, fmt, messages,
                            Call(c.timeout_s, c.stall_s, time.monotonic() + c.proposal_timeout_s,
                                 self.cancelled, left_out=left_out))
        for turn in range(c.repair_turns + 1):
            if turn and self.window.over(talk.messages):  # never truncated by the server unseen
                talk.error = (f"{talk.error}; no repair turn: the conversation would outgrow "
                              f"the server's context window ({self.window.tokens} tokens)")
                break
            try:
                text, finish, reasoning = self.transport.complete_patiently(
                    talk.messages, talk.usage, context.seed, talk.waits, schema)
            except (Unavailable, OverCap) as exc:
                talk.error = (f"no complete reply within proposer.proposal_timeout_s="
                              f"{c.proposal_timeout_s:g}s: {exc}" if isinstance(exc, OverCap)
                              else str(exc))
                break
            thinking, text = talk.heard(text, reasoning)
            if finish == "length":
                feedback = talk.cut_off(thinking, text, c.max_tokens)
                if feedback is None:
                    break
            else:
                changed, feedback = talk.read(text)
                if changed:
                    proposal = self._proposal(talk, talk.description, changed, None)
                    proposal.change = talk.change(changed)
                    return proposal
            if turn < c.repair_turns:
                talk.messages.append({"role": "user", "content": feedback})
        return self._proposal(talk, talk.description or talk.said, {}, talk.failure())

    def _proposal(self, talk: Conversation, description: str | None, files: dict[str, str],
                  error: str | None) -> Proposal:
        artifacts = {}
        thoughts, replies = talk.thoughts, talk.replies
        reasoning = "\n\n---\n\n".join(f"## reply {i + 1}\n\n{t or '(none)'}"
                                       for i, t in enumerate(thoughts)) if any(thoughts) else ""
        if self.config.log_prompts:
            artifacts["prompt.md"] = "\n\n".join(f"## {m['role']}\n\n{m['content']}"
                                                 for m in talk.messages)
            artifacts["response.md"] = "\n\n---\n\n".join(
                f"## reply {i + 1}\n\n{r}" for i, r in enumerate(replies)) or "(no reply)"
            if reasoning:
                artifacts["reasoning.md"] = reasoning
        if talk.noted:      # blocks that changed nothing, passed over beside real ones
            artifacts["edit_notes.md"] = "\n".join(f"- {n}" for n in talk.noted) + "\n"
        if talk.waits.requests:
            artifacts["requests.json"] = json.dumps(talk.waits.requests, indent=1)
        description = clean_description(description) if description else ""
        return Proposal(description=description or "LLM proposal (no description given)",
                        files=files, error=error, usage=talk.usage, artifacts=artifacts,
                        reasoning=reasoning)

    # -- the prompt, fitted to the server's context window -------------------------------------
    def _fitted(self, context: Context, fmt) -> tuple[list[dict], list[str]]:
        """The first messages, shortened to fit the window, and what they left out."""
        render = lambda ctx, chars: [prompts.system_prompt(ctx, fmt),   # noqa: E731
                                     prompts.user_prompt(ctx, chars)]
        texts, left_out = self.window.fit(render, context, self.config.journal_chars)
        return ([{"role": "system", "content": texts[0]},
                 {"role": "user", "content": texts[1]}], left_out)

    # -- the endpoint: checked before the night, waited for during it --------------------------
    def check_endpoint(self) -> str:
        said = check(self.client, self.config.model, self.base_url)
        return said + self.window.said()

    def cancel(self) -> None:
        """The loop stops (Ctrl-C, SIGTERM): end the request in flight now (its connection
        is shut, which also tells the server to stop), and start no other."""
        self.cancelled.set()


def _enable_tracing() -> None:
    """MLflow's OpenAI autolog: every request becomes a trace. Optional, once a process."""
    global _tracing_enabled
    if _tracing_enabled:
        return
    try:
        import mlflow.openai
        mlflow.openai.autolog()
        _tracing_enabled = True
    except Exception as exc:  # tracing is a nicety; the loop must not die for it
        warnings.warn(f"MLflow OpenAI tracing is off: {exc}", stacklevel=2)
