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
`openai` is imported lazily so importing this module stays cheap."""
from __future__ import annotations

import logging
import json
import os
import threading
import time
import warnings
from dataclasses import dataclass, field

from loop.setup.config import ProposerConfig
from loop.edits.edits import (NOTHING_CHANGED, describe_failures, settle_named, split_thinking,
                              try_edits)
from loop.edits.formats import AUTO_FALLBACK, AUTO_FIRST, FORMATS, read_reply
from loop.edits.describe import clean_description
from loop.proposers import prompts
from loop.proposers.tried import key_of_files, repeated
from loop.edits.hunks import hunks
from loop.proposers.base import Context, Proposal, ProposerFatal, Usage
from loop.proposers.change import Change
from loop.proposers.http_errors import (error_code, jitter, log_retry, retry_after,
                                        server_message, status)
from loop.proposers.window import Window, estimate_tokens
from loop.proposers.stream import (REASONING_FIELDS, Cancelled, OverCap, Stalled, Streamed,
                                   Waits, stream_completion)

log = logging.getLogger(__name__)

LOCAL_DUMMY_KEY = "sk-local"       # local servers ignore the key, but the client wants one
MAX_RETRY_AFTER_S = 120.0          # a server asking for longer is not worth waiting for
TRANSIENT_STATUS = {408, 409, 429}
SLOW_ATTEMPTS = 2                  # a server too slow for the timeouts: tries before stopping
CONNECT_TIMEOUT_S = 30.0           # a server that does not even accept the connection
CHARS_PER_TOKEN = 4                # to count thinking when the server does not report it
PLAIN_NOTE = ("note: the endpoint answers stream requests with one plain completion; "
              "reading it as such")
_tracing_enabled = False


@dataclass
class _Call(Waits):
    """One proposal's waits, and its requests as recorded (proposals may run at once, on one
    proposer: nothing of one proposal is kept on the proposer)."""
    requests: list[dict] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


class _Unavailable(Exception):
    """The endpoint stayed unreachable or overloaded through every retry."""


class _Garbled(Exception):
    """A 200 that is no chat completion (a body that is not JSON, an empty one, no choice, a
    message without content): a proxy's or server's fault, retried and waited out like a
    5xx, never the code's bad_edit."""


