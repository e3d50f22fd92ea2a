"""What an experiment reads from the platform: container metric lines and SageMaker metrics.

- CloudWatch Logs `/aws/sagemaker/Endpoints/<endpoint>`: the peagle-serve metric lines
  (FilterLogEvents with the lines' filter pattern), each with its log stream
  (`<variant>/<instance>`) and timestamp;
- CloudWatch `AWS/SageMaker`, dimensions EndpointName and VariantName: Invocations and
  Invocation5XXErrors, summed over 60-second periods (GetMetricData).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from peagle_serve.contract import metric_filter_pattern

from peagle_deploy.experiment.observations import (
    InvocationCounts,
    LineObservation,
    observation_from_line,
)

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
MAX_LOG_PAGES = 2000
"""FilterLogEvents pages read at most (each up to 10,000 events or 1 MB)."""


def fetch_lines(
    logs: Any, endpoint_name: str, *, start_ms: int, end_ms: int
) -> list[LineObservation]:
    """The container metric lines of every variant between two times, oldest first."""
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
