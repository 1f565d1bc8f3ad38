"""What an HTTP failure of the LLM endpoint says: its status in words, the server's own
message, its error code, and how long it asked us to wait (retry-after)."""
from __future__ import annotations

import email.utils
import logging
import time

log = logging.getLogger("loop.proposers.llm")


def retry_after(exc) -> float | None:
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


def jitter() -> float:
    import random
    return random.random()


def status(exc) -> str:
    from http import HTTPStatus
    try:
        return f"{exc.status_code} {HTTPStatus(exc.status_code).phrase}"
    except ValueError:
        return str(exc.status_code)


def error_code(exc) -> str | None:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return inner.get("code") or inner.get("type")
    return getattr(exc, "code", None)


def server_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return " ".join(str(message).split())[:300]
    return " ".join(str(getattr(exc, "message", exc)).split())[:300]


def log_retry(state) -> None:
    exc = state.outcome.exception()
    what = status(exc) if hasattr(exc, "status_code") else type(exc).__name__
    log.warning("LLM request failed (%s); retry %d in %.1f s", what, state.attempt_number,
                state.next_action.sleep if state.next_action else 0.0)
