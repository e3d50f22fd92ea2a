"""What an experiment reads from the platform, per variant, as `VariantSample`s.

- what each variant served: with the project's image, its peagle-serve metric lines in
  CloudWatch Logs `/aws/sagemaker/Endpoints/<endpoint>` (FilterLogEvents with the lines'
  filter pattern), each with its log stream (`<variant>/<instance>`) and timestamp; with
  any other image, vLLM's own metrics from SageMaker's detailed observability
  (`experiment.detailed`, PromQL);
- how many requests each variant got and failed: CloudWatch `AWS/SageMaker`, dimensions
  EndpointName and VariantName: Invocations and Invocation5XXErrors, one sum per
  60-second period (GetMetricData), each a sample of its variant stamped at the
  period's end. The errors are raised to the requests the engine ended in an error (the
  lines' `errors`, or vLLM's `request_success` with `finished_reason="error"`) where
  those are more (`with_engine_errors`): SageMaker counts a 5XX only when the model's
  response status is one, and a stream's status is 200 before it can fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from peagle_serve.contract import (
    DEFAULT_VARIANT,
    SERVING_KEY,
    VARIANT_DIMENSION,
    metric_filter_pattern,
    parse_metric_line,
)

from peagle_deploy.experiment.observations import VariantSample, sample_from_line

if TYPE_CHECKING:
    from peagle_deploy.experiment.series_check import VariantSeries

DETAILED_STEP_S = 60.0
"""The step at which detailed observability's counters are read (SageMaker publishes
them every 60 s by default)."""
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


SAGEMAKER_NAMESPACE = "AWS/SageMaker"
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
MAX_LOG_PAGES = 2000
"""FilterLogEvents pages read at most (each up to 10,000 events or 1 MB)."""


def fetch_lines(
    logs: Any,
    endpoint_name: str,
    *,
    start_ms: int,
    end_ms: int,
    errors: ErrorTimes | None = None,
) -> list[VariantSample]:
    """The container metric lines of every variant between two times, oldest first;
    engine errors the lines counted go into `errors` when given."""
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


def with_engine_errors(counts: Iterable[VariantSample], errors: ErrorTimes) -> list[VariantSample]:
    """SageMaker's per-minute counts with each variant's errors raised to its engine's.

    A non-streamed engine error is both a 500 and an engine error (adding the two would
    count it twice); a streamed one is only the latter. So each variant's errors so far
    are the larger of the two running totals, and each minute carries what that total
    grew by: a lower bound that never counts one failure twice. Engine errors after the
    last minute SageMaker has published wait for the next reading."""
    out: list[VariantSample] = []
    totals: dict[str, list[float]] = {}  # variant -> [5xx so far, engine so far, given]
    pending = {v: sorted(seen) for v, seen in errors.items()}
    for sample in sorted(counts, key=lambda o: o.timestamp_ms):
        row = totals.setdefault(sample.variant, [0.0, 0.0, 0.0])
        queue = pending.get(sample.variant, [])
        while queue and queue[0][0] <= sample.timestamp_ms:
            row[1] += queue.pop(0)[1]
        row[0] += sample.errors
        now = max(row[0], row[1])
        out.append(sample._replace(errors=now - row[2]))
        row[2] = now
    return out


@dataclass(frozen=True)
class Observed:
    """One reading of an experiment's platform data."""

    served: list[VariantSample]
    """What the variants served (metric lines, or detailed observability)."""
    counts: list[VariantSample]
    """SageMaker's invocations and errors per variant and minute (`with_engine_errors`)."""
    missing: str | None = None
    """Why nothing served came back, when nothing did."""
    stream_errors: ErrorTimes = field(default_factory=dict)
    series: list[VariantSeries] | None = None
    """With detailed observability: which watched series each variant lacks, and why
    (`series_check`); None with the project's lines."""

    @property
    def samples(self) -> list[VariantSample]:
        """Everything, the input of `analysis.analyse`."""
        return [*self.served, *self.counts]


def fetch_observations(
    source: str,
    clients: Any,
    endpoint_name: str,
    variants: Iterable[str],
    *,
    start: datetime,
    end: datetime,
) -> Observed:
    """Every observation of the experiment from `start` to `end`, from its source (the
    project's lines, or SageMaker's detailed metrics), with the invocation counts."""
    errors: ErrorTimes = {}
    missing = reading = series = None
    names = list(variants)
    start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    if source == "lines":
        served = fetch_lines(
            clients.client("logs"), endpoint_name, start_ms=start_ms, end_ms=end_ms, errors=errors
        )
    else:
        from peagle_deploy.experiment.detailed import read_detailed, sigv4_post

        reading = read_detailed(
            sigv4_post(clients), endpoint_name, start=start, end=end, step_s=DETAILED_STEP_S
        )
        served, errors, missing = reading.samples, reading.errors, reading.missing
    counts = fetch_counts(clients.client("cloudwatch"), endpoint_name, names, start=start, end=end)
    if reading is not None:
        from peagle_deploy.experiment.series_check import series_check

        series = series_check(reading.seen, counts, names, now_ms=end_ms)
    return Observed(served, with_engine_errors(counts, errors), missing, errors, series)