class _SchemaRefused(Exception):
    """`edit_format: auto` sent a JSON schema (response_format) and the server answered 400:
    it does not take one, so this proposer asks in search_replace from now on."""


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
        self.refused_params: set[str] = set()  # parameters this endpoint rejected
        self.said_plain = False                # PLAIN_NOTE printed (once a proposer)
        self.cancelled = threading.Event()     # set once: the loop stops (see cancel)
        self.window = Window(self.base_url, config.model, key, config.max_tokens)
        # the edit format (loop/edits/formats.py); `auto` is json until the server refuses
        # a schema with a 400, then search_replace for the rest of the night
        self.format = FORMATS.get(config.edit_format, AUTO_FIRST)
        if config.tracing:
            _enable_tracing()

    # -- one iteration -------------------------------------------------------------------------
    def propose(self, context: Context) -> Proposal:
        try:
            return self._converse(context)
        except _SchemaRefused as exc:
            log.warning("LLM endpoint refused a JSON schema (%s); edit_format auto asks for "
                        "SEARCH/REPLACE blocks from now on", exc)
            self.format = AUTO_FALLBACK
            return self._converse(context)

    def _converse(self, context: Context) -> Proposal:
        c, fmt = self.config, self.format
        schema = fmt.response_format(context.files)
        messages, left_out = self._fitted(context, fmt)
        waits = _Call(c.timeout_s, c.stall_s, time.monotonic() + c.proposal_timeout_s,
                      self.cancelled, left_out=left_out)
        usage, replies, thoughts = Usage(), [], []
        working = dict(context.files)   # blocks that applied, kept across repair turns
        done: list = []                 # those blocks, to make the change again (a replay)
        description, error, cut_off_before = None, None, False
        said: str | None = None         # the latest description the model gave
        for turn in range(self.config.repair_turns + 1):
            if turn and self.window.over(messages):   # never truncated by the server unseen
                error = (f"{error}; no repair turn: the conversation would outgrow the "
                         f"server's context window ({self.window.tokens} tokens)")
                break
            try:
                text, finish, reasoning = self._complete_patiently(messages, usage,
                                                                   context.seed, waits, schema)
            except (_Unavailable, OverCap) as exc:
                error = (f"no complete reply within proposer.proposal_timeout_s="
                         f"{c.proposal_timeout_s:g}s: {exc}" if isinstance(exc, OverCap)
                         else str(exc))
                break
            thinking, text = split_thinking(text)
            thinking = "\n\n".join(t for t in (reasoning.strip(), thinking) if t)
            thoughts.append(thinking)
            replies.append(text)
            messages.append({"role": "assistant", "content": text})  # thinking is not resent
            if finish == "length":
                still_thinking = bool(thinking) and not text.strip()
                error = (f"the reply was cut off at max_tokens={self.config.max_tokens}"
                         + (" while the model was still thinking (no answer yet): raise "
                            "proposer.max_tokens" if still_thinking else ""))
                if cut_off_before:
                    break
                cut_off_before = True
                feedback = prompts.THINKING_REPAIR if still_thinking else \
                    prompts.LENGTH_REPAIR.format(shorter=fmt.shorter)
            else:
                sent = [m["content"] for m in messages[:-1] if m["role"] != "assistant"]
                parsed = read_reply(fmt, text, sent, working, context.files)
                description = description or parsed.description
                said = parsed.description or said     # the record's, if nothing applies
                edits = settle_named(working, parsed.edits)
                resent_ok = working != context.files  # earlier blocks applied: resends are fine
                outcome = try_edits(working, edits, context.task, resent_ok)
                working.update(outcome.changed)
                done += outcome.done
                failures = parsed.problems + outcome.failures
                if not edits and not failures:
                    failures = [fmt.no_edits]
                changed = {p: t for p, t in working.items() if context.files.get(p) != t}
                earlier = [a for a in context.history if a.iteration != context.iteration]
                same = repeated(key_of_files(context.files, changed), parsed.description,
                                earlier) if not failures and changed else None
                if same is not None:     # refused before it costs a run: ask for another idea
                    error = prompts.REPEAT.format(n=same.iteration, what=same.description,
                                                  status=same.status)
                    working, done, description = dict(context.files), [], None
                    feedback = error
                elif not failures and changed:
                    proposal = self._proposal(description, changed, None, usage, messages,
                                              replies, thoughts, waits.requests)
                    proposal.change = _change(done, context.files, changed)
                    return proposal
                else:
                    error = describe_failures(failures or [NOTHING_CHANGED],
                                              len(edits) + len(parsed.problems))
                    partial = (prompts.PARTIAL_APPLIED.format(n=outcome.applied)
                               if outcome.applied and failures else prompts.NONE_APPLIED)
                    feedback = prompts.EDIT_REPAIR.format(error=error, partial=partial,
                                                          fix=fmt.fix)
            if turn < self.config.repair_turns:
                messages.append({"role": "user", "content": feedback})
        return self._proposal(description or said, {}, _one_line_error(error, len(replies)),
                              usage, messages, replies, thoughts, waits.requests)

    def _proposal(self, description, files, error, usage, messages, replies,
                  thoughts, requests: list[dict]) -> Proposal:
        artifacts = {}
        reasoning = "\n\n---\n\n".join(f"## reply {i + 1}\n\n{t or '(none)'}"
                                       for i, t in enumerate(thoughts)) if any(thoughts) else ""
        if self.config.log_prompts:
            artifacts["prompt.md"] = "\n\n".join(f"## {m['role']}\n\n{m['content']}"
                                                 for m in messages)
            artifacts["response.md"] = "\n\n---\n\n".join(
                f"## reply {i + 1}\n\n{r}" for i, r in enumerate(replies)) or "(no reply)"
            if reasoning:
                artifacts["reasoning.md"] = reasoning
        if requests:
            artifacts["requests.json"] = json.dumps(requests, indent=1)
        description = clean_description(description) if description else ""
        return Proposal(description=description or "LLM proposal (no description given)",
                        files=files, error=error, usage=usage, artifacts=artifacts,
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
        from loop.proposers.endpoint import check
        said = check(self.client, self.config.model, self.base_url)
        return said + self.window.said()

    def cancel(self) -> None:
        """The loop stops (Ctrl-C, SIGTERM): end the request in flight now (its connection
        is shut, which also tells the server to stop), and start no other."""
        self.cancelled.set()

    def _complete_patiently(self, messages, usage: Usage, seed: int, waits: _Call,
                            schema=None):
        """An outage is not the code's bad_edit: wait up to patience_s, then stop the loop.
        The outage's clock starts at the first request that found no server, so the time
        a slow server spent answering never counts as downtime."""
        from loop.proposers.endpoint import wait_until_back
        since = None
        while True:
            try:
                return self._complete(messages, usage, seed, waits, schema)
            except _Unavailable as exc:
                since = time.monotonic() if since is None else since
                wait_until_back(self.client, self.base_url, self.config.patience_s, since,
                                str(exc), self.backoff_scale, cancelled=self.cancelled)

    # -- one request, with retries ------------------------------------------------------------
    def _complete(self, messages, usage: Usage, seed: int,
                  waits: _Call, schema=None) -> tuple[str, str | None, str]:
        """(content, finish_reason, reasoning field) of one request, usage added."""
        import openai
        import tenacity

        attempts = iter(range(10**6))
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_transient),
            stop=self._stop_retrying(waits), sleep=self._sleep,
            wait=self._wait, before_sleep=log_retry, reraise=True)
        while True:
            try:
                streamed = retrying(lambda: self._create(messages, seed, next(attempts), waits,
                                                         schema))
                break
            except openai.BadRequestError as exc:
                if not self._drop_refused_param(exc):   # e.g. 'temperature' on o-series
                    if schema is not None and self.config.edit_format == "auto":
                        raise _SchemaRefused(server_message(exc)) from None
                    raise ProposerFatal(self._refusal(exc) + (
                        "; this endpoint may not take a JSON schema (response_format): set "
                        "proposer.edit_format: search_replace" if schema is not None else "")
                    ) from None
            except openai.APIStatusError as exc:
                if _is_transient(exc):
                    raise _Unavailable(f"LLM endpoint still failing after "
                                       f"{self.config.max_retries} retries: "
                                       f"{status(exc)}: {server_message(exc)}") from None
                raise ProposerFatal(self._refusal(exc)) from None
            except openai.APITimeoutError as exc:   # no headers within the first-token wait
                if not _slow(exc):
                    raise _Unavailable(f"LLM endpoint does not accept connections "
                                       f"({self.base_url or 'api.openai.com'})") from None
                raise ProposerFatal(self._too_slow(waits, "did not begin to answer")) from None
            except Stalled as exc:
                raise ProposerFatal(self._too_slow(waits, str(exc), exc.first)) from None
            except openai.APIConnectionError as exc:
                raise _Unavailable(f"LLM endpoint unreachable after {self.config.max_retries}"
                                   f" retries ({self.base_url or 'api.openai.com'}): "
                                   f"{exc}") from None
            except _Garbled as exc:
                raise _Unavailable(f"LLM endpoint still answering no completion after "
                                   f"{self.config.max_retries} retries: {exc}") from None
        record = _request_record(streamed, messages, self.window.tokens, waits.left_out)
        waits.requests.append(record)
        usage.add(self._usage(streamed.usage, streamed.reasoning
                              + split_thinking(streamed.content)[0], record["cached_tokens"]))
        return streamed.content, streamed.finish, streamed.reasoning

    def _create(self, messages, seed: int, attempt: int, waits: _Call,
                schema=None) -> Streamed:
        """One streamed request. A retry sends another seed: a deterministic server given
        the same prompt and seed answers the same way in the same time, so an identical
        retry would only repeat what failed (seed + attempt keeps a night reproducible)."""
        params = {"model": self.config.model, "messages": messages,
                  "temperature": self.config.temperature, "seed": seed + attempt,
                  "max_tokens": self.config.max_tokens,
                  "stream_options": {"include_usage": True}}
        if schema is not None:          # the json edit format: the server enforces its shape
            params["response_format"] = schema
        if "max_tokens" in self.refused_params:
            params["max_completion_tokens"] = params["max_tokens"]
        for name in self.refused_params:
            params.pop(name, None)
        try:
            streamed = stream_completion(self.client, params, waits)
        except ValueError as exc:          # json.JSONDecodeError: garbage in a chunk
            raise _Garbled(f"a 200 whose stream is not JSON ({exc})") from None
        _check_streamed(streamed)
        if streamed.plain and not self.said_plain:
            self.said_plain = True
            log.warning(PLAIN_NOTE)
        return streamed

    def _stop_retrying(self, waits: _Call):
        attempts = self.config.max_retries + 1

        def stop(state) -> bool:
            exc = state.outcome.exception()
            if _slow(exc) and state.attempt_number >= SLOW_ATTEMPTS:
                return True   # each costs minutes: a server that slow needs other settings
            return (state.attempt_number >= attempts or waits.left() <= 0
                    or self.cancelled.is_set())
        return stop

    def _sleep(self, seconds: float) -> None:
        """Back off, but end at once when the loop stops."""
        if self.cancelled.wait(seconds):
            raise Cancelled("the loop is stopping")

    def _too_slow(self, waits: Waits, what: str, first: bool = True) -> str:
        knob = ("proposer.timeout_s / --llm-timeout" if first else "proposer.stall_s")
        return (f"the LLM endpoint {self.base_url or 'api.openai.com'} is there but too slow "
                f"for these settings: {what} (first token within {waits.first_token_s:g}s, "
                f"then at most {waits.stall_s:g}s between tokens); raise {knob}, "
                f"or use a smaller model")

    def _drop_refused_param(self, exc) -> bool:
        """Endpoints differ in what they accept; drop an optional parameter the endpoint
        says it does not support (max_tokens becomes max_completion_tokens), once each."""
        text = f"{getattr(exc, 'param', '') or ''} {server_message(exc)}".lower()
        if "unsupported" not in text and "not supported" not in text:
            return False
        for name in ("max_tokens", "temperature", "seed", "stream_options"):
            if name not in self.refused_params and (f"'{name}'" in text or
                                                    getattr(exc, "param", None) == name):
                self.refused_params.add(name)
                log.warning("LLM endpoint does not support %r; sending without it", name)
                return True
        return False

    def _wait(self, state) -> float:
        after = retry_after(state.outcome.exception())
        if after is not None:
            return min(after, MAX_RETRY_AFTER_S)
        # exponential backoff with jitter: 1, 2, 4 ... s (+ up to 1 s), capped at 60 s
        base = min(60.0, 2.0 ** (state.attempt_number - 1))
        return self.backoff_scale * (base + jitter())

    def _usage(self, u, thinking: str = "", cached: int | None = None) -> Usage:
        """Tokens and cost from a stream's usage; reasoning tokens as the server reports
        them, else estimated from the thinking text (vLLM, Ollama and llama.cpp report none)."""
        estimate = len(thinking) // CHARS_PER_TOKEN
        if u is None:
            return Usage(reasoning_tokens=estimate, requests=1)
        prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
        cached = cached or 0         # OpenAI's prompt_tokens_details, llama.cpp's cache_n
        reasoning = getattr(getattr(u, "completion_tokens_details", None),
                            "reasoning_tokens", 0) or estimate
        c = self.config
        cached_price = (c.price_cached_input_per_m if c.price_cached_input_per_m is not None
                        else c.price_input_per_m)
        cost = ((prompt - cached) * c.price_input_per_m + cached * cached_price
                + completion * c.price_output_per_m) / 1e6  # reasoning is within completion
        return Usage(prompt, completion, cached, reasoning, 1, cost)

    def _refusal(self, exc) -> str:
        said, detail = status(exc), server_message(exc)
        where = self.base_url or "api.openai.com"
        if exc.status_code == 401:
            return (f"LLM endpoint refused the request ({said}): check "
                    f"${self.config.api_key_env} ({where})")
        if exc.status_code == 403:
            return f"LLM endpoint denied access ({said}) to model '{self.config.model}': {detail}"
        if exc.status_code == 404:
            return (f"LLM endpoint found no such model or route ({said}): check the model "
                    f"'{self.config.model}' and base_url {where}")
        if exc.status_code == 429:
            return f"LLM account is out of quota ({said}): {detail}"
        return f"LLM endpoint rejected the request ({said}): {detail}"


