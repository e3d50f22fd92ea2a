"""SageMaker's detailed observability, emulated: vLLM's metrics per variant, read by PromQL.

On AWS, SageMaker scrapes each container's Prometheus /metrics and publishes the series
to CloudWatch with the labels `aws.sagemaker.endpoint.name`, `aws.sagemaker.variant.name`
and `@resource.host.id`, queried through CloudWatch's Prometheus-compatible QueryMetrics
API (`/api/v1/query_range`). Here, every request a variant with a `VariantBehaviour`
serves adds to the cumulative vLLM counters and histograms of one of its instances
(vLLM 0.30.0's names and buckets, as the container would expose them), stamped with the
extension's wall clock; `query_range` answers the series selectors experiments send:
`{"NAME", "label"="value", ...}` (or `NAME{label="value"}`), equality matchers only,
with the Prometheus HTTP API's matrix answer. Any other PromQL is refused with
Prometheus's `bad_data` error: the emulator is no PromQL engine.

Whether a shadow variant's series carry `aws.sagemaker.variant.name` is stated in no page
read: `unlabelled_variants` plays the case where they do not (the variant's series are
published without that label), for the check that says so (`experiment.series_check`).
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from peagle_local.emulator.traffic import ServedRequest
from peagle_local.emulator.vllm_buckets import BY_LINE_KEY

ENDPOINT_LABEL = "aws.sagemaker.endpoint.name"
VARIANT_LABEL = "aws.sagemaker.variant.name"
HOST_LABEL = "@resource.host.id"
QUERY_PATH = "{0}/api/v1/query_range$"
MAX_POINTS = 11_000
"""Points per series one answer may hold (Prometheus's own limit)."""

HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": BY_LINE_KEY["ttft_s"],
    "vllm:inter_token_latency_seconds": BY_LINE_KEY["itl_s"],
    "vllm:e2e_request_latency_seconds": BY_LINE_KEY["e2e_s"],
    "vllm:request_decode_time_seconds": BY_LINE_KEY["e2e_s"],
    "vllm:request_generation_tokens": (
        1.0,
        2.0,
        5.0,
        10.0,
        20.0,
        50.0,
        100.0,
        200.0,
        500.0,
        1000.0,
        2000.0,
        5000.0,
    ),
}

Labels = tuple[tuple[str, str], ...]


