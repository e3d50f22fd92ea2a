"""The shared SSE parser gives the same events however a stream is split.

The bench reads whole-event chunks through SSEParser's no-copy fast path; SageMaker
PayloadParts and TCP reads split anywhere and take the buffered path. Both must agree.
"""

from __future__ import annotations

import random

import pytest

from peagle_deploy.streaming import SSEParser

STREAMS = [
    b'data: {"a": 1}\n\ndata: {"b": "\xc3\xa9t\xc3\xa9"}\n\ndata: [DONE]\n\n',
    b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\n\r\n',
    b': ping\n\ndata: {"a": 1}\n\n\n\ndata: {"c": 3}\n\n',
    b'event: x\ndata: {"a":\ndata: 1}\n\ndata: {"z": 0}\n\n',
    b'data:{"nospace": true}\n\n\ndata: {"after": "blank"}\n\n',
]


def _feed(parts: list[bytes]) -> tuple[list[str], bool]:
    parser = SSEParser()
    events: list[str] = []
    for part in parts:
        events += parser.feed(part)
    events += parser.flush()
    return events, parser.done


def _split(stream: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(stream)), k=min(6, len(stream) - 1)))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


@pytest.mark.parametrize("stream", STREAMS)
def test_whole_events_and_random_splits_agree(stream: bytes) -> None:
    whole = _feed([stream])
    one_by_one = _feed([stream[i : i + 1] for i in range(len(stream))])
    assert whole == one_by_one
    rng = random.Random(7)
    for _ in range(50):
        assert _feed(_split(stream, rng)) == whole
    per_event = [e + b"\n\n" for e in stream.split(b"\n\n") if e]
    assert _feed(per_event)[0] == whole[0]
