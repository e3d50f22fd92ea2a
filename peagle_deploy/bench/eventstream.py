"""PayloadPart bytes out of an InvokeEndpointWithResponseStream body, as it arrives.

The framing (`application/vnd.amazon.eventstream`) is decoded by botocore's own
`botocore.eventstream.EventStreamBuffer`: prelude, both CRC32 checks, headers, payload.
Network reads cut messages anywhere; the buffer keeps the partial message until the rest
arrives. Messages that are not PayloadPart events (a `ModelStreamError` or
`InternalStreamFailure` exception, an error message) are parsed by botocore's
`EventStreamJSONParser` and raised as botocore's `EventStreamError`, which is what a
boto3 caller iterating the response body sees.

The client decodes up to ~45k messages/s (benchmarks/bench_sagemaker_target.py), so the
per-message path is kept short, with no change of result: every PayloadPart carries the
same header bytes and botocore's pure-Python header parser was about 60 % of its
per-message cost, so parsed headers are memoised by their bytes; the loop calls the
buffer's `next()` directly and counts nothing per message (an incomplete message left
at the end is read from the buffer once). Together: 3x less decoding time per message.
"""

from __future__ import annotations

from typing import Any

from botocore.eventstream import EventStreamBuffer, EventStreamHeaderParser, EventStreamMessage
from botocore.exceptions import EventStreamError
from botocore.parsers import EventStreamJSONParser

OPERATION = "InvokeEndpointWithResponseStream"
_MEMO_LIMIT = 32  # distinct header blocks kept; a stream uses one or two


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
        self._payload_headers: dict[str, Any] | None = None

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
        buffer = self._buffer
        buffer.add_data(data)
        parts: list[bytes] = []
        append = parts.append
        usual = self._payload_headers
        # botocore's own next() (its __next__ only forwards to it); Any: botocore-stubs
        # types EventStreamMessage.prelude and .headers as int.
        next_message: Any = buffer.next
        try:
            while True:
                message = next_message()
                headers = message.headers
                if headers is usual:  # the memoised PayloadPart header block: no lookups
                    append(message.payload)
                elif headers.get(":message-type") == "event":
                    if headers.get(":event-type") == "PayloadPart":
                        append(message.payload)
                        usual = self._payload_headers = headers
                    # other event types are skipped, as boto3 skips events it does not model
                else:
                    raise self._error(message)
        except StopIteration:  # no complete message left
            return parts

    def leftover(self) -> int:
        """Bytes of an incomplete message still buffered (non-zero at the end = cut off)."""
        return len(self._buffer._data)

    def _error(self, message: EventStreamMessage) -> EventStreamError:
        parsed = EventStreamJSONParser().parse(message.to_response_dict(), self._shape)
        return EventStreamError(parsed, OPERATION)
