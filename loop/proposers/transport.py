"""One request of the LLM proposer to its endpoint, retried and waited for.

A request is streamed (loop/proposers/stream.py) and checked to be a completion
(loop/proposers/completion.py). Transient failures (connection, timeout, 408/409/429, 5xx, a
200 that is no completion) are retried with exponential backoff and jitter, honouring
retry-after; when retries run out the endpoint is waited for up to `patience_s`
(loop/proposers/endpoint.py), then ProposerFatal. The endpoint refusing us
(400/401/403/404/422, out of quota) is ProposerFatal at once, in one line saying what to fix;
an optional parameter it does not support is dropped and the request sent again.
It knows nothing of edits or prompts: messages in, (content, finish, reasoning) out."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from loop.edits.thinking import split_thinking
from loop.proposers.base import ProposerFatal, Usage
from loop.proposers.completion import (Garbled, SchemaRefused, Unavailable, check_streamed,
                                       is_transient, slow)
from loop.proposers.cost import request_record, usage_of
from loop.proposers.endpoint import wait_until_back
from loop.proposers.http_errors import jitter, log_retry, retry_after, server_message, status
from loop.proposers.stream import Cancelled, Stalled, Streamed, Waits, stream_completion
from loop.proposers.window import Window

log = logging.getLogger("loop.proposers.llm")   # the proposer's log, as http_errors' is

MAX_RETRY_AFTER_S = 120.0          # a server asking for longer is not worth waiting for
SLOW_ATTEMPTS = 2                  # a server too slow for the timeouts: tries before stopping
PLAIN_NOTE = ("note: the endpoint answers stream requests with one plain completion; "
              "reading it as such")


@dataclass
class Call(Waits):
    """One proposal's waits, and its requests as recorded (proposals may run at once, on one
    proposer: nothing of one proposal is kept on the proposer)."""
    requests: list[dict] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


class Transport:
    """The requests of one LLMProposer: its client, what its endpoint refused, its stop."""

    def __init__(self, config, client, base_url: str | None, window: Window,
                 cancelled: threading.Event, backoff_scale: float = 1.0):
        self.config, self.client, self.base_url = config, client, base_url
        self.window, self.cancelled, self.backoff_scale = window, cancelled, backoff_scale
        self.refused_params: set[str] = set()  # parameters this endpoint rejected
        self.said_plain = False                # PLAIN_NOTE printed (once a proposer)

    def complete_patiently(self, messages, usage: Usage, seed: int, waits: Call,
                           schema=None) -> tuple[str, str | None, str]:
        """An outage is not the code's bad_edit: wait up to patience_s, then stop the loop.
        The outage's clock starts at the first request that found no server, so the time
        a slow server spent answering never counts as downtime."""
        since = None
        while True:
            try:
                return self._complete(messages, usage, seed, waits, schema)
            except Unavailable as exc:
                since = time.monotonic() if since is None else since
                wait_until_back(self.client, self.base_url, self.config.patience_s, since,
                                str(exc), self.backoff_scale, cancelled=self.cancelled)

    # -- one request, with retries ------------------------------------------------------------
    def _complete(self, messages, usage: Usage, seed: int,
                  waits: Call, schema=None) -> tuple[str, str | None, str]:
        """(content, finish_reason, reasoning field) of one request, usage added."""
        import openai
        import tenacity

        attempts = iter(range(10**6))
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=self._stop_retrying(waits), sleep=self._sleep,
            wait=self._wait, before_sleep=log_retry, reraise=True)
        while True:
            try:
                streamed = retrying(lambda: self._create(messages, seed, next(attempts), waits,
                                                         schema))
                break
            except openai.BadRequestError as exc:
                if not self._drop_refused_param(exc):   # e.g. 'temperature' on o-series
                    raise self._bad_request(exc, schema) from None
            except (openai.APIStatusError, openai.APIConnectionError, Stalled, Garbled) as exc:
                raise self._failure(exc, waits) from None
        record = request_record(streamed, messages, self.window.tokens, waits.left_out)
        waits.requests.append(record)
        usage.add(usage_of(self.config, streamed.usage, streamed.reasoning
                           + split_thinking(streamed.content)[0], record["cached_tokens"]))
        return streamed.content, streamed.finish, streamed.reasoning

    def _bad_request(self, exc, schema) -> Exception:
        """A 400 for no optional parameter: a JSON schema `edit_format: auto` may stop
        sending (SchemaRefused), else ProposerFatal saying what was refused."""
        if schema is not None and self.config.edit_format == "auto":
            return SchemaRefused(server_message(exc))
        return ProposerFatal(self._refusal(exc) + (
            "; this endpoint may not take a JSON schema (response_format): set "
            "proposer.edit_format: search_replace" if schema is not None else ""))

    def _failure(self, exc: Exception, waits: Call) -> Exception:
        """What a request that failed for good becomes: Unavailable (an outage, waited out)
        or ProposerFatal (stop the loop, saying why)."""
        import openai
        retries, where = self.config.max_retries, self.base_url or "api.openai.com"
        if isinstance(exc, openai.APIStatusError):
            if is_transient(exc):
                return Unavailable(f"LLM endpoint still failing after {retries} retries: "
                                   f"{status(exc)}: {server_message(exc)}")
            return ProposerFatal(self._refusal(exc))
        if isinstance(exc, openai.APITimeoutError):   # no headers within the first-token wait
            if not slow(exc):
                return Unavailable(f"LLM endpoint does not accept connections ({where})")
            return ProposerFatal(self._too_slow(waits, "did not begin to answer"))
        if isinstance(exc, Stalled):
            return ProposerFatal(self._too_slow(waits, str(exc), exc.first))
        if isinstance(exc, openai.APIConnectionError):
            return Unavailable(f"LLM endpoint unreachable after {retries} retries ({where}): "
                               f"{exc}")
        return Unavailable(f"LLM endpoint still answering no completion after {retries} "
                           f"retries: {exc}")                  # Garbled

    def _create(self, messages, seed: int, attempt: int, waits: Call,
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
            raise Garbled(f"a 200 whose stream is not JSON ({exc})") from None
        check_streamed(streamed)
        if streamed.plain and not self.said_plain:
            self.said_plain = True
            log.warning(PLAIN_NOTE)
        return streamed

    def _stop_retrying(self, waits: Call):
        attempts = self.config.max_retries + 1

        def stop(state) -> bool:
            exc = state.outcome.exception()
            if slow(exc) and state.attempt_number >= SLOW_ATTEMPTS:
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
