"""From what the platform reports to per-variant figures and paired windows.

Two sources, both per variant:
- the container's metric lines in CloudWatch Logs (`peagle_serve.contract`), one per
  instance and interval, with the `VariantName` dimension: speculative acceptance and
  the serving statistics (tokens, decode time, latency histograms);
- SageMaker's own CloudWatch metrics in `AWS/SageMaker` with the `EndpointName` and
  `VariantName` dimensions: Invocations and Invocation5XXErrors.

Pure functions; `peagle_deploy.experiment.lifecycle` fetches the data.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from peagle_serve.contract import (
    DEFAULT_VARIANT,
    SERVING_HISTOGRAMS,
    SERVING_KEY,
    VARIANT_DIMENSION,
    parse_metric_line,
)

from peagle_deploy.experiment.histogram import Histogram, merge_all

MIN_WINDOW_REQUESTS = 2
"""Finished requests each variant needs in a window for the window to count."""

PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class LineObservation:
    """One container metric line: one instance of one variant over one interval."""

    variant: str
    instance: str
    timestamp_ms: int
    interval_s: float
    mean_acceptance_length: float
    draft_tokens: float
    requests: float = 0.0
    output_tokens: float = 0.0
    decode_tokens: float = 0.0
    decode_s: float = 0.0
    histograms: Mapping[str, Histogram] = field(default_factory=dict)


def _number(doc: Mapping[str, Any], key: str) -> float:
    value = doc.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return max(0.0, float(value))


def observation_from_line(
    message: str, *, stream: str, timestamp_ms: int
) -> LineObservation | None:
    """The observation in one log event, None when it is not a metric line.

    The variant is the line's `VariantName`; lines without it (older images) belong to
    the variant that prefixes SageMaker's log stream name (`<variant>/<instance>`).
    """
    doc = parse_metric_line(message)
    if doc is None:
        return None
    variant = doc.get(VARIANT_DIMENSION)
    if not isinstance(variant, str) or not variant:
        variant = stream.partition("/")[0] or DEFAULT_VARIANT
    served = doc.get(SERVING_KEY)
    served = served if isinstance(served, dict) else {}
    interval = _number(served, "interval_s")
    stamp = (doc.get("_aws") or {}).get("Timestamp") if isinstance(doc.get("_aws"), dict) else None
    histograms: dict[str, Histogram] = {}
    for key, _ in SERVING_HISTOGRAMS:
        raw = served.get(key)
        h = Histogram.from_line(raw) if isinstance(raw, dict) else None
        if h is not None:
            histograms[key] = h
    return LineObservation(
        variant=variant,
        instance=stream,
        timestamp_ms=int(stamp) if isinstance(stamp, int) else timestamp_ms,
        interval_s=interval,
        mean_acceptance_length=_number(doc, "mean_acceptance_length"),
        draft_tokens=_number(doc, "draft_tokens_per_s") * interval,
        requests=_number(served, "requests"),
        output_tokens=_number(served, "output_tokens"),
        decode_tokens=_number(served, "decode_tokens"),
        decode_s=_number(served, "decode_s"),
        histograms=histograms,
    )


@dataclass(frozen=True)
class InvocationCounts:
    """SageMaker's per-variant invocation metrics over a time range (sums)."""

    invocations: float = 0.0
    errors_5xx: float = 0.0

    @property
    def error_rate(self) -> float | None:
        return self.errors_5xx / self.invocations if self.invocations > 0 else None


@dataclass(frozen=True)
class VariantSummary:
    """Every figure `peagle experiment status` shows for one variant."""

    variant: str
    instances: int
    requests: float
    output_tokens_per_s_per_instance: float | None
    decode_tokens_per_s: float | None
    """Speed of one stream while it decodes: the figure the decision rule compares."""
    mean_acceptance_length: float | None
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    invocations: float
    error_rate: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "instances": self.instances,
            "requests": self.requests,
            "output_tokens_per_s_per_instance": self.output_tokens_per_s_per_instance,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "mean_acceptance_length": self.mean_acceptance_length,
            "ttft_ms": self.ttft_ms,
            "itl_ms": self.itl_ms,
            "e2e_ms": self.e2e_ms,
            "invocations": self.invocations,
            "error_rate": self.error_rate,
        }


