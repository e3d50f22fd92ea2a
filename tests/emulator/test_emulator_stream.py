"""The streaming endpoint emulator, read by botocore's own event-stream parser."""

from __future__ import annotations

import json
from binascii import crc32
from typing import Any

import boto3
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from botocore.exceptions import ClientError
from moto import mock_aws
from peagle_local.emulator import (
    ChatRequest,
    LocalAWS,
    MotoExtensions,
    StreamSettings,
    chat_completion,
    encode_message,
    payload_part,
    split_awkwardly,
    sse_events,
)

from peagle_deploy.streaming import SSEParser, iter_chat_chunks

MESSAGES = [{"role": "user", "content": "Write a haiku about speculative decoding."}]


def _endpoint(sm: Any, name: str = "ep") -> None:
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "x"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InstanceType": "ml.g7e.2xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName="c")


def _stream_parts(
    rt: Any, payload: dict[str, Any], name: str = "ep"
) -> tuple[dict[str, Any], list[bytes]]:
    resp = rt.invoke_endpoint_with_response_stream(
        EndpointName=name, Body=json.dumps(payload), ContentType="application/json"
    )
    parts = [event["PayloadPart"]["Bytes"] for event in resp["Body"]]
    return resp, parts


def test_encoded_messages_decode_with_botocore() -> None:
    buf = EventStreamBuffer()
    buf.add_data(payload_part("données 🚀".encode()) + payload_part(b"second"))
    messages = list(buf)
    assert [m.payload for m in messages] == ["données 🚀".encode(), b"second"]
    assert messages[0].headers == {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }
    corrupt = bytearray(encode_message({":event-type": "PayloadPart"}, b"abc"))
    corrupt[-6] ^= 0xFF  # flip a payload byte: the message CRC no longer matches
    bad = EventStreamBuffer()
    bad.add_data(bytes(corrupt))
    with pytest.raises(ChecksumMismatch):
        list(bad)
    assert crc32(b"") == 0  # sanity of the CRC primitive used


def test_split_awkwardly_covers_data_and_respects_sizes() -> None:
    data = bytes(range(256)) * 3
    pieces = list(split_awkwardly(data, (1, 3)))
    assert b"".join(pieces) == data
    assert [len(p) for p in pieces[:4]] == [1, 1, 2, 1]  # cuts at 1, 2 (forced), 4, 5
    text = "data: héllo\n\n".encode()
    cut = list(split_awkwardly(text, (100,)))
    assert cut == [b"da", b"ta: h\xc3", b"\xa9llo\n", b"\n"]


def test_generator_is_deterministic_and_honours_max_tokens() -> None:
    req = ChatRequest.parse(json.dumps({"messages": MESSAGES, "max_tokens": 5}))
    a = chat_completion(req)
    b = chat_completion(req)
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    assert a["usage"]["completion_tokens"] == 5
    assert a["choices"][0]["finish_reason"] == "length"
    free = chat_completion(
        ChatRequest.parse(json.dumps({"messages": MESSAGES, "max_tokens": 4096}))
    )
    assert free["choices"][0]["finish_reason"] == "stop"
    assert 16 <= free["usage"]["completion_tokens"] < 64


def test_sse_events_pacing_uses_ttft_then_token_delay() -> None:
    sleeps: list[float] = []
    req = ChatRequest.parse(json.dumps({"messages": MESSAGES, "max_tokens": 7, "stream": True}))
    settings = StreamSettings(ttft_s=0.5, token_delay_s=0.01, tokens_per_chunk=3)
    events = list(sse_events(req, settings, sleep=sleeps.append))
    assert sleeps == [0.5, pytest.approx(0.03), pytest.approx(0.01)]  # 7 tokens: 3 + 3 + 1
    parser = SSEParser()
    payloads = [p for e in events for p in parser.feed(e)]
    assert parser.done
    assert len(payloads) == 1 + 3 + 1  # role chunk, 3 content chunks, finish chunk


def test_stream_over_loopback_parsed_by_botocore(local_aws: LocalAWS) -> None:
    _endpoint(local_aws.client("sagemaker"))
    rt = local_aws.client("sagemaker-runtime")
    payload = {
        "messages": MESSAGES,
        "max_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.3,
    }
    resp, parts = _stream_parts(rt, payload)
    assert resp["ContentType"] == "text/event-stream"
    assert resp["InvokedProductionVariant"] == "AllTraffic"
    chunks = list(iter_chat_chunks(parts))
    text = "".join(c.text for c in chunks)
    expected = chat_completion(ChatRequest.parse(json.dumps(payload)))
    assert text == expected["choices"][0]["message"]["content"]
    assert chunks[-1].usage == {
        "prompt_tokens": expected["usage"]["prompt_tokens"],
        "total_tokens": expected["usage"]["total_tokens"],
        "completion_tokens": 12,
    }
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["length"]
    # The splits really are awkward: some parts are not valid UTF-8 on their own, and
    # some cut the "data:" prefix or the blank line between events.
    undecodable = 0
    for p in parts:
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable > 0
    assert any(p.endswith((b"d", b"da", b"dat")) for p in parts)
    assert any(p.endswith(b"\n") and not p.endswith(b"\n\n") for p in parts)


