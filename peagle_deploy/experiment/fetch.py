"""What an experiment reads from the platform, per variant.

- what each variant served: with the project's image, its peagle-serve metric lines in
  CloudWatch Logs `/aws/sagemaker/Endpoints/<endpoint>` (FilterLogEvents with the lines'
  filter pattern), each with its log stream (`<variant>/<instance>`) and timestamp; with
  any other image, vLLM's own metrics from SageMaker's detailed observability
  (`experiment.detailed`, PromQL);
- how many requests each variant got and failed: CloudWatch `AWS/SageMaker`, dimensions
  EndpointName and VariantName: Invocations and Invocation5XXErrors, summed over
  60-second periods (GetMetricData); the error count is the larger of that and the
  requests the engine ended in an error (the lines' `errors`, or vLLM's
  `request_success` with `finished_reason="error"`): SageMaker counts a 5XX only when the
  model's response status is one, and a stream's status is 200 before it can fail.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from peagle_serve.contract import (
    DEFAULT_VARIANT,
    SERVING_KEY,
    VARIANT_DIMENSION,
    metric_filter_pattern,
    parse_metric_line,
)

from peagle_deploy.experiment.observations import (
    InvocationCounts,
    LineObservation,
    observation_from_line,
)

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
MAX_LOG_PAGES = 2000
"""FilterLogEvents pages read at most (each up to 10,000 events or 1 MB)."""


ErrorTimes = dict[str, list[tuple[int, float]]]
"""variant -> (ms since the epoch, requests ended in an engine error)."""


def line_errors(message: str, stream: str, timestamp_ms: int) -> tuple[str, int, float] | None:
    """(variant, time, errors) of a metric line that counted engine errors."""
    doc = parse_metric_line(message)
    served = doc.get(SERVING_KEY) if doc else None
    errors = served.get("errors") if isinstance(served, dict) else None
    if not isinstance(errors, int | float) or isinstance(errors, bool) or errors <= 0:
        return None
    assert doc is not None
    variant = doc.get(VARIANT_DIMENSION)
    if not isinstance(variant, str) or not variant:
        variant = stream.partition("/")[0] or DEFAULT_VARIANT
    return variant, timestamp_ms, float(errors)


def _count_errors(event: Mapping[str, Any], errors: ErrorTimes) -> None:
    failed = line_errors(
        str(event.get("message", "")),
        str(event.get("logStreamName", "")),
        int(event.get("timestamp", 0)),
    )
    if failed is not None:
        variant, at, count = failed
        errors.setdefault(variant, []).append((at, count))


def fetch_lines(
    logs: Any,
    endpoint_name: str,
    *,
    start_ms: int,
    end_ms: int,
    errors: ErrorTimes | None = None,
) -> list[LineObservation]:
    """The container metric lines of every variant between two times, oldest first;
    engine errors the lines counted go into `errors` when given."""
    from botocore.exceptions import ClientError

    kwargs: dict[str, Any] = {
        "logGroupName": LOG_GROUP_PREFIX + endpoint_name,
        "startTime": start_ms,
        "endTime": end_ms + 1,
        "filterPattern": metric_filter_pattern(),
    }
    found: list[LineObservation] = []
    try:
        for _ in range(MAX_LOG_PAGES):
            page = logs.filter_log_events(**kwargs)
            for event in page.get("events", []):
                seen = observation_from_line(
                    str(event.get("message", "")),
                    stream=str(event.get("logStreamName", "")),
                    timestamp_ms=int(event.get("timestamp", 0)),
                )
                if seen is not None:
                    found.append(seen)
                if errors is not None:
                    _count_errors(event, errors)
            token = page.get("nextToken")
            if not token:
                break
            kwargs["nextToken"] = token
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise  # no log group yet: nothing written
    return sorted(found, key=lambda o: o.timestamp_ms)


def _minute_floor(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def fetch_counts(
    cloudwatch: Any,
    endpoint_name: str,
    variants: Iterable[str],
    *,
    start: datetime,
    end: datetime,
) -> dict[str, InvocationCounts]:
    """Invocations and 5xx errors per variant, summed over [start, end] (whole minutes)."""
    names = list(variants)
    metrics = (("invocations", "Invocations"), ("errors", "Invocation5XXErrors"))
    queries = [
        {
            "Id": f"{key}{i}",
            "MetricStat": {
                "Metric": {
                    "Namespace": SAGEMAKER_NAMESPACE,
                    "MetricName": metric,
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": endpoint_name},
                        {"Name": "VariantName", "Value": variant},
                    ],
                },
                "Period": 60,
                "Stat": "Sum",
            },
            "ReturnData": True,
        }
        for i, variant in enumerate(names)
        for key, metric in metrics
    ]
    sums: dict[str, float] = {str(q["Id"]): 0.0 for q in queries}
    kwargs: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": _minute_floor(start.astimezone(UTC)),
        "EndTime": _minute_floor(end.astimezone(UTC)) + timedelta(minutes=1),
    }
    while True:
        page = cloudwatch.get_metric_data(**kwargs)
        for result in page.get("MetricDataResults", []):
            sums[result["Id"]] += float(sum(result.get("Values", [])))
        token = page.get("NextToken")
        if not token:
            break
        kwargs["NextToken"] = token
    return {
        variant: InvocationCounts(sums[f"invocations{i}"], sums[f"errors{i}"])
        for i, variant in enumerate(names)
    }


@dataclass(frozen=True)
class Observed:
    """One reading of an experiment's platform data."""

    lines: list[LineObservation]
    counts: dict[str, InvocationCounts]
    """Over the whole span; `errors_5xx` also covers the engine errors after a stream
    started (`_with_errors`)."""
    recent: dict[str, InvocationCounts]
    """Likewise, over the guardrails' recent span."""
    missing: str | None = None
    """Why no observation came back, when none did."""
    stream_errors: ErrorTimes = field(default_factory=dict)


