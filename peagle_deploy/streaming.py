"""Incremental parsing of OpenAI-style server-sent events.

vLLM streams chat completions as SSE (`data: {...}\\n\\n`, ending with `data: [DONE]`).
Through SageMaker's InvokeEndpointWithResponseStream the bytes arrive in PayloadPart
chunks whose boundaries fall anywhere, even inside a UTF-8 character, so the parser
buffers raw bytes and only decodes complete events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"


@dataclass(frozen=True)
class ChatChunk:
    """What one `chat.completion.chunk` event carries that callers use."""

    text: str
    """Concatenated `delta.content` of all choices (usually one)."""
    finish_reason: str | None
    usage: dict[str, Any] | None
    """The server's token accounting, present on the final chunk with include_usage."""
    raw: dict[str, Any]


class SSEDecodeError(ValueError):
    """An event whose data is not the JSON the OpenAI protocol promises."""


@dataclass
class SSEParser:
    """Feed byte chunks, get complete `data:` payloads (as strings) back."""

    _buffer: bytearray = field(default_factory=bytearray)
    done: bool = False

    def feed(self, chunk: bytes) -> list[str]:
        if not self._buffer and chunk.endswith(b"\n\n") and b"\r" not in chunk:
            # Whole events and nothing buffered (the usual case): no buffer copies.
            return self._events(chunk[:-2].split(b"\n\n"))
        self._buffer.extend(chunk)
        # Normalise CRLF so the event separator is always a blank line of "\n\n".
        if b"\r" in self._buffer:
            self._buffer[:] = self._buffer.replace(b"\r\n", b"\n")
        raws: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                break
            raws.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 2]
        return self._events(raws)

    def _events(self, raws: list[bytes]) -> list[str]:
        """`data:` payloads of complete raw events; `[DONE]` only sets `done`."""
        events: list[str] = []
        for raw in raws:
            data = _event_data(raw.decode("utf-8"))
            if data is None:
                continue
            if data == DONE:
                self.done = True
                continue
            events.append(data)
        return events

    def flush(self) -> list[str]:
        """Whatever complete event is left when the stream ends without a blank line."""
        if not self._buffer.strip():
            return []
        tail = bytes(self._buffer)
        self._buffer.clear()
        return self._events([tail])


def _event_data(event: str) -> str | None:
    if event.startswith("data:") and "\n" not in event:
        return event[5:].lstrip(" ")  # the usual one-line event, without the split
    lines = [line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:")]
    return "\n".join(lines) if lines else None


def parse_chat_chunk(data: str) -> ChatChunk:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise SSEDecodeError(f"stream event is not JSON: {data[:120]!r}") from exc
    if not isinstance(doc, dict):
        raise SSEDecodeError(f"stream event is not a JSON object: {data[:120]!r}")
    if "error" in doc and "choices" not in doc:
        raise SSEDecodeError(f"server sent an error event: {doc['error']}")
    texts: list[str] = []
    finish: str | None = None
    for choice in doc.get("choices") or []:
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if content is None:
            content = choice.get("text")  # completions-style stream
        if content:
            texts.append(content)
        finish = choice.get("finish_reason") or finish
    return ChatChunk("".join(texts), finish, doc.get("usage"), doc)


def iter_chat_chunks(byte_chunks: Iterable[bytes]) -> Iterator[ChatChunk]:
    """Chat chunks from any iterable of byte chunks, however they were split."""
    parser = SSEParser()
    for part in byte_chunks:
        for data in parser.feed(part):
            yield parse_chat_chunk(data)
    for data in parser.flush():
        yield parse_chat_chunk(data)
