"""The closed-loop runner and the URL target, against the loopback server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from peagle_local.emulator.loopback import LoopbackConfig, LoopbackServer

from peagle_deploy.bench import (
    BenchSettings,
    OpenAITarget,
    SweepConfig,
    run_sweep_async,
    target_from_string,
)
from peagle_deploy.bench.datasets import Dataset
from peagle_deploy.bench.metrics import AcceptanceStats, RequestOutput
from peagle_deploy.bench.runner import SweepResult, cost_per_million, run_level
from peagle_deploy.bench.settings import sweep_config
from peagle_deploy.bench.targets import NO_USAGE, SageMakerTarget, split_base_url
from peagle_deploy.errors import InputError

TINY = Dataset("tiny", tuple([[{"role": "user", "content": f"prompt {i} here"}] for i in range(5)]))


async def _sweep(server_cfg: LoopbackConfig, config: SweepConfig) -> tuple[SweepResult, Any]:
    server = await LoopbackServer(server_cfg).start()
    try:
        target = OpenAITarget(server.url, label="lb")
        result = await run_sweep_async(target, config, dataset=TINY)
    finally:
        await server.close()
    return result, server


def _config(**kw: Any) -> SweepConfig:
    base: dict[str, Any] = {"warmup": 0, "max_tokens": 6}
    base.update(kw)
    return sweep_config(base, progress=False)


def test_sweep_against_loopback_uses_server_usage() -> None:
    cfg = LoopbackConfig(tokens_per_chunk=4, output_tokens=10)
    result, server = asyncio.run(
        _sweep(cfg, _config(concurrency=[1, 3], num_prompts=7, max_tokens=9, warmup=2))
    )
    assert [lv.concurrency for lv in result.levels] == [1, 3]
    for lv in result.levels:
        d = lv.to_dict()
        assert d["completed"] == 7
        assert d["failed"] == 0
        assert d["total_output_tokens"] == 7 * 9  # min(max_tokens, output cap)
        # 9 tokens at 4 per chunk = role+first, then 2 more chunks -> 2 ITLs per request
        assert d["median_tpot_ms"] is not None
        assert d["total_input_tokens"] is not None
        assert d["spec_decode_acceptance_rate"] is None  # server runs no speculation
    assert server.counters.requests == 2 * (7 + 2)  # warm-up requests sent, not counted
    assert result.model == "loopback"  # discovered from /v1/models
    assert result.dataset == "tiny"


def test_acceptance_from_metrics_page_per_level() -> None:
    cfg = LoopbackConfig(draft_tokens=3, acceptance_rate=0.5, output_tokens=25)
    result, _ = asyncio.run(
        _sweep(cfg, _config(concurrency=[2], num_prompts=4, max_tokens=25, warmup=3))
    )
    acceptance = result.levels[0].acceptance
    assert isinstance(acceptance, AcceptanceStats)
    # per request: 25 tokens / (1 + 3*0.5) = 10 drafts, 15 accepted of 30 drafted;
    # warm-up requests happen before the "before" scrape and are excluded.
    assert acceptance.num_drafts == 40
    assert acceptance.draft_tokens == 120
    assert acceptance.accepted_tokens == 60
    assert acceptance.acceptance_rate == pytest.approx(50.0)
    assert acceptance.acceptance_length == pytest.approx(2.5)
    assert acceptance.per_position == pytest.approx((0.5, 0.5, 0.5))


def test_failures_are_counted_with_reasons() -> None:
    cfg = LoopbackConfig(fail_every=3)
    result, _ = asyncio.run(_sweep(cfg, _config(concurrency=[1], num_prompts=9)))
    d = result.levels[0].to_dict()
    assert d["completed"] == 6
    assert d["failed"] == 3
    assert list(d["errors"]) == [
        'HTTP 500: {"error": {"message": "injected failure", "code": 500}}'
    ]
    assert d["total_output_tokens"] == 6 * 6


def test_missing_usage_fails_the_request() -> None:
    result, _ = asyncio.run(
        _sweep(LoopbackConfig(omit_usage=True), _config(concurrency=[2], num_prompts=4))
    )
    d = result.levels[0].to_dict()
    assert d["completed"] == 0
    assert d["errors"] == {NO_USAGE: 4}
    assert d["total_output_tokens"] == 0


def test_ttft_is_at_least_the_configured_delay() -> None:
    cfg = LoopbackConfig(ttft_s=0.03, token_delay_s=0.002, tokens_per_chunk=2)
    result, _ = asyncio.run(_sweep(cfg, _config(concurrency=[2], num_prompts=4, max_tokens=4)))
    d = result.levels[0].to_dict()
    assert d["mean_ttft_ms"] >= 30.0
    assert d["mean_e2el_ms"] >= d["mean_ttft_ms"]


class _CountingTarget:
    """A fake target recording how many requests were in flight when each one started."""

    label = "fake"
    description = "fake"

    def __init__(self) -> None:
        self.in_flight = 0
        self.seen_at_start: list[int] = []
        self.calls = 0

    async def start(self, max_concurrency: int) -> None: ...

    async def request(
        self, messages: list[dict[str, Any]], max_tokens: int, temperature: float
    ) -> RequestOutput:
        self.seen_at_start.append(self.in_flight)
        self.in_flight += 1
        self.calls += 1
        # Uneven service times: waves would leave the loop idle while the slow one ends.
        await asyncio.sleep(0.001 * (self.calls % 5))
        self.in_flight -= 1
        return RequestOutput(success=True, output_tokens=1, prompt_tokens=1)

    async def acceptance_mark(self) -> None:
        return None

    async def acceptance_stats(self, begin: Any, end: Any) -> None:
        return None

    async def close(self) -> None: ...


def test_closed_loop_keeps_concurrency_constant() -> None:
    target = _CountingTarget()
    outputs, duration = asyncio.run(
        run_level(
            target,
            TINY.sampler(0),
            4,
            max_tokens=1,
            temperature=0.0,
            num_requests=40,
            duration_s=None,
        )
    )
    assert len(outputs) == 40
    assert duration > 0
    # The first 4 start together; every later one starts the moment one finished, so it
    # always sees the other 3 still running (a wave would see 0).
    assert target.seen_at_start[:4] == [0, 1, 2, 3]
    assert set(target.seen_at_start[4:]) == {3}


def test_duration_limited_level_stops_issuing() -> None:
    target = _CountingTarget()
    outputs, _ = asyncio.run(
        run_level(
            target,
            TINY.sampler(0),
            2,
            max_tokens=1,
            temperature=0.0,
            num_requests=None,
            duration_s=0.05,
        )
    )
    assert 2 <= len(outputs) == target.calls


def test_config_validation_names_flags() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"concurrency": []}, "--concurrency"),
        ({"concurrency": [0]}, "--concurrency"),
        ({"concurrency": "1,x"}, "--concurrency"),
        ({"num_prompts": 0}, "--num-prompts"),
        ({"duration_s": 0}, "--duration"),
        ({"duration_s": "inf"}, "--duration"),
        ({"warmup": -1}, "--warmup"),
        ({"max_tokens": 0}, "--max-tokens"),
        ({"temperature": 3.0}, "--temperature"),
        ({"temperature": "nan"}, "--temperature"),
        ({"dataset": ""}, "--dataset"),
        ({"hourly_price": 0}, "--hourly-price"),
        ({"workers": 0}, "--workers"),
    ]
    for kw, flag in cases:
        with pytest.raises(InputError) as err:
            sweep_config(kw)
        assert err.value.field == flag
    gate_names = {"warmup": "gates.stages.prod.bench.warmup"}
    with pytest.raises(InputError) as err:
        sweep_config({"warmup": -1}, name_of=gate_names)
    assert err.value.field == "gates.stages.prod.bench.warmup"
    assert sweep_config({"concurrency": " 8, 1,4"}).settings.concurrency == [1, 4, 8]
    assert SweepConfig(settings=BenchSettings(num_prompts=None)).requests_for(16) == 64
    assert BenchSettings(num_prompts=None, duration_s=5).requests_for(16) is None


def test_cost_per_million_tokens() -> None:
    # 1000 tokens/s = 3.6M tokens/h; at 7.2 per hour that is 2.0 per million.
    assert cost_per_million(7.2, 1000.0) == pytest.approx(2.0)
    assert cost_per_million(None, 1000.0) is None
    assert cost_per_million(7.2, 0.0) is None


def test_target_strings() -> None:
    assert split_base_url("http://h:1/v1") == ("http://h:1", "http://h:1/v1/chat/completions")
    assert split_base_url("http://h:1/") == ("http://h:1", "http://h:1/v1/chat/completions")
    assert split_base_url("https://h/v1/chat/completions")[0] == "https://h"
    sm = target_from_string("endpoint:my-ep", region="us-west-2", logs_delay_s=0)
    assert isinstance(sm, SageMakerTarget)
    assert sm.log_group == "/aws/sagemaker/Endpoints/my-ep"
    with pytest.raises(InputError) as err:
        target_from_string("my-ep")
    assert err.value.field == "--target"


def test_result_json_round_trip() -> None:
    result, _ = asyncio.run(
        _sweep(LoopbackConfig(draft_tokens=2), _config(concurrency=[1], num_prompts=2))
    )
    doc = result.to_dict()
    level = doc["levels"][0]
    for key in (
        "concurrency",
        "output_throughput",
        "median_ttft_ms",
        "p99_ttft_ms",
        "median_tpot_ms",
        "completed",
        "failed",
        "total_output_tokens",
        "spec_decode_acceptance_rate",
        "spec_decode_acceptance_length",
    ):
        assert key in level
    again = SweepResult.from_dict(doc).to_dict()
    assert again == doc
