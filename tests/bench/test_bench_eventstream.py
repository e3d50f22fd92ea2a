"""PayloadStream: botocore's event-stream decoder, fed the way the network cuts a body."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch
from botocore.exceptions import EventStreamError
from peagle_local.emulator.eventstream import encode_message, model_stream_error, payload_part

from peagle_deploy.bench.eventstream import HeaderMemo, PayloadStream

PAYLOADS = [
    b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n',
    'data: {"choices": [{"delta": {"content": "caf\u00e9 \u2603"}}]}\n\n'.encode(),
    b"",  # an empty PayloadPart is legal
    b'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\ndata: [DONE]\n\n',
]
BODY = b"".join(payload_part(p) for p in PAYLOADS)


def _feed_in_pieces(cuts: list[int]) -> tuple[list[bytes], PayloadStream]:
    stream = PayloadStream()
    got: list[bytes] = []
    start = 0
    for cut in [*cuts, len(BODY)]:
        got += stream.feed(BODY[start:cut])
        start = cut
    return got, stream


def test_every_single_cut_gives_the_same_payloads() -> None:
    # One cut at every byte offset of the body: inside preludes, headers, payloads, CRCs.
    for cut in range(len(BODY) + 1):
        got, stream = _feed_in_pieces([cut])
        assert got == PAYLOADS, cut
        assert stream.leftover() == 0


def test_byte_by_byte_and_every_pair_of_cuts_in_the_first_message() -> None:
    got, stream = _feed_in_pieces(list(range(1, len(BODY))))
    assert got == PAYLOADS
    assert stream.leftover() == 0
    first = len(payload_part(PAYLOADS[0]))
    for a in range(1, first):
        for b in range(a, first + 5):
            assert _feed_in_pieces([a, b])[0] == PAYLOADS


def test_payloads_come_out_as_soon_as_their_message_is_complete() -> None:
    stream = PayloadStream()
    first = payload_part(PAYLOADS[0])
    assert stream.feed(first[:-1]) == []
    assert stream.leftover() == len(first) - 1
    assert stream.feed(first[-1:]) == [PAYLOADS[0]]
    assert stream.leftover() == 0


def test_header_blocks_are_parsed_once_per_distinct_block() -> None:
    memo = HeaderMemo()
    streams = [PayloadStream(headers=memo), PayloadStream(headers=memo)]
    for i in range(50):
        assert streams[i % 2].feed(payload_part(b"data: {}\n\n")) == [b"data: {}\n\n"]
    # botocore parsed the PayloadPart headers once; 49 messages of two streams reused them.
    assert memo.parsed == 1
    assert streams[0].header_parses == 1


def _body_shape() -> object:
    """The response Body's event-stream shape, from botocore's service model."""
    import boto3

    from peagle_deploy.bench.invoke_call import OPERATION

    return (
        boto3.Session(region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        .client("sagemaker-runtime")
        .meta.service_model.operation_model(OPERATION)
        .output_shape.members["Body"]
    )


def test_a_model_stream_error_is_botocores_event_stream_error() -> None:
    stream = PayloadStream(_body_shape())
    assert stream.feed(payload_part(PAYLOADS[0])) == [PAYLOADS[0]]
    with pytest.raises(EventStreamError) as err:
        stream.feed(model_stream_error("Model stream broke off", "StreamBroken"))
    assert str(err.value) == (
        "An error occurred (ModelStreamError) when calling the "
        "InvokeEndpointWithResponseStream operation: Model stream broke off"
    )


def test_unknown_event_types_are_skipped_and_corrupt_framing_is_refused() -> None:
    other = encode_message({":message-type": "event", ":event-type": "SomethingNew"}, b"x")
    stream = PayloadStream()
    assert stream.feed(other + payload_part(b"a")) == [b"a"]
    corrupt = bytearray(payload_part(json.dumps({"k": 1}).encode()))
    corrupt[-1] ^= 0xFF  # message CRC
    with pytest.raises(ChecksumMismatch):
        PayloadStream().feed(bytes(corrupt))


def _botocore_payloads(body: bytes) -> list[bytes]:
    """The reference: botocore's EventStreamBuffer alone, PayloadPart events only."""
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(body)
    return [
        m.payload
        for m in buffer
        if m.headers.get(":message-type") == "event"
        and m.headers.get(":event-type") == "PayloadPart"
    ]


def test_random_streams_cut_at_random_give_botocores_payloads() -> None:
    import random

    rng = random.Random(20261123)
    for _ in range(40):
        messages = []
        for _ in range(rng.randint(1, 60)):
            payload = rng.randbytes(rng.choice([0, 1, 7, 80, 300, 5000]))
            if rng.random() < 0.1:
                messages.append(
                    encode_message({":message-type": "event", ":event-type": "X"}, payload)
                )
            else:
                messages.append(payload_part(payload))
        body = b"".join(messages)
        cuts = sorted(rng.sample(range(len(body) + 1), k=min(len(body) + 1, rng.randint(0, 30))))
        stream, got, start = PayloadStream(), [], 0
        for cut in [*cuts, len(body)]:
            got += stream.feed(body[start:cut])
            start = cut
        assert got == _botocore_payloads(body)
        assert stream.leftover() == 0


def test_botocore_decodes_only_the_first_payload_part(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []
    original = PayloadStream._decode_with_botocore

    def counting(self: PayloadStream, data: bytes) -> list[bytes]:
        decoded.append(len(data))
        return original(self, data)

    monkeypatch.setattr(PayloadStream, "_decode_with_botocore", counting)
    stream = PayloadStream()
    body = b"".join(payload_part(f"data: {i}\n\n".encode()) for i in range(50))
    assert len(stream.feed(body)) == 50
    assert decoded == [len(payload_part(b"data: 0\n\n"))]


@pytest.mark.parametrize("where", ["message crc", "prelude crc", "payload"])
def test_corruption_after_the_fast_path_started_is_botocores_error(where: str) -> None:
    first = payload_part(b"data: a\n\n")
    bad = bytearray(payload_part(b"data: b\n\n"))
    bad[{"message crc": -1, "prelude crc": 9, "payload": -6}[where]] ^= 0x01
    stream = PayloadStream()
    assert stream.feed(first + first) == [b"data: a\n\n"] * 2
    with pytest.raises(ChecksumMismatch):
        stream.feed(bytes(bad) + first)


def test_a_message_larger_than_the_fast_path_bound_is_decoded_by_botocore() -> None:
    from peagle_deploy.bench import eventstream

    big = b"x" * (eventstream._FAST_MAX + 10)
    body = payload_part(b"a") + payload_part(big) + payload_part(b"b")
    stream = PayloadStream()
    got: list[bytes] = []
    for start in range(0, len(body), 65536):
        got += stream.feed(body[start : start + 65536])
    assert got == [b"a", big, b"b"]
    assert stream.leftover() == 0


def test_a_model_stream_error_after_fast_path_payloads_is_raised() -> None:
    stream = PayloadStream(_body_shape())
    parts = b"".join(payload_part(b"data: x\n\n") for _ in range(5))
    with pytest.raises(EventStreamError, match="broke off"):
        stream.feed(parts + model_stream_error("broke off"))
