"""Encoder for the AWS event-stream binary framing (`application/vnd.amazon.eventstream`).

SageMaker's InvokeEndpointWithResponseStream answers with this framing; botocore's
`botocore.eventstream.EventStreamBuffer` decodes it. The emulator encodes with this
module so that clients under test run botocore's real decoder, CRC checks included.

Message layout (big-endian): total length (4) | headers length (4) | prelude CRC32 (4)
| headers | payload | message CRC32 (4). Each header: name length (1) | name |
value type (1, 7 = string) | value length (2) | value.
"""

from __future__ import annotations

import struct
from binascii import crc32
from collections.abc import Iterator, Mapping, Sequence

_STRING_HEADER = 7
PAYLOAD_PART_HEADERS: Mapping[str, str] = {
    ":event-type": "PayloadPart",
    ":content-type": "application/octet-stream",
    ":message-type": "event",
}
# Part sizes the "awkward" splitter cycles through. Small, mutually prime sizes so that,
# over a stream, boundaries fall inside "data:", inside "\n\n" and inside multi-byte
# UTF-8 characters.
AWKWARD_PART_SIZES: tuple[int, ...] = (1, 5, 2, 11, 3, 17, 7, 2, 13)


def _encode_headers(headers: Mapping[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        raw_value = value.encode("utf-8")
        if len(raw_name) > 255 or len(raw_value) > 0xFFFF:
            raise ValueError(f"event-stream header {name!r} is too long")
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING_HEADER, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One complete event-stream message with both CRCs."""
    raw_headers = _encode_headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    message = prelude + struct.pack(">I", crc32(prelude) & 0xFFFFFFFF) + raw_headers + payload
    return message + struct.pack(">I", crc32(message) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    """A `PayloadPart` event carrying `data` (what SageMaker sends per container write)."""
    return encode_message(PAYLOAD_PART_HEADERS, data)


def model_stream_error(message: str, error_code: str = "ModelInvocationTimeExceeded") -> bytes:
    """A `ModelStreamError` exception event, as SageMaker sends when the model breaks off."""
    import json

    headers = {
        ":exception-type": "ModelStreamError",
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    body = json.dumps({"Message": message, "ErrorCode": error_code}).encode("utf-8")
    return encode_message(headers, body)


def split_awkwardly(data: bytes, sizes: Sequence[int] = AWKWARD_PART_SIZES) -> Iterator[bytes]:
    """Cut `data` into small pieces, ignoring every text boundary on purpose.

    Cuts fall at cycling `sizes`, and in any case inside the first multi-byte UTF-8
    character, after the second byte ("da|ta:") and between the two closing newlines,
    so every SSE event exercises the reassembly a client must do.
    """
    cuts: set[int] = set()
    pos = 0
    i = 0
    while pos < len(data):
        pos += max(1, sizes[i % len(sizes)])
        cuts.add(pos)
        i += 1
    cuts.update((2, len(data) - 1))
    lead = next((j for j, b in enumerate(data) if b >= 0xC0), None)
    if lead is not None:
        cuts.add(lead + 1)
    start = 0
    for cut in sorted(c for c in cuts if 0 < c < len(data)):
        yield data[start:cut]
        start = cut
    if start < len(data):
        yield data[start:]
