"""Per-variant observations from SageMaker's detailed observability (CloudWatch, PromQL).

With `MetricsConfig.EnableDetailedObservability` on, SageMaker scrapes each container's
Prometheus endpoint and publishes its metrics to CloudWatch as OpenTelemetry metrics,
labelled `aws.sagemaker.endpoint.name`, `aws.sagemaker.variant.name` and
`@resource.host.id` (the instance), queried with PromQL through CloudWatch's
Prometheus-compatible `QueryMetrics` API (`POST https://monitoring.REGION.amazonaws.com/
api/v1/query_range`, SigV4 with the service name `monitoring`; IAM:
`cloudwatch:GetMetricData` and `cloudwatch:ListMetrics`). docs/platform-facts.md has the
sources. That is what lets an experiment compare variants that run AWS's own vLLM
images, which write no peagle metric lines.

The series read are vLLM's own (vLLM 0.30.0 `vllm/v1/metrics/loggers.py`), cumulative
per instance. Each is read at every `step` from one step before the start, and the
difference between two reads is what the instance did in that step: one
`VariantSample` per instance and step, the shape the container's metric lines map to.
The pages read do not say whether CloudWatch keeps a counter's `_total` suffix, so both
names are asked for (the suffixed one first). CloudWatch scans at most 24 hours per
query: longer spans are read in pieces.

Neither the names CloudWatch stores vLLM's series under nor whether a shadow variant's
series carry `aws.sagemaker.variant.name` is stated in a page read; if either differs,
the candidate is never seen. So a reading also says which variants each series came
back for, and which came back without the label (`SeriesSeen`); `series_check` turns
that into what `status` says per variant.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from peagle_serve.contract import SERVING_HISTOGRAMS

from peagle_deploy.errors import PeagleError
from peagle_deploy.experiment.histogram import Histogram
from peagle_deploy.experiment.observations import VariantSample

ENDPOINT_LABEL = "aws.sagemaker.endpoint.name"
VARIANT_LABEL = "aws.sagemaker.variant.name"
HOST_LABEL = "@resource.host.id"
QUERY_PATH = "/api/v1/query_range"
SIGNING_NAME = "monitoring"
MAX_SCAN = timedelta(hours=24)
"""CloudWatch PromQL's scan window per query."""
MAX_SERIES = 500
"""Series one QueryMetrics answer holds at most."""

GENERATED = ("vllm:generation_tokens_total", "vllm:generation_tokens")
REQUESTS = ("vllm:e2e_request_latency_seconds_count",)
FINISHED_TOKENS_SUM = ("vllm:request_generation_tokens_sum",)
FINISHED_TOKENS_COUNT = ("vllm:request_generation_tokens_count",)
DECODE_S = ("vllm:request_decode_time_seconds_sum",)
DRAFTS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts")
DRAFT_TOKENS = ("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens")
ACCEPTED = ("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens")
ERRORS = ("vllm:request_success_total", "vllm:request_success")
ERROR_MATCH = {"finished_reason": "error"}


class PromQLError(PeagleError):
    """CloudWatch refused a PromQL query (permissions, limits, a bad query)."""


Post = Callable[[str, dict[str, str]], Any]
"""(path, form fields) -> the decoded JSON answer of one QueryMetrics call."""