# -- helpers -------------------------------------------------------------------------------------

def _change(done: list, before: dict[str, str], after: dict[str, str]) -> Change:
    """The reply's blocks that applied, in order; a file that a whole-file block rewrote is
    made again by the hunks of its diff instead (the whole text would undo what was kept
    meanwhile)."""
    whole = {e.path for e in done if e.kind == "whole"}
    kept = [e for e in done if e.path not in whole]
    derived = hunks({p: before[p] for p in whole if p in before},
                    {p: after[p] for p in whole if p in after})
    return Change(edits=tuple(kept + derived))



def _check_streamed(streamed: Streamed) -> None:
    """_Garbled unless the stream said something (content, even "", thinking, a refusal or
    tool calls): a proxy's garbage, an empty body, `choices: []` or null content."""
    if streamed.chunks == 0:
        raise _Garbled("a 200 without a stream of chunks")
    if not streamed.said:
        raise _Garbled("a 200 whose stream has no message content")


def _request_record(streamed: Streamed, messages: list[dict], window: int | None,
                    left_out: list[str]) -> dict:
    """One request as recorded (requests.json): its size against the window, its speed,
    and how much of its prompt the server had cached."""
    chars = sum(len(m["content"]) for m in messages)
    u = streamed.usage
    details = getattr(u, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    timings = streamed.extra.get("timings")
    if cached is None and isinstance(timings, dict):       # llama.cpp
        cached = timings.get("cache_n")
    return {"prompt_chars": chars, "prompt_tokens_estimate": estimate_tokens(chars),
            "context_window": window, "prompt_tokens": getattr(u, "prompt_tokens", None),
            "cached_tokens": cached,
            "completion_tokens": getattr(u, "completion_tokens", None),
            "first_token_s": None if streamed.first_token_s is None
            else round(streamed.first_token_s, 2),
            "seconds": round(streamed.seconds, 2), "finish": streamed.finish,
            "left_out": left_out}


def _check_completion(response) -> None:
    """_Garbled unless `response` has a first choice with a message that says something
    (content, or, with content null, thinking, a refusal or tool calls)."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _Garbled("a 200 without choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise _Garbled("a 200 whose choice has no message")
    if isinstance(getattr(message, "content", None), str):
        return                             # even "": the model's answer, judged as such
    extra = getattr(message, "model_extra", None) or {}
    said = [getattr(message, "refusal", None), getattr(message, "tool_calls", None),
            *(extra.get(k) for k in REASONING_FIELDS)]
    if not any(isinstance(x, str) and x or isinstance(x, list) and x for x in said):
        raise _Garbled("a 200 whose message content is null")


def _is_transient(exc: BaseException) -> bool:
    import openai
    if isinstance(exc, (_Garbled, Stalled)):
        return True
    if isinstance(exc, openai.APIConnectionError):       # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and error_code(exc) == "insufficient_quota":
            return False                                  # billing, not load: retrying is futile
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


def _slow(exc: BaseException | None) -> bool:
    """A server that is there but sent no token in time (not one that is away: a
    connection that was never accepted is an outage)."""
    import openai
    if isinstance(exc, Stalled):
        return True
    return (isinstance(exc, openai.APITimeoutError)
            and type(exc.__cause__).__name__ != "ConnectTimeout")












def _one_line_error(error: str | None, replies: int) -> str:
    if error is None:
        return "no reply from the LLM"
    first = " ".join(l.strip(" -") for l in error.splitlines()[:3] if l.strip())
    prefix = f"no applicable edit after {replies} replies: " if replies > 1 else ""
    return (prefix + first)[:400]




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
