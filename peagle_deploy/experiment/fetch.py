"""What an experiment reads from the platform: container metric lines and SageMaker metrics.

- CloudWatch Logs `/aws/sagemaker/Endpoints/<endpoint>`: the peagle-serve metric lines
  (FilterLogEvents with the lines' filter pattern), each with its log stream
  (`<variant>/<instance>`) and timestamp;
- CloudWatch `AWS/SageMaker`, dimensions EndpointName and VariantName: Invocations and
  Invocation5XXErrors, one sum per 60-second period (GetMetricData), each a sample of
  its variant stamped at the period's end.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from peagle_serve.contract import metric_filter_pattern

from peagle_deploy.experiment.observations import VariantSample, sample_from_line

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
MAX_LOG_PAGES = 2000
"""FilterLogEvents pages read at most (each up to 10,000 events or 1 MB)."""


def fetch_lines(
    logs: Any, endpoint_name: str, *, start_ms: int, end_ms: int
) -> list[VariantSample]:
    """The container metric lines of every variant between two times, oldest first."""
    from botocore.exceptions import ClientError

    kwargs: dict[str, Any] = {
        "logGroupName": LOG_GROUP_PREFIX + endpoint_name,
        "startTime": start_ms,
        "endTime": end_ms + 1,
        "filterPattern": metric_filter_pattern(),
    }
    found: list[VariantSample] = []
    try:
        for _ in range(MAX_LOG_PAGES):
            page = logs.filter_log_events(**kwargs)
            for event in page.get("events", []):
                seen = sample_from_line(
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
) -> list[VariantSample]:
    """Invocations and 5xx errors per variant and minute over [start, end] (whole
    minutes), one sample per variant and minute with data, stamped at the minute's end."""
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
    ids = {f"{key}{i}": (key, i) for i in range(len(names)) for key, _ in metrics}
    sums: dict[tuple[int, int], dict[str, float]] = {}
    kwargs: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": _minute_floor(start.astimezone(UTC)),
        "EndTime": _minute_floor(end.astimezone(UTC)) + timedelta(minutes=1),
    }
    while True:
        page = cloudwatch.get_metric_data(**kwargs)
        for result in page.get("MetricDataResults", []):
            key, index = ids[str(result["Id"])]
            points = zip(result.get("Timestamps", []), result.get("Values", []), strict=False)
            for stamp, value in points:
                at = int(stamp.timestamp() * 1000) + 60_000  # the period's end
                row = sums.setdefault((index, at), {"invocations": 0.0, "errors": 0.0})
                row[key] += float(value)
        token = page.get("NextToken")
        if not token:
            break
        kwargs["NextToken"] = token
    return [
        VariantSample(names[i], at, 60.0, invocations=row["invocations"], errors=row["errors"])
        for (i, at), row in sorted(sums.items(), key=lambda item: item[0][1])
    ]
