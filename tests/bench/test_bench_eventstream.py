"""PayloadStream: botocore's event-stream decoder, fed the way the network cuts a body."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch
from botocore.exceptions import EventStreamError

from peagle_deploy.bench.eventstream import HeaderMemo, PayloadStream
from peagle_deploy.emulator.eventstream import encode_message, model_stream_error, payload_part

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


def test_a_model_stream_error_is_botocores_event_stream_error() -> None:
    import boto3

    from peagle_deploy.bench.invoke_call import OPERATION

    shape = (
        boto3.Session(region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        .client("sagemaker-runtime")
        .meta.service_model.operation_model(OPERATION)
        .output_shape.members["Body"]
    )
    stream = PayloadStream(shape)
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