def _percentiles(h: Histogram | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in PERCENTILES:
        value = h.quantile(q) if h is not None else None
        out[f"p{round(q * 100)}"] = round(value * 1000, 3) if value is not None else None
    return out


def summarize(
    variant: str,
    lines: Sequence[LineObservation],
    counts: InvocationCounts,
    *,
    duration_s: float,
) -> VariantSummary:
    """One variant's figures over `duration_s` seconds of lines."""
    instances = len({o.instance for o in lines})
    tokens = sum(o.output_tokens for o in lines)
    decode_s = sum(o.decode_s for o in lines)
    drafts = sum(o.draft_tokens for o in lines)
    acceptance = (
        sum(o.mean_acceptance_length * o.draft_tokens for o in lines) / drafts
        if drafts > 0
        else None
    )
    merged = {
        key: merge_all(o.histograms[key] for o in lines if key in o.histograms)
        for key, _ in SERVING_HISTOGRAMS
    }
    return VariantSummary(
        variant=variant,
        instances=instances,
        requests=sum(o.requests for o in lines),
        output_tokens_per_s_per_instance=(
            tokens / (duration_s * instances) if instances and duration_s > 0 else None
        ),
        decode_tokens_per_s=sum(o.decode_tokens for o in lines) / decode_s if decode_s else None,
        mean_acceptance_length=acceptance,
        ttft_ms=_percentiles(merged["ttft_s"]),
        itl_ms=_percentiles(merged["itl_s"]),
        e2e_ms=_percentiles(merged["e2e_s"]),
        invocations=counts.invocations,
        error_rate=counts.error_rate,
    )


@dataclass(frozen=True)
class Window:
    """One variant's lines that end within one analysis window."""

    requests: float = 0.0
    decode_tokens: float = 0.0
    decode_s: float = 0.0

    def add(self, o: LineObservation) -> Window:
        return Window(
            self.requests + o.requests,
            self.decode_tokens + o.decode_tokens,
            self.decode_s + o.decode_s,
        )

    @property
    def speed(self) -> float | None:
        if self.decode_s <= 0 or self.decode_tokens <= 0:
            return None
        return self.decode_tokens / self.decode_s


def windows(
    lines: Iterable[LineObservation], *, start_ms: int, window_s: float
) -> dict[str, dict[int, Window]]:
    """variant -> window index -> the window's totals (index 0 starts at `start_ms`)."""
    out: dict[str, dict[int, Window]] = defaultdict(dict)
    width_ms = window_s * 1000
    for o in lines:
        if o.timestamp_ms < start_ms:
            continue
        index = int((o.timestamp_ms - start_ms) // width_ms)
        out[o.variant][index] = out[o.variant].get(index, Window()).add(o)
    return out


def paired_log_ratios(
    by_variant: Mapping[str, Mapping[int, Window]],
    *,
    incumbent: str,
    candidate: str,
    min_requests: int = MIN_WINDOW_REQUESTS,
) -> list[tuple[int, float]]:
    """(window index, log(candidate speed / incumbent speed)) for windows both variants
    filled, in time order."""
    a, b = by_variant.get(incumbent, {}), by_variant.get(candidate, {})
    pairs: list[tuple[int, float]] = []
    for index in sorted(set(a) & set(b)):
        wa, wb = a[index], b[index]
        if wa.requests < min_requests or wb.requests < min_requests:
            continue
        sa, sb = wa.speed, wb.speed
        if sa and sb:
            pairs.append((index, math.log(sb / sa)))
    return pairs
