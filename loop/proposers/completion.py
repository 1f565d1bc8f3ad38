"""What an answer of the LLM endpoint is: a completion or not, and each way a request fails.

Shared by the proposer's requests (loop/proposers/transport.py) and the endpoint check before
the night (loop/proposers/endpoint.py): the error types, the check that a 200 is a
completion, and which failures are worth a retry. Pure: no request is made here."""
from __future__ import annotations

from loop.proposers.http_errors import error_code
from loop.proposers.stream import REASONING_FIELDS, Stalled, Streamed

TRANSIENT_STATUS = {408, 409, 429}


class Unavailable(Exception):
    """The endpoint stayed unreachable or overloaded through every retry."""


class Garbled(Exception):
    """A 200 that is no chat completion (a body that is not JSON, an empty one, no choice, a
    message without content): a proxy's or server's fault, retried and waited out like a
    5xx, never the code's bad_edit."""


class SchemaRefused(Exception):
    """`edit_format: auto` sent a JSON schema (response_format) and the server answered 400:
    it does not take one, so this proposer asks in search_replace from now on."""


def check_streamed(streamed: Streamed) -> None:
    """Garbled unless the stream said something (content, even "", thinking, a refusal or
    tool calls): a proxy's garbage, an empty body, `choices: []` or null content."""
    if streamed.chunks == 0:
        raise Garbled("a 200 without a stream of chunks")
    if not streamed.said:
        raise Garbled("a 200 whose stream has no message content")


def check_completion(response) -> None:
    """Garbled unless `response` has a first choice with a message that says something
    (content, or, with content null, thinking, a refusal or tool calls)."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise Garbled("a 200 without choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise Garbled("a 200 whose choice has no message")
    if isinstance(getattr(message, "content", None), str):
        return                             # even "": the model's answer, judged as such
    extra = getattr(message, "model_extra", None) or {}
    said = [getattr(message, "refusal", None), getattr(message, "tool_calls", None),
            *(extra.get(k) for k in REASONING_FIELDS)]
    if not any(isinstance(x, str) and x or isinstance(x, list) and x for x in said):
        raise Garbled("a 200 whose message content is null")


def is_transient(exc: BaseException) -> bool:
    """A failure worth retrying: the endpoint away, overloaded, or answering garbage."""
    import openai
    if isinstance(exc, (Garbled, Stalled)):
        return True
    if isinstance(exc, openai.APIConnectionError):       # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and error_code(exc) == "insufficient_quota":
            return False                                  # billing, not load: retrying is futile
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


def slow(exc: BaseException | None) -> bool:
    """A server that is there but sent no token in time (not one that is away: a
    connection that was never accepted is an outage)."""
    import openai
    if isinstance(exc, Stalled):
        return True
    return (isinstance(exc, openai.APITimeoutError)
            and type(exc.__cause__).__name__ != "ConnectTimeout")
