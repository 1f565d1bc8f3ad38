"""A scripted OpenAI-compatible chat server on 127.0.0.1, for testing the real `openai`
client end to end (retries, timeouts, status codes, usage) without mocking it.

    server.script(Reply("Description: ..."), Reply(status=429, headers={"retry-after": "0"}))
    server.base_url                      # "http://127.0.0.1:<port>/v1"
    server.requests                      # the JSON bodies received, in order

A 200 can also be broken, as a flapping proxy answers: `raw` sends a body verbatim (garbage,
empty), `choices=[]` no choice, `null_content` a message whose content is null;
`server.models_raw` does the same to GET /v1/models.

Each request consumes the next scripted Reply; an empty script answers 500 so a test that
sends more requests than it expects fails loudly.

`Reply.shape` answers as a given server does (their JSON, as documented and observed):
  "openai"    the reference API: usage with prompt/completion token details;
  "vllm"      `reasoning` beside content (vLLM >= 0.11 with --reasoning-parser), null
              tool/refusal fields, `stop_reason`, usage without details;
  "deepseek"  `reasoning_content` (the DeepSeek API; vLLM before the rename), and usage
              counting `reasoning_tokens`;
  "ollama"    `system_fingerprint: fp_ollama`, usage with three counts only, `reasoning`;
  "llamacpp"  `reasoning_content` (its default --reasoning-format), `timings`, no details.
Without a reasoning parser these servers put <think>...</think> in `text` itself.

A request with `stream: true` is answered as servers stream (server-sent events): a chunk
with the role, the text in pieces of `chunk_chars`, `token_delay_s` apart, after `delay_s`
(the prompt being read: headers come at once, no token); `stall_after`/`stall_s` stop the
tokens for a while mid-answer; the finish chunk, then a usage chunk when the client asked
(`stream_options.include_usage`). While it waits the server watches the connection:
`server.events` lists ("request", t) and ("closed", t) (the client hung up), in order.
`server.streams = False` answers as some gateways do: one plain JSON completion
(content-type application/json) to `stream: true` too.

Context windows, as servers tell them: `server.props` answers GET /props (llama.cpp),
`server.ollama_show` POST /api/show (Ollama), `server.max_model_len` adds max_model_len
to GET /v1/models' entries (vLLM)."""
from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0                 # sleep before answering (forces client timeouts)
    finish_reason: str = "stop"          # "length" = a reply cut off at max_tokens
    usage: bool = True                   # False: the JSON has no "usage" key
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    error: dict | None = None            # the error body for status >= 400
    shape: str = "openai"                # which server's JSON to imitate (see above)
    reasoning: str | None = None         # thinking, in the shape's separate field
    raw: str | None = None               # a 200 whose body is exactly this (garbage, "")
    choices: list | None = None          # replaces the choices list (e.g. [])
    null_content: bool = False           # the message's content is JSON null
    chunk_chars: int = 8                 # streamed: characters per content chunk
    token_delay_s: float = 0.0           # streamed: pause between chunks
    stall_after: int | None = None       # streamed: chunks sent before a stall
    stall_s: float = 0.0                 # streamed: how long the stall lasts
    cache_n: int | None = None           # llama.cpp's timings.cache_n (streamed llamacpp)


