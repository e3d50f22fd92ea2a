"""Metric definitions: the same numbers `vllm bench serve` would compute."""

from __future__ import annotations

import json

import numpy as np
import pytest
from peagle_serve.contract import format_metric_line
from peagle_serve.metrics import DraftCounters

from peagle_deploy.bench.metrics import (
    RequestOutput,
    acceptance_delta,
    acceptance_from_metric_lines,
    level_metrics,
    percentile,
)
from peagle_deploy.bench.targets import NO_TOKENS, NO_USAGE, StreamAccumulator


@pytest.mark.parametrize("p", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(p: float) -> None:
    values = [5.0, 1.0, 9.5, 3.25, 7.0, 2.0, 8.0]
    assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def _ok(start: float, ttft: float, latency: float, tokens: int, itl: list[float]) -> RequestOutput:
    return RequestOutput(
        success=True,
        start_time=start,
        ttft=ttft,
        latency=latency,
        itl=itl,
        output_tokens=tokens,
        prompt_tokens=10,
    )


def test_level_metrics_follow_vllm_definitions() -> None:
    outputs = [
        _ok(0.0, 0.1, 1.1, 11, [0.2, 0.3]),  # tpot = (1.1-0.1)/10 = 0.1
        _ok(0.0, 0.2, 0.6, 5, [0.4]),  # tpot = (0.6-0.2)/4 = 0.1
        _ok(0.0, 0.3, 0.3, 1, []),  # one token: no TPOT
        RequestOutput(success=False, error="HTTP 500: boom\nmore"),
    ]
    m = level_metrics(outputs, duration_s=2.0)
    assert m["completed"] == 3
    assert m["failed"] == 1
    assert m["errors"] == {"HTTP 500: boom": 1}
    assert m["total_output_tokens"] == 17
    assert m["output_throughput"] == pytest.approx(8.5)
    assert m["request_throughput"] == pytest.approx(1.5)
    assert m["total_input_tokens"] == 30
    assert m["total_token_throughput"] == pytest.approx((30 + 17) / 2.0)
    assert m["mean_tpot_ms"] == pytest.approx(100.0)
    assert m["median_ttft_ms"] == pytest.approx(200.0)
    assert m["p99_ttft_ms"] == pytest.approx(float(np.percentile([100, 200, 300], 99)))
    assert m["mean_itl_ms"] == pytest.approx(300.0)
    assert m["p90_e2el_ms"] == pytest.approx(float(np.percentile([1100, 600, 300], 90)))


def test_unknown_prompt_tokens_leave_total_throughput_out() -> None:
    out = _ok(0.0, 0.1, 0.2, 3, [0.1])
    out.prompt_tokens = None
    m = level_metrics([out], 1.0)
    assert m["total_input_tokens"] is None
    assert m["total_token_throughput"] is None
    assert m["output_throughput"] == pytest.approx(3.0)


def test_all_failed_gives_no_latency_figures() -> None:
    m = level_metrics([RequestOutput(error="x")], 1.0)
    assert m["completed"] == 0
    assert m["output_throughput"] == 0.0
    assert m["median_ttft_ms"] is None


def _event(content: str | None, *, usage: dict[str, int] | None = None) -> str:
    doc: dict[str, object] = {"object": "chat.completion.chunk"}
    doc["choices"] = [] if content is None else [{"index": 0, "delta": {"content": content}}]
    if usage is not None:
        doc["usage"] = usage
    return json.dumps(doc)


def test_accumulator_one_itl_per_event_and_usage_tokens() -> None:
    acc = StreamAccumulator(10.0)
    acc.event(_event(""), 10.5)  # role chunk: first token time
    acc.event(_event("a b c"), 10.7)  # three tokens in one event -> ONE ITL value
    acc.event(_event("d"), 11.0)
    acc.event(_event(None, usage={"prompt_tokens": 4, "completion_tokens": 9}), 12.0)
    out = acc.finish()
    assert out.success
    assert out.ttft == pytest.approx(0.5)
    assert out.itl == pytest.approx([0.2, 0.3])
    assert out.latency == pytest.approx(1.0)  # the usage-only event does not extend it
    assert out.output_tokens == 9  # from usage, not from counting chunks
    assert out.prompt_tokens == 4


def test_accumulator_without_usage_fails_rather_than_estimating() -> None:
    acc = StreamAccumulator(0.0)
    acc.event(_event("x"), 0.1)
    out = acc.finish()
    assert not out.success
    assert out.error == NO_USAGE
    assert out.output_tokens is None


def test_accumulator_without_choices_fails() -> None:
    acc = StreamAccumulator(0.0)
    acc.event(_event(None, usage={"prompt_tokens": 1, "completion_tokens": 1}), 0.1)
    assert acc.finish().error == NO_TOKENS


def test_acceptance_delta_uses_vllm_formulas() -> None:
    before = DraftCounters(10.0, 30.0, 12.0, (8.0, 4.0))
    after = DraftCounters(110.0, 330.0, 192.0, (88.0, 64.0, 40.0))
    stats = acceptance_delta(before, after)
    assert stats is not None
    assert stats.acceptance_rate == pytest.approx(180 / 300 * 100)
    assert stats.acceptance_length == pytest.approx(1 + 180 / 100)
    assert stats.per_position == pytest.approx((0.8, 0.6, 0.4))
    assert stats.to_dict()["spec_decode_per_position_acceptance_rates"] == [0.8, 0.6, 0.4]
    assert acceptance_delta(before, before) is None
    assert acceptance_delta(None, after) is None


def test_spec_decode_from_container_metric_lines() -> None:
    def line(rate: float, length: float, draft_s: float) -> dict[str, object]:
        text = format_metric_line(
            {
                "acceptance_rate": rate,
                "mean_acceptance_length": length,
                "draft_tokens_per_s": draft_s,
                "accepted_tokens_per_s": draft_s * rate,
            },
            per_position_acceptance=[rate * 1.5, rate * 0.5],
            timestamp_ms=0,
        )
        return json.loads(text)

    # K=4: interval 1 rate 0.5 (length 3), interval 2 rate 0.25 (length 2), 3x the drafts.
    stats = acceptance_from_metric_lines([line(0.5, 3.0, 400.0), line(0.25, 2.0, 1200.0)])
    assert stats is not None
    assert stats.acceptance_rate == pytest.approx((200 + 300) / 1600 * 100)
    # drafts: 200/2 = 100 and 300/1 = 300 -> length 1 + 500/400
    assert stats.acceptance_length == pytest.approx(1 + 500 / 400)
    assert stats.source == "cloudwatch-logs"
    # weighted by each interval's drafts (100 and 300)
    assert stats.per_position == pytest.approx(
        ((100 * 0.75 + 300 * 0.375) / 400, (100 * 0.25 + 300 * 0.125) / 400)
    )
    assert acceptance_from_metric_lines([line(0.5, 3.0, 0.0)]) is None


def test_accumulator_raises_on_error_events() -> None:
    from peagle_deploy.streaming import SSEDecodeError

    acc = StreamAccumulator(0.0)
    with pytest.raises(SSEDecodeError, match="server sent an error event"):
        acc.event('{"error": {"message": "overloaded"}}', 0.1)
    with pytest.raises(SSEDecodeError, match="not JSON"):
        acc.event("{truncated", 0.1)
    with pytest.raises(SSEDecodeError, match="not a JSON object"):
        acc.event("[1, 2]", 0.1)