@dataclass
class DetailedMetrics:
    """Cumulative vLLM series per (endpoint, variant, instance), with their samples."""

    series: dict[Labels, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    unlabelled_variants: set[str] = field(default_factory=set)
    """Variants whose series are published without `aws.sagemaker.variant.name`."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, labels: dict[str, str], delta: float, at: float) -> None:
        key = tuple(sorted(labels.items()))
        samples = self.series[key]
        last = samples[-1][1] if samples else 0.0
        if samples and samples[-1][0] == at:
            samples[-1] = (at, last + delta)
        else:
            samples.append((at, last + delta))

    def _observe(
        self, base: dict[str, str], family: str, values: list[tuple[float, float]], at: float
    ) -> None:
        """Histogram observations (value, weight) into `_bucket`, `_sum`, `_count`."""
        bounds = HISTOGRAMS[family]
        counts = [0.0] * (len(bounds) + 1)
        total = weight_sum = 0.0
        for value, weight in values:
            counts[bisect.bisect_left(bounds, value)] += weight
            total += value * weight
            weight_sum += weight
        running = 0.0
        for le, n in zip((*bounds, float("inf")), counts, strict=True):
            running += n
            text = "+Inf" if le == float("inf") else repr(float(le))
            self._add({**base, "__name__": family + "_bucket", "le": text}, running, at)
        self._add({**base, "__name__": family + "_sum"}, total, at)
        self._add({**base, "__name__": family + "_count"}, weight_sum, at)

    def record(
        self, endpoint: str, variant: str, instance: str, served: ServedRequest, *, at: float
    ) -> None:
        """What one request served by one instance adds to its vLLM series."""
        base = {
            ENDPOINT_LABEL: endpoint,
            VARIANT_LABEL: variant,
            HOST_LABEL: instance,
            "model_name": "model",
            "engine": "0",
        }
        if variant in self.unlabelled_variants:
            del base[VARIANT_LABEL]
        with self._lock:
            if not served.ok:
                self._add(
                    {**base, "__name__": "vllm:request_success_total", "finished_reason": "error"},
                    1,
                    at,
                )
                return
            self._add(
                {**base, "__name__": "vllm:request_success_total", "finished_reason": "stop"}, 1, at
            )
            self._add(
                {**base, "__name__": "vllm:generation_tokens_total"}, served.output_tokens, at
            )
            self._add(
                {**base, "__name__": "vllm:spec_decode_num_drafts_total"}, max(served.steps, 1), at
            )
            self._add(
                {**base, "__name__": "vllm:spec_decode_num_draft_tokens_total"}, served.drafted, at
            )
            self._add(
                {**base, "__name__": "vllm:spec_decode_num_accepted_tokens_total"},
                served.accepted,
                at,
            )
            self._observe(base, "vllm:time_to_first_token_seconds", [(served.ttft_s, 1)], at)
            self._observe(
                base, "vllm:inter_token_latency_seconds", [(served.step_s, served.steps)], at
            )
            self._observe(base, "vllm:e2e_request_latency_seconds", [(served.e2e_s, 1)], at)
            self._observe(base, "vllm:request_decode_time_seconds", [(served.decode_s, 1)], at)
            self._observe(base, "vllm:request_generation_tokens", [(served.output_tokens, 1)], at)

    def query_range(self, query: str, start: float, end: float, step: float) -> dict[str, Any]:
        """The Prometheus HTTP API's answer to a series selector over [start, end]."""
        matchers = parse_selector(query)
        if matchers is None:
            return {
                "status": "error",
                "errorType": "bad_data",
                "error": f"the emulator answers series selectors only: {query!r}",
            }
        if step <= 0 or end < start or (end - start) / step > MAX_POINTS:
            return {"status": "error", "errorType": "bad_data", "error": "bad start, end or step"}
        times = [start + i * step for i in range(int((end - start) / step) + 1)]
        result = []
        with self._lock:
            for key, samples in self.series.items():
                labels = dict(key)
                if any(labels.get(k) != v for k, v in matchers.items()):
                    continue
                values = _values_at(samples, times)
                if values:
                    result.append({"metric": labels, "values": values})
        return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _values_at(samples: list[tuple[float, float]], times: list[float]) -> list[list[Any]]:
    """The last sample at or before each time (a counter holds its value between samples)."""
    stamps = [t for t, _ in samples]
    out = []
    for t in times:
        i = bisect.bisect_right(stamps, t) - 1
        if i >= 0:
            out.append([round(t, 3), repr(samples[i][1])])
    return out


_NAME = r'(?:"(?:[^"\\]|\\.)*"|[A-Za-z_:@][A-Za-z0-9_:.@]*)'
_MATCHER = re.compile(rf"\s*(?P<key>{_NAME})\s*(?:=\s*(?P<value>\"(?:[^\"\\]|\\.)*\"))?\s*(?:,|$)")


def _unquote(text: str) -> str:
    return str(json.loads(text)) if text.startswith('"') else text


def parse_selector(query: str) -> dict[str, str] | None:
    """`{"name", "label"="value"}` or `name{label="value"}` -> equality matchers (with
    `__name__`); None for anything else."""
    found = re.fullmatch(rf"\s*(?P<name>{_NAME})?\s*\{{(?P<body>.*)\}}\s*", query, re.S)
    if found is None:
        return None
    matchers: dict[str, str] = {}
    if found.group("name"):
        matchers["__name__"] = _unquote(found.group("name"))
    body, pos = found.group("body"), 0
    while pos < len(body.strip()) and body[pos:].strip():
        item = _MATCHER.match(body, pos)
        if item is None or item.end() == pos:
            return None
        key, value = _unquote(item.group("key")), item.group("value")
        if value is None:
            matchers["__name__"] = key
        else:
            matchers[key] = _unquote(value)
        pos = item.end()
    return matchers if "__name__" in matchers else None


def query_handler(store_of: Any) -> Any:
    """moto URL handler for `/api/v1/query_range` (form or query-string fields)."""

    def handler(request: Any, full_url: str, headers: Any) -> Any:
        text = request.get_data(as_text=True) if hasattr(request, "get_data") else ""
        fields = {k: v[0] for k, v in parse_qs(text).items()}
        form = getattr(request, "form", None)
        if not fields and form:
            fields = {k: str(form[k]) for k in form}
        fields.update({k: v[0] for k, v in parse_qs(full_url.partition("?")[2]).items()})
        try:
            start, end = float(fields["start"]), float(fields["end"])
            step = float(fields["step"].removesuffix("s"))
            answer = store_of().query_range(fields["query"], start, end, step)
        except (KeyError, ValueError) as exc:
            answer = {"status": "error", "errorType": "bad_data", "error": f"bad request: {exc}"}
        status = 200 if answer["status"] == "success" else 400
        return status, {"Content-Type": "application/json"}, json.dumps(answer)

    return handler