def test_stream_without_usage_and_split_per_event(local_aws: LocalAWS) -> None:
    _endpoint(local_aws.client("sagemaker"))
    local_aws.set_stream(split="event", tokens_per_chunk=4)
    rt = local_aws.client("sagemaker-runtime")
    _, parts = _stream_parts(rt, {"messages": MESSAGES, "max_tokens": 10, "stream": True})
    assert all(p.startswith(b"data: ") and p.endswith(b"\n\n") for p in parts)
    chunks = list(iter_chat_chunks(parts))
    assert all(c.usage is None for c in chunks)
    # role chunk, ceil(10/4)=3 content chunks, finish chunk, then [DONE] (not a chunk)
    assert len(chunks) == 5
    assert parts[-1] == b"data: [DONE]\n\n"


def test_stream_in_process_mock_aws() -> None:
    with mock_aws(), MotoExtensions():
        _endpoint(boto3.client("sagemaker", region_name="us-east-1"))
        rt = boto3.client("sagemaker-runtime", region_name="us-east-1")
        _, parts = _stream_parts(rt, {"messages": MESSAGES, "max_tokens": 12, "stream": True})
        assert sum(1 for c in iter_chat_chunks(parts) if c.text) == 12


def test_invoke_returns_chat_completion(local_aws: LocalAWS) -> None:
    _endpoint(local_aws.client("sagemaker"))
    rt = local_aws.client("sagemaker-runtime")
    resp = rt.invoke_endpoint(
        EndpointName="ep",
        ContentType="application/json",
        Body=json.dumps({"messages": MESSAGES, "max_tokens": 8}),
    )
    doc = json.loads(resp["Body"].read())
    assert doc["object"] == "chat.completion"
    assert doc["usage"]["completion_tokens"] == 8
    assert doc["choices"][0]["message"]["role"] == "assistant"


def test_runtime_errors(local_aws: LocalAWS) -> None:
    rt = local_aws.client("sagemaker-runtime")
    with pytest.raises(ClientError) as missing:
        _stream_parts(rt, {"messages": MESSAGES}, name="nope")
    assert missing.value.response["Error"]["Code"] == "ValidationError"
    assert "nope" in str(missing.value)
    _endpoint(local_aws.client("sagemaker"))
    with pytest.raises(ClientError) as bad:
        rt.invoke_endpoint(EndpointName="ep", Body=b"{not json", ContentType="application/json")
    assert bad.value.response["Error"]["Code"] == "ModelError"
    assert bad.value.response["OriginalStatusCode"] == 400  # type: ignore[typeddict-item]


def test_invoke_refused_while_creating(local_aws: LocalAWS) -> None:
    local_aws.script_endpoint("ep", creating_s=60.0)
    _endpoint(local_aws.client("sagemaker"))
    rt = local_aws.client("sagemaker-runtime")
    with pytest.raises(ClientError, match="not in service"):
        rt.invoke_endpoint(EndpointName="ep", Body=json.dumps({"messages": MESSAGES}))


def test_stream_breaks_off_with_model_stream_error(local_aws: LocalAWS) -> None:
    from botocore.exceptions import EventStreamError

    _endpoint(local_aws.client("sagemaker"))
    local_aws.set_stream(fail_after_tokens=4, tokens_per_chunk=2, split="event")
    rt = local_aws.client("sagemaker-runtime")
    resp = rt.invoke_endpoint_with_response_stream(
        EndpointName="ep", Body=json.dumps({"messages": MESSAGES, "max_tokens": 20})
    )
    parts: list[bytes] = []
    with pytest.raises(EventStreamError) as caught:
        for event in resp["Body"]:
            parts.append(event["PayloadPart"]["Bytes"])
    assert caught.value.response["Error"]["Code"] == "ModelStreamError"
    assert "broke off" in str(caught.value)
    assert sum(1 for c in iter_chat_chunks(parts) if c.text) == 2  # 4 tokens in 2 chunks
    local_aws.set_stream(fail_after_tokens=0)
    assert local_aws.stream.fail_after_tokens is None
