"""PayloadPart bytes out of an InvokeEndpointWithResponseStream body, as it arrives.

The framing (`application/vnd.amazon.eventstream`) is decoded by botocore's own
`botocore.eventstream.EventStreamBuffer`: prelude, both CRC32 checks, headers, payload.
Network reads cut messages anywhere; the stream keeps the partial message until the rest
arrives. Messages that are not PayloadPart events (a `ModelStreamError` or
`InternalStreamFailure` exception, an error message) are parsed by botocore's
`EventStreamJSONParser` and raised as botocore's `EventStreamError`, which is what a
boto3 caller iterating the response body sees.

The client decodes up to ~45k messages/s (benchmarks/bench_sagemaker_target.py) on one
core that also runs HTTP, SSE and JSON, so the per-message path is kept short without
changing any result. botocore decodes the first message of a stream and every message
that is not byte-for-byte a PayloadPart of the same header block; once it has decoded
one PayloadPart, later messages whose header bytes are identical to that block take a
fast path that does the same checks (prelude CRC32, message CRC32, lengths) with C-level
`zlib.crc32` on a memoryview, instead of botocore's ten Python calls and a copy of the
buffer per message: 2.4x less decoding time per message. Any framing the fast path does
not accept as valid (a bad prelude CRC, a length past its bound) hands the rest of the
stream to botocore, so errors are botocore's own exceptions. botocore's header parser
is memoised per header block, which serves the other messages.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from botocore.eventstream import EventStreamBuffer, EventStreamHeaderParser, EventStreamMessage
from botocore.exceptions import EventStreamError
from botocore.parsers import EventStreamJSONParser

OPERATION = "InvokeEndpointWithResponseStream"
_MEMO_LIMIT = 32  # distinct header blocks kept; a stream uses one or two
_PRELUDE = struct.Struct("!III")  # total length, headers length, prelude CRC32
_PRELUDE_LEN = 12
_FAST_MAX = 1 << 20
"""Largest message the fast path takes; larger ones (legal up to botocore's 24 MiB
payload bound) are left to botocore, which enforces its limits."""


class HeaderMemo(EventStreamHeaderParser):
    """botocore's header parser, remembering the result per header block.

    Content-addressed, so one memo can serve every stream of a target. The dict is
    shared between messages with the same header bytes: readers must not mutate it
    (nothing here does).
    """

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[bytes, dict[str, Any]] = {}
        self.parsed = 0
        """How many header blocks were really parsed (tests check the memo works)."""

    def parse(self, data: bytes) -> dict[str, Any]:
        headers = self._memo.get(data)
        if headers is None:
            self.parsed += 1
            headers = super().parse(data)
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[bytes(data)] = headers
        return headers


class _Buffer(EventStreamBuffer):
    _data: bytes  # botocore's buffered, not yet decoded bytes

    def __init__(self, headers: HeaderMemo) -> None:
        super().__init__()
        # botocore keeps its header parser in this attribute; a rename would leave the
        # plain parser in place (same result, slower) and fail tests/bench/test_bench_eventstream.
        self._header_parser = headers


class PayloadStream:
    """Feed raw body bytes; get the PayloadPart payloads completed by them.

    `event_stream_shape` is the operation's output `Body` shape from botocore's service
    model; it is needed only to parse error messages the way boto3 does. `headers` is
    a HeaderMemo to share between the streams of one target.
    """

    def __init__(self, event_stream_shape: Any = None, headers: HeaderMemo | None = None) -> None:
        self._buffer = _Buffer(headers or HeaderMemo())
        self._shape = event_stream_shape
        self._data = b""
        """Bytes of an incomplete message (the fast path's buffer)."""
        self._payload_block: bytes | None = None
        """The header bytes of a message botocore decoded as a PayloadPart event."""
        self._botocore_only = False
        """Set once framing looked wrong: from then on botocore decodes everything."""

    @property
    def header_parses(self) -> int:
        """Header blocks botocore really parsed (the rest came from the memo)."""
        parser = self._buffer._header_parser
        return parser.parsed if isinstance(parser, HeaderMemo) else -1

    def feed(self, data: bytes) -> list[bytes]:
        """Payloads of the PayloadPart events completed by `data` (may be none).

        Raises botocore's EventStreamError for an exception/error message and botocore's
        `ParserError` subclasses (ChecksumMismatch, ...) for corrupt framing.
        """
        if self._botocore_only:
            return self._decode_with_botocore(data)
        buf = self._data + data if self._data else data
        size = len(buf)
        view = memoryview(buf)
        unpack = _PRELUDE.unpack_from
        crc32 = zlib.crc32
        block = self._payload_block
        parts: list[bytes] = []
        off = 0
        while size - off >= _PRELUDE_LEN:
            total, header_len, prelude_crc = unpack(buf, off)
            if crc32(view[off : off + 8]) != prelude_crc or not (
                header_len + 16 <= total <= _FAST_MAX
            ):
                self._data = b""
                self._botocore_only = True
                return parts + self._decode_with_botocore(buf[off:])
            end = off + total
            if end > size:
                break
            body = off + _PRELUDE_LEN + header_len
            if (
                block is not None
                and header_len == len(block)
                and view[off + _PRELUDE_LEN : body] == block
                and crc32(view[off + 8 : end - 4], prelude_crc)
                == int.from_bytes(view[end - 4 : end], "big")
            ):
                parts.append(buf[body : end - 4])
            else:  # the first message, another event, an error, a bad message CRC
                decoded = self._decode_with_botocore(buf[off:end])
                if decoded and block is None:  # botocore read this one message as a PayloadPart
                    block = self._payload_block = bytes(view[off + _PRELUDE_LEN : body])
                parts += decoded
            off = end
        self._data = buf[off:]
        return parts

    def _decode_with_botocore(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer.add_data(data)
        parts: list[bytes] = []
        # botocore's own next() (its __next__ only forwards to it); Any: botocore-stubs
        # types EventStreamMessage.prelude and .headers as int.
        next_message: Any = buffer.next
        try:
            while True:
                message = next_message()
                headers = message.headers
                if headers.get(":message-type") == "event":
                    if headers.get(":event-type") == "PayloadPart":
                        parts.append(message.payload)
                    # other event types are skipped, as boto3 skips events it does not model
                else:
                    raise self._error(message)
        except StopIteration:  # no complete message left
            return parts

    def leftover(self) -> int:
        """Bytes of an incomplete message still buffered (non-zero at the end = cut off)."""
        return len(self._data) + len(self._buffer._data)

    def _error(self, message: EventStreamMessage) -> EventStreamError:
        parsed = EventStreamJSONParser().parse(message.to_response_dict(), self._shape)
        return EventStreamError(parsed, OPERATION)
