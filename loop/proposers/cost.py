"""What one request to the LLM endpoint cost: its tokens and dollars (`Usage`), and its
record in requests.json (its size against the context window, its speed, its cache hits).
Pure: reads what the server reported, makes no request."""
from __future__ import annotations

from loop.proposers.base import Usage
from loop.proposers.stream import Streamed
from loop.proposers.window import estimate_tokens

CHARS_PER_TOKEN = 4                # to count thinking when the server does not report it


def usage_of(config, u, thinking: str = "", cached: int | None = None) -> Usage:
    """Tokens and cost from a stream's usage `u`, priced by the ProposerConfig `config`;
    reasoning tokens as the server reports them, else estimated from the thinking text
    (vLLM, Ollama and llama.cpp report none)."""
    estimate = len(thinking) // CHARS_PER_TOKEN
    if u is None:
        return Usage(reasoning_tokens=estimate, requests=1)
    prompt, completion = u.prompt_tokens or 0, u.completion_tokens or 0
    cached = cached or 0         # OpenAI's prompt_tokens_details, llama.cpp's cache_n
    reasoning = getattr(getattr(u, "completion_tokens_details", None),
                        "reasoning_tokens", 0) or estimate
    c = config
    cached_price = (c.price_cached_input_per_m if c.price_cached_input_per_m is not None
                    else c.price_input_per_m)
    cost = ((prompt - cached) * c.price_input_per_m + cached * cached_price
            + completion * c.price_output_per_m) / 1e6  # reasoning is within completion
    return Usage(prompt, completion, cached, reasoning, 1, cost)


def request_record(streamed: Streamed, messages: list[dict], window: int | None,
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