@dataclass(frozen=True)
class Series:
    """One time series: its labels and its (seconds, value) samples, in time order."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


def selector(name: str, endpoint: str, extra: Mapping[str, str] | None = None) -> str:
    """`{"NAME", "aws.sagemaker.endpoint.name"="ENDPOINT", ...}` (UTF-8 names quoted)."""
    matchers = [json.dumps(name), f"{json.dumps(ENDPOINT_LABEL)}={json.dumps(endpoint)}"]
    matchers += [f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted((extra or {}).items())]
    return "{" + ", ".join(matchers) + "}"


def _series_of(answer: Any) -> list[Series]:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        detail = answer.get("error") if isinstance(answer, dict) else answer
        raise PromQLError(f"CloudWatch PromQL query failed: {detail}")
    data = answer.get("data") or {}
    out = []
    for result in data.get("result") or []:
        labels = {str(k): str(v) for k, v in (result.get("metric") or {}).items()}
        samples = []
        for t, v in result.get("values") or []:
            value = float(v)
            if math.isfinite(value):
                samples.append((float(t), value))
        out.append(Series(labels, tuple(sorted(samples))))
    return out


def read(
    post: Post,
    names: Iterable[str],
    endpoint: str,
    *,
    start: datetime,
    end: datetime,
    step_s: float,
    extra: Mapping[str, str] | None = None,
) -> tuple[str | None, list[Series]]:
    """The first of `names` that has series for the endpoint, with its series."""
    for name in names:
        found = _read_one(post, selector(name, endpoint, extra), start, end, step_s)
        if found:
            return name, found
    return None, []


def _read_one(
    post: Post, query: str, start: datetime, end: datetime, step_s: float
) -> list[Series]:
    merged: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
    piece_start = start
    while piece_start < end:
        piece_end = min(end, piece_start + MAX_SCAN)
        answer = post(
            QUERY_PATH,
            {
                "query": query,
                "start": f"{piece_start.timestamp():.3f}",
                "end": f"{piece_end.timestamp():.3f}",
                "step": f"{step_s:g}s",
                "limit": str(MAX_SERIES),
            },
        )
        for s in _series_of(answer):
            merged[tuple(sorted(s.labels.items()))].extend(s.samples)
        piece_start = piece_end
    return [Series(dict(k), tuple(sorted(set(v)))) for k, v in merged.items()]


Key = tuple[str, str]
"""(variant, instance)."""


def _increases(
    series: Iterable[Series], group: Callable[[Series], Key | None], born_after: float
) -> dict[Key, dict[float, float]]:
    """Per (variant, instance) and step end: how much the counters grew in that step.

    A counter that went down was reset (a restarted container): its new value is the
    step's. A series whose first point comes after `born_after` (the first step) started
    inside the span, from zero (a new container): its first value is its first step's.
    """
    out: dict[Key, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for s in series:
        key = group(s)
        if key is None or not s.samples:
            continue
        first_t, first_v = s.samples[0]
        if first_t > born_after:
            out[key][first_t] += first_v
        for (_, before), (t, after) in itertools.pairwise(s.samples):
            out[key][t] += after - before if after >= before else after
    return out


def _key(s: Series) -> Key | None:
    variant = s.labels.get(VARIANT_LABEL)
    if not variant:
        return None
    return variant, s.labels.get(HOST_LABEL, "")


@dataclass
class _Figures:
    """Step increases of every series an observation needs, per (variant, instance)."""

    scalars: dict[str, dict[Key, dict[float, float]]] = field(default_factory=dict)
    buckets: dict[str, dict[tuple[Key, float], dict[float, float]]] = field(default_factory=dict)

    def at(self, what: str, key: Key, t: float) -> float:
        return self.scalars.get(what, {}).get(key, {}).get(t, 0.0)


def _bucket_increases(
    series: Iterable[Series], born_after: float
) -> dict[tuple[Key, float], dict[float, float]]:
    by_le: dict[tuple[Key, float], list[Series]] = defaultdict(list)
    for s in series:
        key = _key(s)
        try:
            le = float(s.labels.get("le", "nan"))
        except ValueError:
            continue
        if key is not None and not math.isnan(le):
            by_le[(key, le)].append(s)
    return {
        (key, le): _increases(group, _key, born_after).get(key, {})
        for (key, le), group in by_le.items()
    }


def _histogram(fig: _Figures, family: str, key: Key, t: float) -> Histogram | None:
    """The step's histogram from cumulative bucket increases (le ascending, +Inf last)."""
    per_le = {
        le: inc.get(t, 0.0) for (k, le), inc in fig.buckets.get(family, {}).items() if k == key
    }
    if not per_le:
        return None
    finite = sorted(le for le in per_le if math.isfinite(le))
    top = per_le.get(math.inf, max(per_le.values()))
    cumulative = [*(per_le[le] for le in finite), top]
    counts = [max(0.0, cumulative[0])] + [
        max(0.0, b - a) for a, b in itertools.pairwise(cumulative)
    ]
    total = fig.at(family + "_sum", key, t)
    return Histogram(tuple(finite), tuple(counts), total)


def observations(fig: _Figures, step_s: float) -> list[VariantSample]:
    """One observation per (variant, instance) and step in which it finished requests or
    generated tokens."""
    steps: set[tuple[Key, float]] = set()
    for what in ("requests", "generated"):
        for key, per_t in fig.scalars.get(what, {}).items():
            steps.update((key, t) for t, v in per_t.items() if v > 0)
    out = []
    for (variant, instance), t in sorted(steps, key=lambda kt: (kt[1], kt[0])):
        key = (variant, instance)
        drafts = fig.at("drafts", key, t)
        histograms = {}
        for line_key, family in SERVING_HISTOGRAMS:
            h = _histogram(fig, family, key, t)
            if h is not None:
                histograms[line_key] = h
        requests = fig.at("requests", key, t)
        out.append(
            VariantSample(
                variant=variant,
                instance=instance,
                timestamp_ms=int(t * 1000),
                interval_s=step_s,
                mean_acceptance_length=1 + fig.at("accepted", key, t) / drafts if drafts else 0.0,
                draft_tokens=fig.at("draft_tokens", key, t),
                requests=requests,
                output_tokens=fig.at("generated", key, t),
                decode_tokens=max(0.0, fig.at("finished_tokens", key, t) - requests),
                decode_s=fig.at("decode_s", key, t),
                histograms=histograms,
            )
        )
    return out


SCALARS: dict[str, tuple[str, ...]] = {
    "generated": GENERATED,
    "requests": REQUESTS,
    "finished_tokens": FINISHED_TOKENS_SUM,
    "finished_count": FINISHED_TOKENS_COUNT,
    "decode_s": DECODE_S,
    "drafts": DRAFTS,
    "draft_tokens": DRAFT_TOKENS,
    "accepted": ACCEPTED,
}