def _with_errors(
    counts: Mapping[str, InvocationCounts], errors: ErrorTimes, since_ms: int
) -> dict[str, InvocationCounts]:
    """Each variant's errors: the larger of SageMaker's 5XX count and the engine's error
    count since `since_ms`. A non-streamed engine error is both a 500 and an engine error
    (adding the two would count it twice); a streamed one is only the latter, since its
    status was 200 already. Both kinds at once: a lower bound."""
    engine: dict[str, float] = defaultdict(float)
    for variant, seen in errors.items():
        engine[variant] += sum(n for t, n in seen if t >= since_ms)
    return {
        v: InvocationCounts(c.invocations, max(c.errors_5xx, engine.get(v, 0.0)))
        for v, c in counts.items()
    }


def fetch_observations(
    source: str,
    clients: Any,
    endpoint_name: str,
    variants: Iterable[str],
    *,
    start: datetime,
    end: datetime,
    recent_start: datetime,
    step_s: float,
) -> Observed:
    """Every observation of the experiment from `start` to `end`, from its source (the
    project's lines, or SageMaker's detailed metrics), with the invocation counts."""
    names = list(variants)
    errors: ErrorTimes = {}
    missing = None
    start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    if source == "lines":
        lines = fetch_lines(
            clients.client("logs"), endpoint_name, start_ms=start_ms, end_ms=end_ms, errors=errors
        )
    else:
        from peagle_deploy.experiment.detailed import read_detailed, sigv4_post

        reading = read_detailed(
            sigv4_post(clients), endpoint_name, start=start, end=end, step_s=step_s
        )
        lines, errors, missing = reading.lines, reading.errors, reading.missing
    cloudwatch = clients.client("cloudwatch")
    counts = fetch_counts(cloudwatch, endpoint_name, names, start=start, end=end)
    recent = fetch_counts(cloudwatch, endpoint_name, names, start=recent_start, end=end)
    recent_ms = int(recent_start.timestamp() * 1000)
    return Observed(
        lines=lines,
        counts=_with_errors(counts, errors, start_ms),
        recent=_with_errors(recent, errors, recent_ms),
        missing=missing,
        stream_errors=errors,
    )