class OpenAIServer:
    def __init__(self):
        self.replies: list[Reply] = []
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []   # request headers, same order as requests
        self.models: list[str] | None = ["test-model"]   # GET /v1/models (None: 404)
        self.models_raw: str | None = None        # else GET /v1/models answers this 200 body
        self.props: dict | None = None            # GET /props (None: 404)
        self.ollama_show: dict | None = None      # POST /api/show (None: 404)
        self.max_model_len: int | None = None     # vLLM's field in /v1/models
        self.streams = True                       # False: stream requests get plain JSON
        self.events: list[tuple[str, float]] = []  # ("request" | "closed", time.monotonic())
        self.lock = threading.Lock()
        # connections a handler is waiting on (a stall, a delay): a new request first notes
        # those the client already hung up on, so "closed" precedes the retry it caused even
        # when the waiting thread has not been scheduled yet to see it (a loaded machine)
        self.watched: dict[socket.socket, bool] = {}    # connection -> its hang-up noted
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *replies: Reply | str) -> OpenAIServer:
        with self.lock:
            self.replies.extend(Reply(r) if isinstance(r, str) else r for r in replies)
        return self

    def next_reply(self, body: dict, headers: dict[str, str]) -> Reply:
        with self.lock:
            for connection in list(self.watched):
                if not self.watched[connection] and _hung_up(connection):
                    self._closed(connection)
            self.requests.append(body)
            self.headers.append(headers)
            self.events.append(("request", time.monotonic()))
            if not self.replies:
                return Reply(status=500, error={"message": "test server: script exhausted"})
            return self.replies.pop(0)

    def note(self, event: str) -> None:
        with self.lock:
            self.events.append((event, time.monotonic()))

    def hung_up(self, connection: socket.socket) -> None:
        """The client closed `connection`: noted once, whoever sees it first."""
        with self.lock:
            if not self.watched.get(connection, False):
                self._closed(connection)

    def _closed(self, connection: socket.socket) -> None:
        self.watched[connection] = True
        self.events.append(("closed", time.monotonic()))

    def wait_for(self, kind: str, count: int = 1, timeout: float = 30.0) -> bool:
        """Whether `count` events of `kind` came within `timeout` (the server notes a hang-up
        on its own thread, a moment after the client's close)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for k, _ in self.events if k == kind) >= count:
                return True
            time.sleep(0.02)
        return False

    def user_messages(self, request_index: int) -> list[str]:
        return [m["content"] for m in self.requests[request_index]["messages"]
                if m["role"] == "user"]

    def start(self) -> OpenAIServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


REASONING_KEY = {"vllm": "reasoning", "deepseek": "reasoning_content", "ollama": "reasoning",
                 "llamacpp": "reasoning_content", "openai": "reasoning_content"}


def completion_json(reply: Reply, model: str) -> dict:
    message = {"role": "assistant", "content": None if reply.null_content else reply.text}
    choice = {"index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
              "message": message}
    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice] if reply.choices is None else reply.choices}
    if reply.reasoning is not None or reply.shape == "vllm":
        message[REASONING_KEY[reply.shape]] = reply.reasoning      # vLLM sends null
    if reply.shape == "vllm":
        message.update(refusal=None, annotations=None, audio=None, function_call=None,
                       tool_calls=[])
        choice["stop_reason"] = None
        body.update(service_tier=None, system_fingerprint=None, prompt_logprobs=None,
                    kv_transfer_params=None)
    elif reply.shape == "ollama":
        body["system_fingerprint"] = "fp_ollama"
    elif reply.shape == "llamacpp":
        body.update(system_fingerprint="b6000-test", timings={
            "prompt_n": reply.prompt_tokens, "predicted_n": reply.completion_tokens})
    if reply.usage:
        usage = {"prompt_tokens": reply.prompt_tokens,
                 "completion_tokens": reply.completion_tokens,
                 "total_tokens": reply.prompt_tokens + reply.completion_tokens}
        if reply.shape == "openai":
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
            usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        elif reply.shape == "deepseek":             # the DeepSeek API counts its thinking
            usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        elif reply.shape == "vllm":
            usage["prompt_tokens_details"] = None
        body["usage"] = usage
    return body


def chunk_json(reply: Reply, model: str, delta: dict | None, finish: str | None = None,
               choices: list | None = None) -> dict:
    body = {"id": "chatcmpl-test", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model,
            "choices": choices if choices is not None else [
                {"index": 0, "delta": delta or {}, "finish_reason": finish, "logprobs": None}]}
    if reply.shape == "ollama":
        body["system_fingerprint"] = "fp_ollama"
    return body


def _hung_up(connection: socket.socket) -> bool:
    """Whether the client closed `connection` (a peek that reads end of file), without
    blocking and without consuming what it sent."""
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def stream_events(reply: Reply, model: str, include_usage: bool) -> list[tuple[dict, bool]]:
    """The chunks of a streamed answer, each with whether a token pause precedes it."""
    if reply.choices is not None:
        return [(chunk_json(reply, model, None, choices=reply.choices), False)]
    content = None if reply.null_content else ""
    out = [(chunk_json(reply, model, {"role": "assistant", "content": content}), False)]
    key = REASONING_KEY[reply.shape]
    text = reply.reasoning or ""
    for i in range(0, len(text), reply.chunk_chars):
        out.append((chunk_json(reply, model, {key: text[i:i + reply.chunk_chars]}), True))
    if not reply.null_content:
        for i in range(0, len(reply.text), reply.chunk_chars):
            out.append((chunk_json(reply, model,
                                   {"content": reply.text[i:i + reply.chunk_chars]}), True))
    final = chunk_json(reply, model, {}, reply.finish_reason)
    whole = completion_json(reply, model)
    if reply.shape == "llamacpp":
        final["timings"] = {**whole.get("timings", {}), "cache_n": reply.cache_n or 0}
    out.append((final, False))
    if include_usage and reply.usage:
        out.append(({**chunk_json(reply, model, None, choices=[]), "usage": whole["usage"]},
                    False))
    return out


def _handler(server: OpenAIServer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.rstrip("/") == "/props" and server.props is not None:
                return self._send(200, server.props, {})
            if self.path.rstrip("/") != "/v1/models":
                return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            if server.models is None:              # a server without a models list
                return self._send(404, {"error": {"message": "no models list here"}}, {})
            if server.models_raw is not None:      # a proxy's or a web page's 200
                return self._send(200, None, {}, server.models_raw.encode())
            extra = ({} if server.max_model_len is None
                     else {"max_model_len": server.max_model_len})
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "test", **extra}
                for m in server.models]}, {})

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") == "/api/show" and server.ollama_show is not None:
                return self._send(200, server.ollama_show, {})
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            reply = server.next_reply(body, {k.lower(): v for k, v in self.headers.items()})
            if body.get("stream") and reply.status < 400 and reply.raw is None \
                    and server.streams:
                return self._stream(reply, body)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.status >= 400:
                error = reply.error or {"message": f"scripted {reply.status}",
                                        "type": "test_error", "code": None}
                return self._send(reply.status, {"error": error}, reply.headers)
            if reply.raw is not None:
                return self._send(200, None, reply.headers, reply.raw.encode())
            self._send(200, completion_json(reply, body.get("model", "test-model")),
                       reply.headers)

        def _stream(self, reply: Reply, body: dict):
            """Server-sent events, as an OpenAI-compatible server streams an answer."""
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = stream_events(reply, body.get("model", "test-model"), include_usage)
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.flush()
                if not self._wait(reply.delay_s):       # reading the prompt: no token yet
                    return
                tokens = 0
                for chunk, paced in events:
                    if paced:
                        if tokens == reply.stall_after and not self._wait(reply.stall_s):
                            return
                        tokens += 1
                        if not self._wait(reply.token_delay_s):
                            return
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                server.hung_up(self.connection)

        def _wait(self, seconds: float) -> bool:
            """Sleep `seconds` watching the connection; False once the client hung up."""
            end = time.monotonic() + seconds
            with server.lock:
                server.watched.setdefault(self.connection, False)
            while True:
                left = end - time.monotonic()
                if server.watched.get(self.connection):      # a new request saw it first
                    return False
                if left <= 0:
                    with server.lock:       # waited it out: no longer watched
                        server.watched.pop(self.connection, None)
                    return True
                readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
                if readable and _hung_up(self.connection):
                    server.hung_up(self.connection)
                    return False

        def _send(self, status, payload, headers, data: bytes | None = None):
            data = json.dumps(payload).encode() if data is None else data
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass   # the client gave up (a timeout test); nothing to answer

        def log_message(self, *args):   # keep pytest output clean
            pass

    return Handler
