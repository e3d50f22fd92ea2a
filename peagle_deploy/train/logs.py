"""A training job's log lines from CloudWatch Logs, bounded, optionally followed.

SageMaker writes a training job's container output to the log group
`/aws/sagemaker/TrainingJobs`, one stream per instance named `<job>/algo-<n>-<epoch>`
(docs/platform-facts.md). The streams are found by the prefix `<job>/` (the slash keeps
`job-r1`'s streams out of `job`'s). Without following, the last `lines` lines of each
stream; following, every new line until the job has ended, then once more to drain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from peagle_deploy.train import progress
from peagle_deploy.train.job import SETTLED, describe

LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
MAX_STREAMS: Final = 50
"""Streams read (one per instance and attempt); a job of more is cut, and says so."""
MAX_EVENTS_PER_CALL: Final = 10_000
"""GetLogEvents' `limit` maximum (botocore's logs model)."""
MAX_PAGES_PER_POLL: Final = 20
FOLLOW_POLL_S: Final = 5.0


def streams(logs: Any, job_name: str) -> list[str]:
    """The job's stream names, oldest first (none yet: an empty list)."""
    from peagle_deploy.aws import is_not_found

    names: list[str] = []
    kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{job_name}/"}
    try:
        while len(names) < MAX_STREAMS:
            page = logs.describe_log_streams(**kwargs)
            names += [str(s["logStreamName"]) for s in page.get("logStreams", [])]
            token = page.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                break
            kwargs["nextToken"] = token
    except Exception as exc:
        if is_not_found(exc):
            return []  # no job has logged in this region yet
        raise
    return names[:MAX_STREAMS]


@dataclass
class _Cursor:
    """Where each stream was read up to (GetLogEvents' nextForwardToken)."""

    tokens: dict[str, str] = field(default_factory=dict)


def _label(stream: str, many: bool) -> str:
    return f"[{stream.split('/', 1)[-1]}] " if many else ""


def _read(logs: Any, stream: str, cursor: _Cursor, tail: int | None) -> Iterator[str]:
    """New events of one stream since the cursor (`tail`: only the last lines, the first
    time a stream is read)."""
    kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream}
    token = cursor.tokens.get(stream)
    if token is not None:
        kwargs |= {"nextToken": token, "startFromHead": True}
    elif tail is not None:
        kwargs |= {"limit": max(1, min(tail, MAX_EVENTS_PER_CALL)), "startFromHead": False}
    else:
        kwargs |= {"startFromHead": True}
    for _ in range(MAX_PAGES_PER_POLL):
        page = logs.get_log_events(**kwargs)
        for event in page.get("events", []):
            yield str(event.get("message", "")).rstrip("\n")
        forward = page.get("nextForwardToken")
        if forward is None or forward == kwargs.get("nextToken"):
            break  # the end of the stream for now (the same token comes back)
        cursor.tokens[stream] = forward
        kwargs = {
            "logGroupName": LOG_GROUP,
            "logStreamName": stream,
            "nextToken": forward,
            "startFromHead": True,
        }
        if tail is not None and token is None:
            break  # a tail is the last lines, not the whole stream from there


def log_lines(
    logs: Any,
    job_name: str,
    *,
    lines: int = 100,
    follow: bool = False,
    sm: Any = None,
    sleep: Callable[[float], None] | None = None,
) -> Iterator[str]:
    """The job's lines: the last `lines` of each stream, then (`follow`, with `sm` to ask
    whether the job has ended) each new line as it comes, until the job ended."""
    cursor = _Cursor()
    pause = sleep or progress._sleep
    while True:
        ended = not follow or str(describe(sm, job_name).get("TrainingJobStatus")) in SETTLED
        found = streams(logs, job_name)
        for stream in found:
            tail = lines if stream not in cursor.tokens else None
            prefix = _label(stream, len(found) > 1)
            for line in _read(logs, stream, cursor, tail):
                yield prefix + line
        if ended:
            return
        pause(FOLLOW_POLL_S)
