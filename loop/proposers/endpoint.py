"""Is the LLM endpoint there? Checked before anything runs, and waited for when it goes away.

  * `check`: before the baseline (whose runs can take many minutes), ask the endpoint for
    its models: unreachable, a refused key or a model it does not serve is a bad input
    (ProposerFatal -> exit 2 with the reason), not something to find out after the baseline.
    An endpoint without a models list (a 404, an empty list, or a 200 that is no list:
    garbage, an empty body, a web page), or one that does not list the model, is asked for
    one token of it instead; a 200 to that which is no completion (what mid-night is an
    outage) stops here too, in one line.
  * `wait_until_back`: mid-night, after the request's own retries ran out, poll the models
    list with growing pauses up to `proposer.patience_s` (an endpoint without one is asked
    the request again after a pause); then stop the loop (ProposerFatal -> exit 1). An
    outage (also a 200 that is no completion: garbage or an empty body, `choices: []`,
    `content: null`) is never recorded as the code's `bad_edit`."""
from __future__ import annotations

import sys
import threading
import time

from loop.proposers.base import ProposerFatal
from loop.proposers.completion import Garbled, check_completion
from loop.proposers.stream import Cancelled

FIRST_PAUSE_S, MAX_PAUSE_S = 1.0, 60.0


def _where(base_url: str | None) -> str:
    return base_url or "https://api.openai.com/v1"


def check(client, model: str | None, base_url: str | None) -> str:
    """One line saying the endpoint and model are there, or ProposerFatal saying why not."""
    import openai
    where = _where(base_url)
    try:
        served = [m.id for m in client.models.list()]
    except (ValueError, AttributeError, TypeError) as exc:   # a 200 that is no models list
        return _check_by_request(client, model, where, f" (its models list: {_garbled(exc)})")
    except openai.APIConnectionError as exc:
        raise ProposerFatal(f"the LLM endpoint {where} is unreachable ({exc}); start the "
                            f"server or fix --base-url / $OPENAI_BASE_URL") from None
    except openai.AuthenticationError as exc:
        raise ProposerFatal(f"the LLM endpoint {where} refused the API key ({exc.status_code}); "
                            f"check the variable named by proposer.api_key_env") from None
    except openai.APIStatusError as exc:
        if exc.status_code in (404, 405, 501):       # no models list here: one token instead
            return _check_by_request(client, model, where)
        raise ProposerFatal(f"the LLM endpoint {where} answered {exc.status_code} to a models "
                            f"request: {exc.message}") from None
    if not served:                # nothing listed: only a request tells whether it answers
        return _check_by_request(client, model, where, " (it lists no models)")
    if model not in served:
        # Some endpoints list other names than they accept (deployments, aliases): only a
        # failed 1-token request for the model makes it unknown.
        try:
            return _check_by_request(client, model, where)
        except NoCompletion:
            raise
        except ProposerFatal as exc:
            shown = ", ".join(sorted(served)[:8]) + (", ..." if len(served) > 8 else "")
            raise ProposerFatal(f"model '{model}' is not served by {where} (it lists: {shown}; "
                                f"{exc})") from None
    return f"endpoint: {where} serves {model}"


def _check_by_request(client, model: str | None, where: str, why: str = "") -> str:
    """One token of `model`; `why`: what made the models list no answer (said on failure)."""
    import openai
    try:
        response = client.chat.completions.create(
            model=model, max_tokens=1, messages=[{"role": "user", "content": "ping"}])
        check_completion(response)
    except openai.APIConnectionError as exc:
        raise ProposerFatal(f"the LLM endpoint {where} is unreachable ({exc})") from None
    except openai.APIStatusError as exc:
        raise ProposerFatal(f"the LLM endpoint {where} refused a 1-token request for model "
                            f"'{model}' ({exc.status_code}: {exc.message}){why}") from None
    except (Garbled, ValueError, AttributeError, TypeError) as exc:
        what = str(exc) if isinstance(exc, Garbled) else _garbled(exc)
        raise NoCompletion(f"the LLM endpoint {where} answers no completion: a 1-token "
                           f"request for model '{model}' got {what}{why}; is --base-url "
                           f"an OpenAI-compatible API (it usually ends in /v1)?") from None
    return f"endpoint: {where} answers for {model}"


class NoCompletion(ProposerFatal):
    """A 200 that is no completion: the endpoint is broken, not the model unknown."""


def _garbled(exc: Exception) -> str:
    """What a 200 that the client could not read was, in a few words."""
    if isinstance(exc, ValueError):          # json.JSONDecodeError
        return "a 200 whose body is not JSON"
    return f"a 200 of another shape ({type(exc).__name__})"


def wait_until_back(client, base_url: str | None, patience_s: float, since: float,
                    reason: str, scale: float = 1.0, err=sys.stderr,
                    cancelled: threading.Event | None = None) -> None:
    """Return once the endpoint lists its models again; ProposerFatal when `patience_s`
    seconds have passed since the outage began (`since`, a time.monotonic()); Cancelled at
    once when `cancelled` is set (the loop stops)."""
    cancelled = cancelled or threading.Event()
    pause, told = FIRST_PAUSE_S, False
    while True:
        left = patience_s - (time.monotonic() - since)
        if left <= 0:
            raise ProposerFatal(f"the LLM endpoint {_where(base_url)} has been unavailable "
                                f"for {patience_s:g}s (proposer.patience_s): {reason}")
        if not told:
            print(f"waiting for the LLM endpoint (up to {left:.0f}s more): {reason}",
                  file=err, flush=True)
            told = True
        if cancelled.wait(min(pause * scale, left)):
            raise Cancelled("the loop is stopping")
        pause = min(pause * 2, MAX_PAUSE_S)
        if _answers(client):
            return


def _answers(client) -> bool:
    """Whether the endpoint is back: it lists its models, or says it has no such list (as
    `check` allows: then the request itself, asked again, is the probe)."""
    import openai
    try:
        client.models.list()
        return True
    except openai.APIStatusError as exc:
        return exc.status_code in (404, 405, 501)
    except Exception:              # still away: pause longer, until patience runs out
        return False
