"""The input of an experiment's analysis, and the figures and blocks made from it.

The input is a list of `VariantSample`s: what one variant (one instance of it, when the
source knows instances) reported over one metric period, stamped with the period's end.
It is neutral on purpose; each source maps into the fields it has and leaves the rest 0:
- the container's metric lines in CloudWatch Logs (`peagle_serve.contract`, parsed by
  `sample_from_line`): one per instance and interval, with the `VariantName`
  dimension: finished requests, generated tokens, decode seconds, latency histograms,
  speculative acceptance;
- SageMaker's `AWS/SageMaker` metrics with the `EndpointName` and `VariantName`
  dimensions, one sample per variant and minute (`experiment.fetch`): Invocations and
  Invocation5XXErrors;
- any other source of the same figures per variant and period (SageMaker's detailed
  observability metrics, for instance) maps into the same fields.

Pure functions; `peagle_deploy.experiment.lifecycle` fetches the data.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from peagle_serve.contract import (
    DEFAULT_VARIANT,
    SERVING_HISTOGRAMS,
    SERVING_KEY,
    VARIANT_DIMENSION,
    parse_metric_line,
)

from peagle_deploy.experiment.histogram import Histogram, merge_all
from peagle_deploy.experiment.stats import Block

PERCENTILES = (0.5, 0.9, 0.99)


_NO_HISTOGRAMS: Mapping[str, Histogram] = MappingProxyType({})


class VariantSample(NamedTuple):
    """What one variant reported over one metric period (any subset of the figures).

    A named tuple: a three-day experiment reads tens of thousands of them."""

    variant: str
    timestamp_ms: int
    """The end of the period (ms since the epoch)."""
    interval_s: float = 0.0
    """The period's length."""
    instance: str = ""
    """The instance (or log stream) it comes from; empty for per-variant sources."""
    requests: float = 0.0
    """Requests that finished in the period (with the serving figures below)."""
    output_tokens: float = 0.0
    decode_tokens: float = 0.0
    """Tokens generated after each request's first."""
    decode_s: float = 0.0
    """Seconds the finished requests spent decoding those tokens."""
    invocations: float = 0.0
    """Requests SageMaker sent to the variant (Invocations)."""
    errors: float = 0.0
    """Of those, answered with a 5xx (Invocation5XXErrors)."""
    mean_acceptance_length: float = 0.0
    draft_tokens: float = 0.0
    histograms: Mapping[str, Histogram] = _NO_HISTOGRAMS
    """Latency histograms of the finished requests (`ttft_s`, `itl_s`, `e2e_s`)."""


def _number(doc: Mapping[str, Any], key: str) -> float:
    value = doc.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return max(0.0, float(value))


def sample_from_line(message: str, *, stream: str, timestamp_ms: int) -> VariantSample | None:
    """The sample in one log event, None when it is not a metric line.

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
    return VariantSample(
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
    errors: float

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.invocations if self.invocations > 0 else None

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
            "errors": self.errors,
            "error_rate": self.error_rate,
        }


def _percentiles(h: Histogram | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in PERCENTILES:
        value = h.quantile(q) if h is not None else None
        out[f"p{round(q * 100)}"] = round(value * 1000, 3) if value is not None else None
    return out


def merged_histograms(samples: Iterable[VariantSample]) -> dict[str, Histogram | None]:
    """Each latency histogram summed over `samples` (None where none has it)."""
    kept = list(samples)
    return {
        key: merge_all(o.histograms[key] for o in kept if key in o.histograms)
        for key, _ in SERVING_HISTOGRAMS
    }


def summarize(
    variant: str, samples: Sequence[VariantSample], *, duration_s: float
) -> VariantSummary:
    """One variant's figures over `duration_s` seconds of its samples."""
    instances = len({o.instance for o in samples if o.instance and o.requests > 0})
    tokens = sum(o.output_tokens for o in samples)
    decode_s = sum(o.decode_s for o in samples)
    drafts = sum(o.draft_tokens for o in samples)
    acceptance = (
        sum(o.mean_acceptance_length * o.draft_tokens for o in samples) / drafts
        if drafts > 0
        else None
    )
    merged = merged_histograms(samples)
    return VariantSummary(
        variant=variant,
        instances=instances,
        requests=sum(o.requests for o in samples),
        output_tokens_per_s_per_instance=(
            tokens / (duration_s * instances) if instances and duration_s > 0 else None
        ),
        decode_tokens_per_s=sum(o.decode_tokens for o in samples) / decode_s if decode_s else None,
        mean_acceptance_length=acceptance,
        ttft_ms=_percentiles(merged["ttft_s"]),
        itl_ms=_percentiles(merged["itl_s"]),
        e2e_ms=_percentiles(merged["e2e_s"]),
        invocations=sum(o.invocations for o in samples),
        errors=sum(o.errors for o in samples),
    )


