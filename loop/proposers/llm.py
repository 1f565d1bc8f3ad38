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

import email.utils
import logging
import os
import time
import warnings

from loop.setup.config import ProposerConfig
from loop.edits.edits import (NOTHING_CHANGED, describe_failures, settle_named, split_thinking,
                              try_edits)
from loop.edits.formats import AUTO_FALLBACK, AUTO_FIRST, FORMATS, read_reply
from loop.edits.parse import clean_description
from loop.proposers import prompts
from loop.proposers.tried import key_of_files, repeated
from loop.edits.hunks import hunks
from loop.proposers.base import Context, Proposal, ProposerFatal, Usage
from loop.proposers.change import Change

log = logging.getLogger(__name__)

LOCAL_DUMMY_KEY = "sk-local"       # local servers ignore the key, but the client wants one
MAX_RETRY_AFTER_S = 120.0          # a server asking for longer is not worth waiting for
TRANSIENT_STATUS = {408, 409, 429}
REASONING_FIELDS = ("reasoning", "reasoning_content")  # vLLM >= 0.11 / DeepSeek, llama.cpp
CHARS_PER_TOKEN = 4                # to count thinking when the server does not report it
_tracing_enabled = False


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
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key,
                                    timeout=config.timeout_s, max_retries=0)
        self.refused_params: set[str] = set()  # parameters this endpoint rejected
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
        fmt = self.format
        schema = fmt.response_format(context.files)
        messages = [{"role": "system", "content": prompts.system_prompt(context, fmt)},
                    {"role": "user", "content": prompts.user_prompt(
                        context, self.config.journal_chars)}]
        usage, replies, thoughts = Usage(), [], []
        working = dict(context.files)   # blocks that applied, kept across repair turns
        done: list = []                 # those blocks, to make the change again (a replay)
        description, error, cut_off_before = None, None, False
        for turn in range(self.config.repair_turns + 1):
            try:
                text, finish, reasoning = self._complete_patiently(messages, usage, context.seed,
                                                                   schema)
            except _Unavailable as exc:
                error = str(exc)
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
                parsed = read_reply(fmt, text, sent, working)
                description = description or parsed.description
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
                                              replies, thoughts)
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
        return self._proposal(description, {}, _one_line_error(error, len(replies)), usage,
                              messages, replies, thoughts)

    def _proposal(self, description, files, error, usage, messages, replies,
                  thoughts) -> Proposal:
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
        description = clean_description(description) if description else ""
        return Proposal(description=description or "LLM proposal (no description given)",
                        files=files, error=error, usage=usage, artifacts=artifacts,
                        reasoning=reasoning)

    # -- the endpoint: checked before the night, waited for during it --------------------------
    def check_endpoint(self) -> str:
        from loop.proposers.endpoint import check
        return check(self.client, self.config.model, self.base_url)

    def _complete_patiently(self, messages, usage: Usage, seed: int, schema=None):
        """An outage is not the code's bad_edit: wait up to patience_s, then stop the loop."""
        from loop.proposers.endpoint import wait_until_back
        since = time.monotonic()
        while True:
            try:
                return self._complete(messages, usage, seed, schema)
            except _Unavailable as exc:
                wait_until_back(self.client, self.base_url, self.config.patience_s, since,
                                str(exc), self.backoff_scale)

    # -- one request, with retries ------------------------------------------------------------
    def _complete(self, messages, usage: Usage, seed: int,
                  schema=None) -> tuple[str, str | None, str]:
        """(content, finish_reason, reasoning field) of one request, usage added."""
        import openai
        import tenacity

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_transient),
            stop=tenacity.stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait, before_sleep=_log_retry, reraise=True)
        while True:
            try:
                response = retrying(self._create, messages, seed, schema)
                break
            except openai.BadRequestError as exc:
                if not self._drop_refused_param(exc):   # e.g. 'temperature' on o-series
                    if schema is not None and self.config.edit_format == "auto":
                        raise _SchemaRefused(_server_message(exc)) from None
                    raise ProposerFatal(self._refusal(exc) + (
                        "; this endpoint may not take a JSON schema (response_format): set "
                        "proposer.edit_format: search_replace" if schema is not None else "")
                    ) from None
            except openai.APIStatusError as exc:
                if _is_transient(exc):
                    raise _Unavailable(f"LLM endpoint still failing after "
                                       f"{self.config.max_retries} retries: "
                                       f"{_status(exc)}: {_server_message(exc)}") from None
                raise ProposerFatal(self._refusal(exc)) from None
            except openai.APIConnectionError as exc:
                raise _Unavailable(f"LLM endpoint unreachable after {self.config.max_retries}"
                                   f" retries ({self.base_url or 'api.openai.com'}): "
                                   f"{exc}") from None
            except _Garbled as exc:
                raise _Unavailable(f"LLM endpoint still answering no completion after "
                                   f"{self.config.max_retries} retries: {exc}") from None
        choice = response.choices[0]
        content = choice.message.content or ""
        extra = choice.message.model_extra or {}
        reasoning = next((extra[k] for k in REASONING_FIELDS
                          if isinstance(extra.get(k), str) and extra[k].strip()), "")
        usage.add(self._usage(response, reasoning + split_thinking(content)[0]))
        return content, choice.finish_reason, reasoning

    def _create(self, messages, seed: int, schema=None):
        params = {"model": self.config.model, "messages": messages,
                  "temperature": self.config.temperature, "seed": seed,
                  "max_tokens": self.config.max_tokens}
        if schema is not None:          # the json edit format: the server enforces its shape
            params["response_format"] = schema
        if "max_tokens" in self.refused_params:
            params["max_completion_tokens"] = params["max_tokens"]
        for name in self.refused_params:
            params.pop(name, None)
        try:
            response = self.client.chat.completions.create(**params)
        except ValueError as exc:          # json.JSONDecodeError: garbage or an empty body
            raise _Garbled(f"a 200 whose body is not JSON ({exc})") from None
        _check_completion(response)
        return response

    def _drop_refused_param(self, exc) -> bool:
        """Endpoints differ in what they accept; drop an optional parameter the endpoint
        says it does not support (max_tokens becomes max_completion_tokens), once each."""
        text = f"{getattr(exc, 'param', '') or ''} {_server_message(exc)}".lower()
        if "unsupported" not in text and "not supported" not in text:
            return False
        for name in ("max_tokens", "temperature", "seed"):
            if name not in self.refused_params and (f"'{name}'" in text or
                                                    getattr(exc, "param", None) == name):
                self.refused_params.add(name)
                log.warning("LLM endpoint does not support %r; sending without it", name)
                return True
        return False

    def _wait(self, state) -> float:
        after = _retry_after(state.outcome.exception())
        if after is not None:
            return min(after, MAX_RETRY_AFTER_S)
        # exponential backoff with jitter: 1, 2, 4 ... s (+ up to 1 s), capped at 60 s
        base = min(60.0, 2.0 ** (state.attempt_number - 1))
        return self.backoff_scale * (base + _jitter())

    def _usage(self, response, thinking: str = "") -> Usage:
        """Tokens and cost; reasoning tokens as the server reports them, else estimated
        from the thinking text (vLLM, Ollama and llama.cpp report none)."""
        u = getattr(response, "usage", None)
        estimate = len(thinking) // CHARS_PER_TOKEN
        if u is None:
            return Usage(reasoning_tokens=estimate, requests=1)
        prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
        cached = getattr(getattr(u, "prompt_tokens_details", None), "cached_tokens", 0) or 0
        reasoning = getattr(getattr(u, "completion_tokens_details", None),
                            "reasoning_tokens", 0) or estimate
        c = self.config
        cached_price = (c.price_cached_input_per_m if c.price_cached_input_per_m is not None
                        else c.price_input_per_m)
        cost = ((prompt - cached) * c.price_input_per_m + cached * cached_price
                + completion * c.price_output_per_m) / 1e6  # reasoning is within completion
        return Usage(prompt, completion, cached, reasoning, 1, cost)

    def _refusal(self, exc) -> str:
        status, detail = _status(exc), _server_message(exc)
        where = self.base_url or "api.openai.com"
        if exc.status_code == 401:
            return (f"LLM endpoint refused the request ({status}): check "
                    f"${self.config.api_key_env} ({where})")
        if exc.status_code == 403:
            return f"LLM endpoint denied access ({status}) to model '{self.config.model}': {detail}"
        if exc.status_code == 404:
            return (f"LLM endpoint found no such model or route ({status}): check the model "
                    f"'{self.config.model}' and base_url {where}")
        if exc.status_code == 429:
            return f"LLM account is out of quota ({status}): {detail}"
        return f"LLM endpoint rejected the request ({status}): {detail}"


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
    if isinstance(exc, _Garbled):
        return True
    if isinstance(exc, openai.APIConnectionError):       # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and _error_code(exc) == "insufficient_quota":
            return False                                  # billing, not load: retrying is futile
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


def _retry_after(exc) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after: seconds or date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _jitter() -> float:
    import random
    return random.random()


def _status(exc) -> str:
    from http import HTTPStatus
    try:
        return f"{exc.status_code} {HTTPStatus(exc.status_code).phrase}"
    except ValueError:
        return str(exc.status_code)


def _error_code(exc) -> str | None:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return inner.get("code") or inner.get("type")
    return getattr(exc, "code", None)


def _server_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return " ".join(str(message).split())[:300]
    return " ".join(str(getattr(exc, "message", exc)).split())[:300]


def _one_line_error(error: str | None, replies: int) -> str:
    if error is None:
        return "no reply from the LLM"
    first = " ".join(l.strip(" -") for l in error.splitlines()[:3] if l.strip())
    prefix = f"no applicable edit after {replies} replies: " if replies > 1 else ""
    return (prefix + first)[:400]


def _log_retry(state) -> None:
    exc = state.outcome.exception()
    what = _status(exc) if hasattr(exc, "status_code") else type(exc).__name__
    log.warning("LLM request failed (%s); retry %d in %.1f s", what, state.attempt_number,
                state.next_action.sleep if state.next_action else 0.0)


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
