"""PayloadPart bytes out of an InvokeEndpointWithResponseStream body, as it arrives.

The framing (`application/vnd.amazon.eventstream`) is decoded by botocore's own
`botocore.eventstream.EventStreamBuffer`: prelude, both CRC32 checks, headers, payload.
Network reads cut messages anywhere; the buffer keeps the partial message until the rest
arrives. Messages that are not PayloadPart events (a `ModelStreamError` or
`InternalStreamFailure` exception, an error message) are parsed by botocore's
`EventStreamJSONParser` and raised as botocore's `EventStreamError`, which is what a
boto3 caller iterating the response body sees.

One speed-up, no change of result: every PayloadPart of a stream carries the same header
bytes, and botocore's pure-Python header parser is about 60 % of its per-message cost
(benchmarks/bench_sagemaker_target.py runs at ~50k messages/s), so parsed headers are
memoised by their bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

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
        self._fed = 0
        self._consumed = 0

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
        self._fed += len(data)
        parts: list[bytes] = []
        usual = self._payload_headers
        # Any: botocore-stubs types EventStreamMessage.prelude and .headers as int.
        for message in cast("Iterator[Any]", buffer):
            self._consumed += message.prelude.total_length
            headers = message.headers
            if headers is usual:  # the memoised PayloadPart header block: no lookups
                parts.append(message.payload)
            elif headers.get(":message-type") == "event":
                if headers.get(":event-type") == "PayloadPart":
                    parts.append(message.payload)
                    usual = self._payload_headers = headers
                # any other event type is skipped, as boto3 skips events it does not model
            else:
                raise self._error(message)
        return parts

    def leftover(self) -> int:
        """Bytes of an incomplete message still buffered (non-zero at the end = cut off)."""
        return self._fed - self._consumed

    def _error(self, message: EventStreamMessage) -> EventStreamError:
        parsed = EventStreamJSONParser().parse(message.to_response_dict(), self._shape)
        return EventStreamError(parsed, OPERATION)
