"""The loopback server's SageMaker face and its TTFT truth (a stand-in, tested itself)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from peagle_local.emulator.loopback import (
    TTFT_PATH,
    LoopbackConfig,
    LoopbackServer,
    sagemaker_runtime_env,
    serve_in_thread,
)

from peagle_deploy.bench import (
    BenchSettings,
    OpenAITarget,
    SageMakerTarget,
    SweepConfig,
    run_sweep,
)
from peagle_deploy.bench.datasets import Dataset

TINY = Dataset("tiny", tuple([[{"role": "user", "content": f"q {i}"}] for i in range(3)]))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with serve_in_thread(LoopbackConfig(ttft_s=0.01, fail_every=4)) as srv:
        yield srv


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, server: LoopbackServer) -> None:
    for name, value in sagemaker_runtime_env(_root(server)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def _root(server: LoopbackServer) -> str:
    return server.url.removesuffix("/v1")


def test_sagemaker_route_streams_payload_parts_and_fails_as_sagemaker(
    server: LoopbackServer, aws_env: None
) -> None:
    target = SageMakerTarget("loopback", region="us-west-2", logs_delay_s=0)
    config = SweepConfig(
        settings=BenchSettings(concurrency=[2], num_prompts=8, warmup=0, max_tokens=5),
        progress=False,
    )
    d = run_sweep(target, config, dataset=TINY).levels[0].to_dict()
    assert d["completed"] == 6 and d["total_output_tokens"] == 6 * 5
    (reason,) = d["errors"]
    assert d["errors"][reason] == 2
    assert reason.startswith("ModelError: An error occurred (ModelError) when calling the ")
    assert "Received server error (500) from primary" in reason


def test_sagemaker_route_wants_a_sigv4_signature(server: LoopbackServer) -> None:
    request = urllib.request.Request(
        _root(server) + "/endpoints/x/invocations-response-stream",
        data=b'{"messages": []}',
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 403
    assert err.value.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"


def _ttfts(server: LoopbackServer) -> dict[str, Any]:
    with urllib.request.urlopen(_root(server) + TTFT_PATH, timeout=10) as resp:
        doc: dict[str, Any] = json.load(resp)
    return doc


def test_ttft_truth_is_what_the_server_produced_and_is_reset(
    server: LoopbackServer, aws_env: None
) -> None:
    assert _ttfts(server) == {"count": 0, "median_ms": None}
    target = SageMakerTarget("loopback", region="us-west-2", logs_delay_s=0)
    config = SweepConfig(
        settings=BenchSettings(concurrency=[1], num_prompts=3, warmup=0, max_tokens=2),
        progress=False,
    )
    level = run_sweep(target, config, dataset=TINY).levels[0].to_dict()
    truth = _ttfts(server)
    assert truth["count"] == 3  # the failed 4th request never got a first chunk
    assert 10.0 <= truth["median_ms"] <= level["median_ttft_ms"]
    assert _ttfts(server)["count"] == 0


def test_top_logprobs_make_events_heavier_not_different() -> None:
    with serve_in_thread(LoopbackConfig(top_logprobs=3, tokens_per_chunk=2)) as srv:
        body = json.dumps(
            {"messages": [{"role": "user", "content": "q"}], "max_tokens": 4, "stream": True}
        ).encode()
        request = urllib.request.Request(srv.url + "/chat/completions", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            events = [line[6:] for line in resp.read().decode().split("\n") if line[:6] == "data: "]
        docs = [json.loads(e) for e in events if e != "[DONE]"]
        tokens = [
            d["choices"][0]
            for d in docs
            if d["choices"] and d["choices"][0]["delta"].get("content")
        ]
        assert len(tokens) == 2
        content = tokens[0]["logprobs"]["content"]
        assert len(content) == 2  # one entry per token of the event
        assert [len(c["top_logprobs"]) for c in content] == [3, 3]
        assert content[0]["token"] == " x" and content[0]["bytes"] == [32, 120]
        config = SweepConfig(
            settings=BenchSettings(concurrency=[2], num_prompts=4, warmup=0, max_tokens=4),
            progress=False,
        )
        d = run_sweep(OpenAITarget(srv.url), config, dataset=TINY).levels[0].to_dict()
        assert d["completed"] == 4 and d["total_output_tokens"] == 16