WATCHED: tuple[tuple[str, ...], ...] = (
    REQUESTS,
    GENERATED,
    FINISHED_TOKENS_SUM,
    DECODE_S,
    *((family + "_bucket",) for _, family in SERVING_HISTOGRAMS),
)
"""The series every variant that serves requests must have: what the decision (decode
speed per stream) and the latency guardrails read. Speculative decoding's are not here
(an incumbent without it has none), nor the errors' (none until one fails)."""


@dataclass(frozen=True)
class SeriesSeen:
    """Which variants each series asked for came back for (by the series' first name)."""

    variants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """first name -> the `aws.sagemaker.variant.name` values its series carried."""
    unlabelled: frozenset[str] = frozenset()
    """First names of series that came back without `aws.sagemaker.variant.name` (their
    figures are counted for no variant)."""


@dataclass(frozen=True)
class DetailedReading:
    """What the detailed metrics said over a span."""

    samples: list[VariantSample]
    errors: dict[str, list[tuple[int, float]]]
    """variant -> (step end ms, requests that ended in an engine error in that step)."""
    missing: str | None = None
    """Why no observation came back (no series of these names for the endpoint)."""
    seen: SeriesSeen = field(default_factory=SeriesSeen)
    """Which variants the series came back for (`series_check` reads it)."""


def read_detailed(
    post: Post, endpoint: str, *, start: datetime, end: datetime, step_s: float
) -> DetailedReading:
    """Every observation between `start` and `end`, from one step before `start` (the
    baseline each first step is measured from)."""
    begin = start - timedelta(seconds=step_s)
    born_after = begin.timestamp() + step_s / 2
    variants: dict[str, frozenset[str]] = {}
    unlabelled: set[str] = set()

    def ask(
        names: tuple[str, ...], extra: Mapping[str, str] | None = None
    ) -> tuple[str | None, list[Series]]:
        found = read(post, names, endpoint, start=begin, end=end, step_s=step_s, extra=extra)
        labels = [s.labels.get(VARIANT_LABEL, "") for s in found[1]]
        variants[names[0]] = frozenset(v for v in labels if v)
        if not all(labels):
            unlabelled.add(names[0])
        return found

    fig = _Figures()
    found_any = False
    for what, names in SCALARS.items():
        name, series = ask(names)
        found_any = found_any or name is not None
        fig.scalars[what] = _increases(series, _key, born_after)
    for _, family in SERVING_HISTOGRAMS:
        _, buckets = ask((family + "_bucket",))
        fig.buckets[family] = _bucket_increases(buckets, born_after)
        _, sums = ask((family + "_sum",))
        fig.scalars[family + "_sum"] = _increases(sums, _key, born_after)
    _, failed = ask(ERRORS, ERROR_MATCH)
    errors: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for (variant, _), per_t in _increases(failed, _key, born_after).items():
        errors[variant].extend((int(t * 1000), n) for t, n in per_t.items() if n > 0)
    missing = None
    if not found_any:
        missing = (
            f"no vLLM series for {endpoint} in CloudWatch's detailed observability metrics "
            f"(looked for {', '.join(GENERATED + REQUESTS)}); detailed observability must be "
            "on for the endpoint's config and the container must expose /metrics"
        )
    seen = SeriesSeen(variants, frozenset(unlabelled))
    return DetailedReading(observations(fig, step_s), dict(errors), missing, seen)


def sigv4_post(clients: Any) -> Post:
    """QueryMetrics over HTTPS, signed with the session's credentials (the same endpoint
    resolution as the CloudWatch client, so AWS_ENDPOINT_URL and regions apply)."""
    from urllib.parse import urlencode

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.httpsession import URLLib3Session

    from peagle_deploy.aws import make_session

    cloudwatch = clients.client("cloudwatch")
    base = str(cloudwatch.meta.endpoint_url).rstrip("/")
    credentials = make_session(clients.region, clients.session).get_credentials()
    if credentials is None:
        raise PromQLError("no AWS credentials to sign the CloudWatch PromQL query with")
    http = URLLib3Session(timeout=30)

    def post(path: str, fields: dict[str, str]) -> Any:
        request = AWSRequest(
            method="POST",
            url=base + path,
            data=urlencode(fields),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        SigV4Auth(credentials.get_frozen_credentials(), SIGNING_NAME, clients.region).add_auth(
            request
        )
        response = http.send(request.prepare())
        try:
            answer = json.loads(response.content or b"{}")
        except ValueError:
            answer = {"status": "error", "error": f"HTTP {response.status_code}, not JSON"}
        if response.status_code == 403:
            raise PromQLError(
                "CloudWatch refused the PromQL query (HTTP 403): the caller needs "
                "cloudwatch:GetMetricData and cloudwatch:ListMetrics"
            )
        if response.status_code >= 400 and isinstance(answer, dict):
            answer.setdefault("status", "error")
            answer.setdefault("error", f"HTTP {response.status_code}")
        return answer

    return post
