"""One streamed chat completion -> one RequestOutput, the same way for every target.

Both targets send the same streaming chat-completion request (`chat_payload`) and feed
each `data:` payload, with its arrival time, to a StreamAccumulator. Both ask for
`stream_options.include_usage` and take the output token count from the server's
usage, never from counting chunks.
"""

from __future__ import annotations

import json
from typing import Any

from peagle_deploy.bench.metrics import RequestOutput
from peagle_deploy.streaming import parse_chat_chunk

_loads = json.loads
REQUEST_TIMEOUT_S = 600.0
"""Default seconds before one request counts as failed (both targets, `--request-timeout`)."""
LOGS_DELAY_S = 20.0
"""Default wait for the container's metric lines in CloudWatch Logs (`--logs-delay`)."""
ERROR_BODY_LIMIT = 64 << 10
"""Most bytes either target reads of an answer that is not a stream (an HTTP error, the
model list): any real error document fits many times over (SageMaker's and vLLM's are a
few hundred bytes), and a server that answers 400 with an endless body costs this much
instead of memory without bound (benchmarks/bench_error_body.py measures it)."""
METRICS_BODY_LIMIT = 16 << 20
"""Most bytes of vLLM's /metrics page read per scrape (a few hundred KB in practice)."""
NO_USAGE = "no usage in stream (the server must honour stream_options.include_usage)"
NO_TOKENS = "stream ended without any choices event"


class StreamAccumulator:
    """Turns timed SSE payloads of one request into a RequestOutput (vLLM's rules)."""

    __slots__ = ("_last", "_out", "_started", "_usage")

    def __init__(self, start_time: float) -> None:
        self._out = RequestOutput(start_time=start_time)
        self._last = start_time
        self._started = False
        self._usage: dict[str, Any] | None = None

    def event(self, data: str, arrival: float) -> None:
        """One `data:` payload that arrived at `arrival` (perf_counter seconds).

        Only two facts matter here: does the event carry choices, and usage. The
        ordinary event is read with one json.loads; anything unusual (not an object,
        an error event) goes through `parse_chat_chunk`, which raises the shared
        SSEDecodeError. This keeps the per-event cost at about vLLM's, which matters
        at 100k events/s (benchmarks/bench_harness.py).
        """
        try:
            doc = _loads(data)
        except ValueError:
            doc = None
        if type(doc) is not dict or ("error" in doc and "choices" not in doc):
            doc = parse_chat_chunk(data).raw  # raises SSEDecodeError with the details
        if doc.get("choices"):
            out = self._out
            if not self._started:
                self._started = True
                out.ttft = arrival - out.start_time
            else:
                out.itl.append(arrival - self._last)
            self._last = arrival
        usage = doc.get("usage")
        if usage and isinstance(usage, dict):
            self._usage = usage

    def fail(self, error: str) -> RequestOutput:
        self._out.success = False
        self._out.error = error
        self._out.latency = self._last - self._out.start_time
        return self._out

    def finish(self) -> RequestOutput:
        out = self._out
        out.latency = self._last - out.start_time
        if not self._started:
            return self.fail(NO_TOKENS)
        usage = self._usage
        tokens = usage.get("completion_tokens") if usage else None
        if not isinstance(tokens, int):
            return self.fail(NO_USAGE)
        out.output_tokens = tokens
        prompt = usage.get("prompt_tokens") if usage else None
        out.prompt_tokens = prompt if isinstance(prompt, int) else None
        out.success = True
        return out


def chat_payload(
    messages: list[dict[str, Any]],
    max_tokens: int,
    temperature: float,
    model: str | None,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The streaming chat-completion request both targets send."""
    payload: dict[str, Any] = {}
    if model:
        payload["model"] = model
    payload.update(
        {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    if extra_body:
        payload.update(extra_body)
    return payload


async def read_capped(resp: Any, limit: int = ERROR_BODY_LIMIT) -> tuple[bytes, bool]:
    """At most `limit` bytes of an aiohttp response's body, and whether there was more.

    When there was more, the response is closed: its connection is dropped rather than
    drained, so the rest is never read (and never waited for).
    """
    content = resp.content
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await content.read(limit + 1 - size)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    resp.close()
    return b"".join(chunks)[:limit], True
