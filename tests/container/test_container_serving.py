"""Serving statistics from vLLM's /metrics: the per-variant figures experiments compare.

The pages below are written in the text format prometheus_client produces for vLLM
0.30.0's series (names and bucket families from `vllm/v1/metrics/loggers.py`); the
contract test checks the names and buckets against the installed vLLM.
"""

from __future__ import annotations

import io
import json

from peagle_local.emulator.vllm_buckets import INTER_TOKEN_LATENCY, REQUEST_LATENCY
from peagle_local.emulator.vllm_buckets import TIME_TO_FIRST_TOKEN as TTFT
from peagle_serve import contract, serving
from peagle_serve.metrics import MetricsReporter, parse_prometheus_text

LABELS = 'engine="0",model_name="m"'


def _histogram(name: str, bounds: tuple[float, ...], values: list[float]) -> list[str]:
    lines = [f"# HELP {name} x", f"# TYPE {name} histogram"]
    for b in (*bounds, float("inf")):
        le = "+Inf" if b == float("inf") else repr(float(b))
        n = sum(1 for v in values if v <= b)
        lines.append(f'{name}_bucket{{{LABELS},le="{le}"}} {float(n)}')
    lines.append(f"{name}_count{{{LABELS}}} {float(len(values))}")
    lines.append(f"{name}_sum{{{LABELS}}} {sum(values)}")
    return lines


def page(
    *, ttft: list[float], itl: list[float], e2e: list[float], tokens: list[int], decode: list[float]
) -> str:
    """A /metrics page after requests with these figures (cumulative, as vLLM keeps them)."""
    lines = [
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{LABELS}}} {float(sum(tokens))}",
        f'vllm:request_success_total{{{LABELS},finished_reason="stop"}} {float(len(tokens))}',
        *_histogram("vllm:time_to_first_token_seconds", TTFT, ttft),
        *_histogram("vllm:inter_token_latency_seconds", INTER_TOKEN_LATENCY, itl),
        *_histogram("vllm:e2e_request_latency_seconds", REQUEST_LATENCY, e2e),
        *_histogram("vllm:request_decode_time_seconds", REQUEST_LATENCY, decode),
        *_histogram(
            "vllm:request_generation_tokens",
            (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0),
            [float(t) for t in tokens],
        ),
    ]
    return "\n".join(lines) + "\n"


FIRST = page(ttft=[0.05], itl=[0.02] * 9, e2e=[0.3], tokens=[10], decode=[0.25])
SECOND = page(
    ttft=[0.05, 0.2, 0.3],
    itl=[0.02] * 9 + [0.03] * 20,
    e2e=[0.3, 0.9, 1.2],
    tokens=[10, 21, 31],
    decode=[0.25, 0.7, 0.9],
)


def counters(text: str) -> serving.ServingCounters:
    found = serving.serving_counters(parse_prometheus_text(text))
    assert found is not None
    return found


def test_counters_sum_the_series_vllm_exposes() -> None:
    c = counters(SECOND)
    assert c.requests == 3
    assert c.output_tokens == 62
    assert c.generation_tokens_of_finished == 62
    assert c.decode_s == 0.25 + 0.7 + 0.9
    ttft = c.histograms["ttft_s"]
    assert ttft.bounds == TTFT
    assert ttft.cumulative[-1] == 3


def test_the_window_is_the_difference_between_two_reads() -> None:
    window = serving.serving_window(counters(FIRST), counters(SECOND), 60.0)
    assert window is not None
    assert window["requests"] == 2
    assert window["output_tokens"] == 52
    assert window["decode_tokens"] == 52 - 2  # the first token of each is not decoded
    assert abs(window["decode_s"] - 1.6) < 1e-9
    ttft = window["ttft_s"]
    assert ttft["le"] == list(TTFT)
    assert sum(ttft["counts"]) == 2
    assert ttft["counts"][TTFT.index(0.25)] == 1  # 0.2 s falls in (0.1, 0.25]
    assert ttft["counts"][TTFT.index(0.5)] == 1  # 0.3 s falls in (0.25, 0.5]
    assert sum(window["itl_s"]["counts"]) == 20


def test_nothing_served_is_no_window_and_a_restart_starts_over() -> None:
    assert serving.serving_window(counters(FIRST), counters(FIRST), 60.0) is None
    window = serving.serving_window(counters(SECOND), counters(FIRST), 60.0)
    assert window is not None and window["requests"] == 1  # counters went down: a restart


def test_a_page_without_serving_series_has_no_counters() -> None:
    assert serving.serving_counters(parse_prometheus_text("vllm:other 1\n")) is None


class Pages:
    def __init__(self, pages: list[str]) -> None:
        self.pages = pages

    def __call__(self, _url: str) -> str:
        return self.pages.pop(0)


SPEC = """vllm:spec_decode_num_drafts_total{{{l}}} {d}
vllm:spec_decode_num_draft_tokens_total{{{l}}} {t}
vllm:spec_decode_num_accepted_tokens_total{{{l}}} {a}
"""


def test_the_reporter_adds_the_serving_statistics_to_its_line() -> None:
    out = io.StringIO()
    clock = iter([0.0, 60.0, 120.0])  # created, then two reads
    reporter = MetricsReporter(
        "http://x/metrics",
        60,
        out=out,
        fetch=Pages(
            [
                SPEC.format(l=LABELS, d=3, t=9, a=6) + FIRST,
                SPEC.format(l=LABELS, d=20, t=60, a=40) + SECOND,
            ]
        ),
        monotonic=lambda: next(clock),
        wall_ms=lambda: 1,
        dimensions={contract.METRIC_DIMENSION: "e", contract.VARIANT_DIMENSION: "Candidate"},
    )
    first = reporter.poll_once()  # counted from zero, where vLLM's counters start
    assert first is not None
    assert json.loads(first)[contract.SERVING_KEY]["requests"] == round(counters(FIRST).requests)
    line = reporter.poll_once()
    assert line is not None
    doc = json.loads(line)
    assert doc[contract.VARIANT_DIMENSION] == "Candidate"
    assert doc[contract.SERVING_KEY]["requests"] == 2
    assert doc[contract.SERVING_KEY]["interval_s"] == 60.0


def test_requests_the_engine_failed_are_counted_for_the_error_guardrail() -> None:
    """vLLM's finished_reason="error" (always a 500; for a stream, after its status 200
    was sent, so SageMaker's Invocation5XXErrors misses it) is the window's `errors`."""
    failed = "\nvllm:request_success_total{" + LABELS + ',finished_reason="error"} 2.0\n'
    more = "\nvllm:request_success_total{" + LABELS + ',finished_reason="error"} 5.0\n'
    before = counters(FIRST + failed)
    after = counters(SECOND + more)
    assert (before.errors, after.errors) == (2.0, 5.0)
    window = serving.serving_window(before, after, 60.0)
    assert window is not None and window["errors"] == 3
    clean = serving.serving_window(counters(FIRST), counters(SECOND), 60.0)
    assert clean is not None and clean["errors"] == 0
