"""One streamed chat completion, waited for as a local server needs.

A server on a few CPU cores reads a 4k-token prompt for minutes before its first token and
then writes ~10 tokens a second: a timeout on the whole answer cuts such a server off while
it works. So the answer is streamed and three clocks watch it:

  * `first_token_s`: the longest wait for the first token; reading the prompt shows none;
  * `stall_s`: the longest silence between tokens once they flow (a stalled server);
  * `deadline`: the proposal's cap (time.monotonic()), across all its requests.

A watchdog thread shuts the socket when a clock runs out or the proposal is cancelled
(Ctrl-C): closing the connection is what tells the server to stop generating, so the caller
backs off only once the stream is closed and never retries onto a server still busy with
the abandoned answer. A socket shut down wakes the reading thread at once; a close alone
would not.

Some gateways and proxies answer `stream: true` with one plain JSON chat completion
(content-type application/json, no server-sent events): the openai client then reads no
chunk at all. Such an answer is read as the completion it is (`Streamed.plain`), not
retried as a broken one; the caller says so once."""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field

REASONING_FIELDS = ("reasoning", "reasoning_content")  # vLLM >= 0.11 / DeepSeek, llama.cpp
TICK_S = 0.2            # how often the watchdog looks at the clocks


class Stalled(Exception):
    """The server sent no token within a clock (it is there, but slow or stuck)."""

    def __init__(self, message: str, first: bool):
        super().__init__(message)
        self.first = first      # no token at all (the prompt was still being read)


class OverCap(Exception):
    """The proposal's cap ran out while the answer was still being written."""


class Cancelled(Exception):
    """The engine stops (Ctrl-C, SIGTERM): the request was abandoned."""


@dataclass
class Waits:
    first_token_s: float
    stall_s: float
    deadline: float                         # time.monotonic() the proposal's cap ends
    cancelled: threading.Event = field(default_factory=threading.Event)

    def left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class Streamed:
    content: str = ""
    reasoning: str = ""
    finish: str | None = None
    usage: object = None                    # the final chunk's usage (include_usage)
    extra: dict = field(default_factory=dict)   # server fields of the last chunk (timings)
    first_token_s: float | None = None      # seconds from the request to the first token
    seconds: float = 0.0
    chunks: int = 0
    said: bool = False                      # a content, reasoning, refusal or tool delta came
    plain: bool = False                     # one plain JSON completion, not a stream


def stream_completion(client, params: dict, waits: Waits) -> Streamed:
    """The answer to `params` (sent with stream=True), read to its end. Raises Stalled,
    OverCap or Cancelled (the connection closed first), or the client's own errors."""
    started = time.monotonic()
    if waits.cancelled.is_set():
        raise Cancelled("the loop is stopping")
    # the wait for headers: some servers send them only with the first token
    timeout = max(1.0, min(waits.first_token_s, waits.left()))
    stream = client.chat.completions.create(**params, stream=True, timeout=timeout)
    out = Streamed()
    watch = _Watch(stream, waits, started)
    watch.start()
    try:
        if _is_plain(stream):
            _take_plain(out, json.loads(stream.response.read()))
            out.first_token_s = time.monotonic() - started
        for chunk in [] if out.plain else stream:
            out.chunks += 1
            if _take(out, chunk):
                if out.first_token_s is None:
                    out.first_token_s = time.monotonic() - started
                watch.token()
    except Exception:
        if watch.reason is None:
            raise
    finally:
        watch.stop()
        stream.close()
        out.seconds = time.monotonic() - started
    if watch.reason == "cancelled":
        raise Cancelled("the loop is stopping")
    if watch.reason == "cap":
        raise OverCap(f"the proposal's cap ran out after {out.seconds:.0f}s while the answer "
                      f"was still being written")
    if watch.reason == "stalled":
        first = out.first_token_s is None
        raise Stalled(f"no token for {waits.first_token_s if first else waits.stall_s:g}s "
                      + ("(the server had not begun to answer)" if first
                         else f"after {len(out.content) + len(out.reasoning)} characters"),
                      first)
    return out


def _take(out: Streamed, chunk) -> bool:
    """Add one chunk to `out`; whether it carried a token."""
    extra = getattr(chunk, "model_extra", None) or {}
    if extra:
        out.extra = {**out.extra, **extra}
    if getattr(chunk, "usage", None) is not None:
        out.usage = chunk.usage
    token = False
    for choice in getattr(chunk, "choices", None) or []:
        if getattr(choice, "index", 0) != 0:
            continue
        if choice.finish_reason:
            out.finish = choice.finish_reason
        delta = choice.delta
        if delta is None:
            continue
        if isinstance(delta.content, str):
            out.content += delta.content
            token = token or bool(delta.content)
            out.said = True
        more = getattr(delta, "model_extra", None) or {}
        for key in REASONING_FIELDS:
            if isinstance(more.get(key), str) and more[key]:
                out.reasoning += more[key]
                token = out.said = True
        if getattr(delta, "refusal", None) or getattr(delta, "tool_calls", None):
            token = out.said = True
    return token


def _is_plain(stream) -> bool:
    """Whether the server answered the stream request with a plain JSON body."""
    response = getattr(stream, "response", None)
    kind = response.headers.get("content-type", "") if response is not None else ""
    return kind.split(";")[0].strip().lower().endswith("json")


def _take_plain(out: Streamed, data) -> None:
    """`out` from one chat completion's JSON, as the stream's chunks would have made it
    (a body of another shape says nothing: the caller's check calls it no completion)."""
    out.plain, out.chunks = True, 1
    if not isinstance(data, dict):
        return
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if isinstance(data.get("usage"), dict):
        out.usage = _usage(data["usage"])
    out.extra = {k: v for k, v in data.items() if k == "timings"}    # llama.cpp's
    if not isinstance(message, dict):
        return
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    out.finish = finish if isinstance(finish, str) else None
    if isinstance(message.get("content"), str):
        out.content, out.said = message["content"], True
    for key in REASONING_FIELDS:
        if isinstance(message.get(key), str) and message[key]:
            out.reasoning += message[key]
            out.said = True
    if message.get("refusal") or message.get("tool_calls"):
        out.said = True


def _usage(data: dict):
    """The completion's usage as the client's own type (what a stream's last chunk holds),
    or None when it is not of that shape."""
    from openai.types import CompletionUsage
    try:
        return CompletionUsage.model_validate(data)
    except ValueError:
        return None


class _Watch(threading.Thread):
    """Shuts the stream's socket when a clock runs out or the proposal is cancelled."""

    def __init__(self, stream, waits: Waits, started: float):
        super().__init__(name="llm-watch", daemon=True)
        self.stream, self.waits = stream, waits
        self.last = started
        self.flowing = False
        self.reason: str | None = None
        self._done = threading.Event()

    def token(self) -> None:
        self.last = time.monotonic()
        self.flowing = True

    def stop(self) -> None:
        self._done.set()

    def run(self) -> None:
        while not self._done.wait(TICK_S):
            now = time.monotonic()
            idle = self.waits.stall_s if self.flowing else self.waits.first_token_s
            if self.waits.cancelled.is_set():
                self.reason = "cancelled"
            elif now - self.last > idle:
                self.reason = "stalled"
            elif now > self.waits.deadline:
                self.reason = "cap"
            else:
                continue
            _shut(self.stream)
            return


def _shut(stream) -> None:
    """End the connection under a stream another thread is reading."""
    try:
        network = stream.response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass                        # already closed
    try:
        stream.close()
    except Exception:
        pass