@dataclass(frozen=True)
class Window:
    """One variant's decode figures pooled over one block (or any span)."""

    requests: float = 0.0
    decode_tokens: float = 0.0
    decode_s: float = 0.0

    @property
    def speed(self) -> float | None:
        if self.decode_s <= 0 or self.decode_tokens <= 0:
            return None
        return self.decode_tokens / self.decode_s


def span_index(timestamp_ms: int, *, start_ms: int, width_s: float) -> int:
    """Which span of `width_s` a sample stamped at the end of its period belongs to (0
    from `start_ms`; a sample stamped exactly at a span's end belongs to that span)."""
    return int((timestamp_ms - start_ms - 1) // (width_s * 1000))


_Key = TypeVar("_Key", str, tuple[str, str])


def _variant_of(o: VariantSample) -> str:
    return o.variant


def _variant_and_instance(o: VariantSample) -> tuple[str, str]:
    return o.variant, o.instance


def _pooled(
    samples: Iterable[VariantSample],
    *,
    start_ms: int,
    window_s: float,
    key: Callable[[VariantSample], _Key],
) -> dict[_Key, dict[int, Window]]:
    """key(sample) -> span index -> the decode figures pooled over the span."""
    sums: dict[tuple[_Key, int], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    width_ms = window_s * 1000
    for o in samples:
        if o.timestamp_ms <= start_ms or o.requests <= 0:
            continue
        row = sums[(key(o), int((o.timestamp_ms - start_ms - 1) // width_ms))]
        row[0] += o.requests
        row[1] += o.decode_tokens
        row[2] += o.decode_s
    out: dict[_Key, dict[int, Window]] = defaultdict(dict)
    for (k, index), (requests, tokens, seconds) in sums.items():
        out[k][index] = Window(requests, tokens, seconds)
    return out


def windows(
    samples: Iterable[VariantSample], *, start_ms: int, window_s: float
) -> dict[str, dict[int, Window]]:
    """variant -> span index -> its decode figures, for spans of `window_s` from
    `start_ms` (samples stamped at or before `start_ms` are left out)."""
    return _pooled(samples, start_ms=start_ms, window_s=window_s, key=_variant_of)


def instance_windows(
    samples: Iterable[VariantSample], *, start_ms: int, window_s: float
) -> dict[str, dict[str, dict[int, Window]]]:
    """variant -> instance -> span index -> its decode figures (as `windows`, per
    instance; a source without instances gives one instance named "")."""
    pooled = _pooled(samples, start_ms=start_ms, window_s=window_s, key=_variant_and_instance)
    out: dict[str, dict[str, dict[int, Window]]] = defaultdict(dict)
    for (variant, instance), spans in pooled.items():
        out[variant][instance] = spans
    return out


def fleet_speeds(
    by_instance: Mapping[str, Mapping[int, Window]], *, below: int, min_requests: float
) -> dict[str, dict[int, float]]:
    """instance -> span index -> log decode speed, for spans before `below` in which the
    instance finished at least `min_requests`."""
    out: dict[str, dict[int, float]] = {}
    for instance, spans in by_instance.items():
        series = {
            i: math.log(w.speed)
            for i, w in spans.items()
            if i < below and w.requests >= min_requests and w.speed
        }
        if series:
            out[instance] = series
    return out


def paired_log_ratios(
    by_variant: Mapping[str, Mapping[int, Window]],
    *,
    incumbent: str,
    candidate: str,
    min_requests: float,
) -> list[Block]:
    """One `Block` (span index, log(candidate speed / incumbent speed), the requests both
    variants finished in it) for each span in which both finished at least
    `min_requests`, in time order."""
    a, b = by_variant.get(incumbent, {}), by_variant.get(candidate, {})
    pairs: list[Block] = []
    for index in sorted(set(a) & set(b)):
        wa, wb = a[index], b[index]
        if wa.requests < min_requests or wb.requests < min_requests:
            continue
        sa, sb = wa.speed, wb.speed
        if sa and sb:
            pairs.append(Block(index, math.log(sb / sa), wa.requests + wb.requests))
    return pairs
