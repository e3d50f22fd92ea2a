"""A deterministic stand-in for vLLM's OpenAI chat-completions server.

Same request -> same tokens, so tests can assert exact text. The vocabulary mixes
ASCII with multi-byte UTF-8 words so that byte-level stream splitting really cuts
characters in half. Token counts are the emulator's own (one vocabulary entry = one
token; prompt tokens ~ whitespace words + 4 per message); they are not a real tokenizer.
`temperature`, `top_p` and similar sampling fields are accepted and ignored.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_MODEL_ID = "peagle-emulator"

_VOCAB: tuple[str, ...] = (
    "The",
    " draft",
    " heads",
    " propose",
    " tokens",
    " in",
    " parallel",
    ",",
    " and",
    " the",
    " target",
    " verifies",
    " them",
    " in one pass",
    ".",
    " café",
    " naïve",
    " —",
    " ✓",
    " 🚀",
    " 東京",
    " größer",
    " déjà vu",
    "\n",
    " P-EAGLE",
    " accepts",
    " 3",
    " of",
    " 7",
    " drafts",
    " ½",
    " 🙂",
)


VOCABULARY: tuple[str, ...] = _VOCAB
"""The emulated target's vocabulary: a token id is an index into it (the emulator's
table drafter predicts these ids)."""


def token_ids(tokens: list[str]) -> list[int]:
    """The ids of tokens `generate` produced (every one is in the vocabulary)."""
    return [_INDEX[t] for t in tokens]


_INDEX = {token: i for i, token in enumerate(_VOCAB)}


class ChatRequestError(ValueError):
    """A body the container would answer with HTTP 400 (bad JSON, no messages...)."""


@dataclass(frozen=True)
class ChatRequest:
    """The fields of an OpenAI chat-completions request the emulator honours."""

    messages: list[dict[str, Any]]
    model: str
    max_tokens: int | None
    stream: bool
    include_usage: bool

    @classmethod
    def parse(cls, body: bytes | str) -> ChatRequest:
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise ChatRequestError(f"request body is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise ChatRequestError("request body must be a JSON object")
        messages = doc.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ChatRequestError("'messages' must be a non-empty list")
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise ChatRequestError("every message needs a 'role'")
        max_tokens = doc.get("max_completion_tokens", doc.get("max_tokens"))
        if max_tokens is not None and (
            not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
        ):
            raise ChatRequestError("'max_tokens' must be a positive integer")
        options = doc.get("stream_options") or {}
        return cls(
            messages=messages,
            model=str(doc.get("model") or DEFAULT_MODEL_ID),
            max_tokens=max_tokens,
            stream=bool(doc.get("stream", False)),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        )

    @property
    def seed(self) -> int:
        canon = json.dumps(self.messages, sort_keys=True, ensure_ascii=False)
        return int.from_bytes(hashlib.sha256(canon.encode("utf-8")).digest()[:8], "big")

    @property
    def prompt_tokens(self) -> int:
        total = 0
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, list):  # content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            total += len(str(content or "").split()) + 4
        return total


def generate(request: ChatRequest, default_max_tokens: int = 64) -> tuple[list[str], str]:
    """The completion's tokens and finish reason ("stop" or "length").

    Each prompt has a natural length of 16-63 tokens; `max_tokens` below that cuts it
    with finish_reason "length", as vLLM does.
    """
    seed = request.seed
    natural = 16 + seed % 48
    limit = request.max_tokens if request.max_tokens is not None else default_max_tokens
    n = min(natural, limit)
    tokens = [_VOCAB[(seed // 7 + i * 11) % len(_VOCAB)] for i in range(n)]
    return tokens, "length" if n < natural else "stop"


def _usage(request: ChatRequest, completion_tokens: int) -> dict[str, int]:
    prompt = request.prompt_tokens
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def chat_completion(request: ChatRequest, default_max_tokens: int = 64) -> dict[str, Any]:
    """A complete `chat.completion` object, shaped like vLLM's."""
    tokens, finish = generate(request, default_max_tokens)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(tokens), "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": _usage(request, len(tokens)),
    }


@dataclass(frozen=True)
class StreamSettings:
    """Pacing of streamed completions.

    `ttft_s`: delay before the first content chunk; `token_delay_s`: time per token after
    that; `tokens_per_chunk`: tokens per SSE event (speculative decoding emits several
    accepted tokens at once); `split`: "awkward" cuts each SSE event into PayloadParts
    of cycling small sizes (mid-UTF-8, mid-"data:"), "event" sends one part per event.
    `fail_after_tokens`: break the stream off after that many tokens with a
    ModelStreamError event (what SageMaker sends when the container dies mid-answer).
    """

    ttft_s: float = 0.0
    token_delay_s: float = 0.0
    tokens_per_chunk: int = 1
    split: Literal["awkward", "event"] = "awkward"
    default_max_tokens: int = 64
    fail_after_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.ttft_s < 0 or self.token_delay_s < 0:
            raise ValueError("ttft_s and token_delay_s must be >= 0")
        if self.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        if self.split not in ("awkward", "event"):
            raise ValueError("split must be 'awkward' or 'event'")


def _sse(doc: dict[str, Any] | str) -> bytes:
    data = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def sse_events(
    request: ChatRequest,
    settings: StreamSettings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_done: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """The SSE byte events of a streamed completion, paced in real time.

    One yielded item = one server write (one SSE event). `on_done(completion_tokens)`
    runs after the last token, before `[DONE]`.
    """
    tokens, finish = generate(request, settings.default_max_tokens)
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    if settings.ttft_s:
        sleep(settings.ttft_s)
    yield _sse(chunk({"role": "assistant", "content": ""}))
    step = settings.tokens_per_chunk
    for start in range(0, len(tokens), step):
        group = tokens[start : start + step]
        if settings.fail_after_tokens is not None and start >= settings.fail_after_tokens:
            return  # the emulated container dies: no finish chunk, no [DONE]
        if start and settings.token_delay_s:
            sleep(settings.token_delay_s * len(group))
        yield _sse(chunk({"content": "".join(group)}))
    yield _sse(chunk({}, finish))
    if request.include_usage:
        yield _sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
                "choices": [],
                "usage": _usage(request, len(tokens)),
            }
        )
    if on_done is not None:
        on_done(len(tokens))
    yield _sse("[DONE]")
