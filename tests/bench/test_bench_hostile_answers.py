"""Hostile answers to `peagle bench`: an endpoint that answers 400 with an endless body.

Against a real HTTP server on loopback (`endless_server`), both targets must read at most
`ERROR_BODY_LIMIT` of an error body and drop the connection: the request fails at once
with the status, instead of buffering until --request-timeout (1 GB of RSS in 4 s, before
the cap). What the server managed to write before the client hung up bounds what the
client could have buffered (the cap plus the kernel's socket buffers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from endless_server import EndlessErrorServer

from peagle_deploy.bench import OpenAITarget, SageMakerTarget
from peagle_deploy.bench.stream import ERROR_BODY_LIMIT
from peagle_deploy.cli.app import main

HANG_GUARD_S = 30.0
"""--request-timeout of every request here: reached only when the body is buffered."""
SENT_BOUND = 32 << 20
"""Far above the cap plus loopback socket buffers; far below what 30 s of buffering reads."""
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[EndlessErrorServer]:
    with EndlessErrorServer() as srv:
        yield srv


async def _one_request(target: Any) -> Any:
    await target.start(1)
    try:
        return await target.request(MESSAGES, 8, 0.0)
    finally:
        await target.close()


def test_url_target_reads_a_bounded_part_of_an_endless_error(server: EndlessErrorServer) -> None:
    target = OpenAITarget(server.url + "/v1", model="m", request_timeout_s=HANG_GUARD_S)
    out = asyncio.run(_one_request(target))
    assert not out.success
    assert out.error.startswith('HTTP 400: {"message": "xxx'), out.error[:80]
    assert len(out.error) < 300
    assert server.wait_ended(1, HANG_GUARD_S)
    assert ERROR_BODY_LIMIT <= server.sent[0] < SENT_BOUND, server.sent


def test_sagemaker_target_reads_a_bounded_part_of_an_endless_error(
    server: EndlessErrorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    target = SageMakerTarget(
        "ep", region="us-east-1", endpoint_url=server.url, request_timeout_s=HANG_GUARD_S
    )
    out = asyncio.run(_one_request(target))
    assert not out.success
    # boto3's wording for an error it cannot parse: the status is the code
    assert "(400)" in out.error and "InvokeEndpointWithResponseStream" in out.error, out.error
    assert "timed out" not in out.error
    assert server.wait_ended(1, HANG_GUARD_S)
    assert server.sent[0] < SENT_BOUND, server.sent


def test_the_cli_fails_at_once_with_the_status(
    server: EndlessErrorServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["bench", "--url", server.url + "/v1", "-c", "1", "-n", "2", "--warmup", "0",
         "--request-timeout", str(HANG_GUARD_S), "--model", "m"]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 1, err
    assert "2 failed: HTTP 400" in err and "no request completed" in err
    assert "timed out" not in err
    assert server.wait_ended(2, HANG_GUARD_S)
    assert max(server.sent) < SENT_BOUND, server.sent


def test_the_model_lookup_reads_a_bounded_part_too(
    server: EndlessErrorServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["bench", "--url", server.url + "/v1", "-c", "1", "-n", "1",
         "--request-timeout", str(HANG_GUARD_S)]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 1, err
    assert "/v1/models answered HTTP 400 without a model" in err and "pass --model" in err
    assert server.wait_ended(1, HANG_GUARD_S)
    assert server.sent[0] < SENT_BOUND, server.sent
