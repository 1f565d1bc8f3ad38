"""The server's context window, where it says it, and a prompt fitted to it.

A prompt longer than the window is not refused by every server: Ollama cuts it to its
`num_ctx` unseen (the rules at its head go first), llama.cpp fails or shifts the context.
So at start the window is asked for where a server tells it:

  * llama.cpp:  GET  <root>/props      -> default_generation_settings.n_ctx
  * Ollama:     POST <root>/api/show   -> parameters `num_ctx N`, else its default
                (OLLAMA_DEFAULT_CTX; a server started with OLLAMA_CONTEXT_LENGTH is not seen)
  * vLLM:       GET  <base>/models     -> data[].max_model_len of the model
(<root> is the base URL without its /v1). Elsewhere (OpenAI, most providers) the window is
unknown and nothing is fitted. Tokens are estimated from characters (code and English run
3.5-4 characters a token; 3.5 errs high)."""
from __future__ import annotations

import json
import logging
import threading
import urllib.request

from loop.proposers.base import ProposerFatal

log = logging.getLogger("loop.proposers.llm")

PROBE_TIMEOUT_S = 5.0
OLLAMA_DEFAULT_CTX = 4096      # Ollama's num_ctx when a model sets none (0.6 and later)
CHARS_PER_TOKEN = 3.5
MIN_ANSWER_TOKENS = 1024       # room kept for the answer, at least (a few small edits)


class Window:
    """One endpoint's context window, asked for once (at the endpoint check, else before
    the first prompt), and prompts fitted to it."""

    def __init__(self, base_url: str | None, model: str | None, key: str | None,
                 max_tokens: int):
        self.base_url, self.model, self.key, self.max_tokens = base_url, model, key, max_tokens
        self.tokens: int | None = None      # None: the server does not say
        self.source = ""
        self._asked = threading.Lock()
        self._known = False

    def ask(self) -> None:
        with self._asked:
            if not self._known:
                self.tokens, self.source = discover(self.base_url, self.model, self.key)
                self._known = True

    def said(self) -> str:
        """What the endpoint check line adds."""
        self.ask()
        return "" if self.tokens is None else \
            f"; context window {self.tokens} tokens ({self.source})"

    def fit(self, render, context, journal_chars: int) -> tuple[list[str], list[str]]:
        """`render(context, journal_chars)`'s texts, fitted (see `fit`); ProposerFatal in
        one line when even the shortest prompt leaves no room for the answer."""
        self.ask()
        if self.tokens is None:
            return render(context, journal_chars), []
        room = answer_room(self.tokens, self.max_tokens)
        try:
            texts, left_out = fit(render, context, journal_chars, self.tokens - room)
        except TooBig as exc:
            raise ProposerFatal(
                f"the prompt needs about {exc} tokens and the answer {room} more, but the "
                f"server's context window is {self.tokens} tokens ({self.source}): raise it "
                f"(llama.cpp -c, Ollama num_ctx, vLLM --max-model-len) or lower "
                f"proposer.max_tokens") from None
        if left_out:
            log.warning("prompt fitted to the %d-token context window: %s", self.tokens,
                        "; ".join(left_out))
        return texts, left_out

    def over(self, messages: list[dict]) -> bool:
        """Whether a conversation leaves the answer no room in the window."""
        if self.tokens is None:
            return False
        chars = sum(len(m["content"]) for m in messages)
        return estimate_tokens(chars) + answer_room(self.tokens, self.max_tokens) > self.tokens


def estimate_tokens(chars: int) -> int:
    return int(chars / CHARS_PER_TOKEN) + 1


def answer_room(window: int, max_tokens: int) -> int:
    """Tokens kept free for the answer: max_tokens, but never more than a quarter of the
    window unless that is under MIN_ANSWER_TOKENS."""
    return min(max_tokens, max(MIN_ANSWER_TOKENS, window // 4))


def discover(base_url: str | None, model: str | None, key: str | None) -> tuple[int | None, str]:
    """(window in tokens, where it was read) or (None, "") where no server says."""
    if not base_url:
        return None, ""
    base = base_url.rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    props = _get_json(f"{root}/props", headers)
    n_ctx = _dig(props, "default_generation_settings", "n_ctx") or _dig(props, "n_ctx")
    if _positive(n_ctx):
        return int(n_ctx), "llama.cpp /props n_ctx"
    listing = _get_json(f"{base}/models", headers)
    for entry in (listing or {}).get("data", []) if isinstance(listing, dict) else []:
        if isinstance(entry, dict) and entry.get("id") == model and \
                _positive(entry.get("max_model_len")):
            return int(entry["max_model_len"]), "vLLM /v1/models max_model_len"
    show = _get_json(f"{root}/api/show", headers, {"model": model})
    if isinstance(show, dict) and ("model_info" in show or "parameters" in show):
        num_ctx = _num_ctx(show.get("parameters"))
        if num_ctx:
            return num_ctx, "Ollama /api/show num_ctx"
        trained = next((v for k, v in (show.get("model_info") or {}).items()
                        if k.endswith(".context_length") and _positive(v)), None)
        window = min(OLLAMA_DEFAULT_CTX, int(trained)) if trained else OLLAMA_DEFAULT_CTX
        return window, "Ollama's default num_ctx (the model sets none)"
    return None, ""


def _num_ctx(parameters) -> int | None:
    """`num_ctx 8192` in Ollama's parameters text (one `name value` a line)."""
    for line in str(parameters or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            return int(parts[1])
    return None


def _get_json(url: str, headers: dict, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={
        **headers, **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
            return json.loads(response.read(1 << 20) or b"null")
    except Exception:               # not this server's route, or no server: not known here
        return None


def _dig(value, *keys):
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class TooBig(Exception):
    """Even without journal and with one file shown, the prompt does not fit the window."""


def fit(render, context, journal_chars: int, budget: int) -> tuple[list[str], list[str]]:
    """The prompt's messages as `render(context, journal_chars)` makes them, shortened until
    their estimated tokens fit `budget`: the journal first (halved down to nothing), then
    the text of the largest files (at least one file is shown). Returns (messages, what was
    left out); TooBig with the smallest prompt's estimate when nothing fits."""
    import dataclasses

    def size(texts: list[str]) -> int:
        return estimate_tokens(sum(map(len, texts)))

    left_out: list[str] = []
    chars = journal_chars
    texts = render(context, chars)
    while size(texts) > budget and chars > 0:
        chars = chars // 2 if chars >= 400 else 0
        texts = render(context, chars)
    if chars < journal_chars:
        left_out.append(f"journal cut to {chars} of {journal_chars} characters")
    files = dict(context.files)
    for path in sorted(files, key=lambda p: -len(files[p])):
        if size(texts) <= budget or len([p for p in files if files[p] is context.files[p]]) < 2:
            break
        files[path] = (f"({context.files[path].count(chr(10)) + 1} lines, not shown: the "
                       f"prompt must fit the server's context window)")
        left_out.append(f"{path}'s text")
        texts = render(dataclasses.replace(context, files=files), chars)
    if size(texts) > budget:
        raise TooBig(size(texts))
    return texts, left_out
