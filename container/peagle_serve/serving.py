"""What the engine served in one interval, read from vLLM's /metrics: what experiments compare.

Two variants of one endpoint (a shadow or a split experiment) are compared on what each
container observed, since SageMaker's own metrics know nothing of tokens. From the
counter and histogram deltas between two reads of /metrics (vLLM 0.30.0,
`vllm/v1/metrics/loggers.py`):

  requests       finished requests (`vllm:e2e_request_latency_seconds` count)
  output_tokens  tokens generated (`vllm:generation_tokens`)
  decode_tokens  tokens generated after each finished request's first one
                 (`vllm:request_generation_tokens` sum minus count)
  decode_s       the time those requests spent decoding (`vllm:request_decode_time_seconds`
                 sum), so decode_tokens / decode_s is the speed of one stream
  ttft_s, itl_s, e2e_s   per-bucket counts of the latency histograms (contract.SERVING_HISTOGRAMS)
  errors         requests that ended in an error inside the engine
                 (`vllm:request_success` with `finished_reason="error"`, which vLLM turns
                 into a 500). A streamed request that fails after its first bytes is not
                 counted by SageMaker's Invocation5XXErrors (its response status was 200
                 already), so experiments add this count to their error guardrail.

Pure functions of the parsed samples; `metrics.MetricsReporter` adds the result to its line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from peagle_serve import contract

GENERATION_TOKENS: Final = "vllm:generation_tokens"
REQUEST_GENERATION_TOKENS: Final = "vllm:request_generation_tokens"
DECODE_TIME: Final = "vllm:request_decode_time_seconds"
REQUESTS: Final = "vllm:e2e_request_latency_seconds"
REQUEST_SUCCESS: Final = "vllm:request_success"
ERROR_REASON: Final = "error"
"""vLLM's FinishReason.ERROR: a request-level internal error, always turned into a 500."""


class SampleLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def value(self) -> float: ...


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram summed over label sets: cumulative counts by upper bound."""

    bounds: tuple[float, ...]
    """Finite upper bounds, ascending (the +Inf bucket is implied)."""
    cumulative: tuple[float, ...]
    """Cumulative count at each bound, then at +Inf (one longer than `bounds`)."""
    total: float
    """The `_sum` series."""


@dataclass(frozen=True)
class ServingCounters:
    """Cumulative serving counters of one /metrics read."""

    output_tokens: float
    requests: float
    generation_tokens_of_finished: float
    decode_s: float
    histograms: Mapping[str, Histogram]
    errors: float = 0.0


def _series(name: str) -> tuple[str, str]:
    """(metric family, part): `x_total` -> (x, total), `x_bucket` -> (x, bucket), ..."""
    for part in ("bucket", "sum", "count", "total"):
        if name.endswith("_" + part):
            return name[: -len(part) - 1], part
    return name, ""


def _le(labels: Mapping[str, str]) -> float | None:
    raw = labels.get("le")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def serving_counters(samples: Iterable[SampleLike]) -> ServingCounters | None:
    """The serving counters of a parsed /metrics page, or None when vLLM exposes none."""
    wanted = {name for _, name in contract.SERVING_HISTOGRAMS}
    scalars: dict[tuple[str, str], float] = {}
    buckets: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    for sample in samples:
        family, part = _series(sample.name)
        if part == "bucket" and family in wanted:
            le = _le(sample.labels)
            if le is not None:
                per_le = buckets.setdefault(family, {})
                per_le[le] = per_le.get(le, 0.0) + sample.value
        elif part == "sum" and family in wanted:
            sums[family] = sums.get(family, 0.0) + sample.value
        if part in ("sum", "count", "total"):
            scalars[(family, part)] = scalars.get((family, part), 0.0) + sample.value
        if family == REQUEST_SUCCESS and sample.labels.get("finished_reason") == ERROR_REASON:
            scalars[(family, ERROR_REASON)] = (
                scalars.get((family, ERROR_REASON), 0.0) + sample.value
            )
    if (REQUESTS, "count") not in scalars and (GENERATION_TOKENS, "total") not in scalars:
        return None
    histograms: dict[str, Histogram] = {}
    for line_key, family in contract.SERVING_HISTOGRAMS:
        found = buckets.get(family)
        if not found:
            continue
        finite = sorted(b for b in found if math.isfinite(b))
        top = found.get(math.inf, max(found.values()))
        histograms[line_key] = Histogram(
            tuple(finite), (*(found[b] for b in finite), top), sums.get(family, 0.0)
        )
    return ServingCounters(
        output_tokens=scalars.get((GENERATION_TOKENS, "total"), 0.0),
        requests=scalars.get((REQUESTS, "count"), 0.0),
        generation_tokens_of_finished=scalars.get((REQUEST_GENERATION_TOKENS, "sum"), 0.0),
        decode_s=scalars.get((DECODE_TIME, "sum"), 0.0),
        histograms=histograms,
        errors=scalars.get((REQUEST_SUCCESS, ERROR_REASON), 0.0),
    )


def _histogram_delta(previous: Histogram | None, current: Histogram) -> dict[str, Any]:
    """Per-bucket counts of the interval (the last one is the +Inf bucket)."""
    if previous is None or previous.bounds != current.bounds:
        previous = Histogram(current.bounds, (0.0,) * len(current.cumulative), 0.0)
    delta = [c - p for c, p in zip(current.cumulative, previous.cumulative, strict=True)]
    counts = [max(0.0, delta[0])] + [max(0.0, b - a) for a, b in itertools.pairwise(delta)]
    return {
        "le": list(current.bounds),
        "counts": [round(c) for c in counts],
        "sum": round(max(0.0, current.total - previous.total), 6),
    }


def serving_window(
    previous: ServingCounters, current: ServingCounters, elapsed_s: float
) -> dict[str, Any] | None:
    """The interval's serving statistics (contract.SERVING_KEY), None when nothing happened.

    Counters that went down mean vLLM restarted: the current values are the interval's.
    """
    if current.requests < previous.requests or current.output_tokens < previous.output_tokens:
        previous = ServingCounters(0.0, 0.0, 0.0, 0.0, {})
    requests = current.requests - previous.requests
    tokens = current.output_tokens - previous.output_tokens
    errors = max(0.0, current.errors - previous.errors)
    if requests <= 0 and tokens <= 0 and errors <= 0:
        return None
    finished_tokens = current.generation_tokens_of_finished - previous.generation_tokens_of_finished
    window: dict[str, Any] = {
        "interval_s": round(elapsed_s, 3),
        "requests": round(requests),
        "output_tokens": round(tokens),
        "decode_tokens": round(max(0.0, finished_tokens - requests)),
        "decode_s": round(max(0.0, current.decode_s - previous.decode_s), 6),
        "errors": round(errors),
    }
    for key, histogram in current.histograms.items():
        window[key] = _histogram_delta(previous.histograms.get(key), histogram)
    return window
