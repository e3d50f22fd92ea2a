"""Watching a training job until it ends, and what its description says in one place.

A training job runs for hours; DescribeTrainingJob is polled with a backoff that grows
from 2 s to 30 s (a job's secondary status changes minutes apart), and every new
SecondaryStatusTransitions message is said once, as SageMaker writes it ("Downloading
the training image", "Training image download completed. Training in progress.", ...).
At the end: the billable seconds and, for spot, the saving SageMaker's console shows,
(1 - BillableTimeInSeconds / TrainingTimeInSeconds). Ctrl-C stops the watching only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.sdk.waiter import Interrupted
from peagle_deploy.train.job import SETTLED, TrainingJobError, describe

FIRST_POLL_S = 2.0
MAX_POLL_S = 30.0
BACKOFF = 1.5

# Indirections the tests replace (no test waits on a real clock).
_sleep: Callable[[float], None] = time.sleep
_clock: Callable[[], float] = time.monotonic

Say = Callable[[str], None]


def watch_hint(job_name: str) -> str:
    return f"peagle train status {job_name}"


class WatchInterrupted(Interrupted):
    """Ctrl-C while watching: the job goes on; `str()` says how to look again."""

    def __init__(self, job_name: str, status: str) -> None:
        super().__init__(
            job_name,
            f"stopped watching training job {job_name} ({status}); SageMaker carries on. "
            f"Look again with `{watch_hint(job_name)}`, stop it with `peagle train stop "
            f"{job_name}`",
        )


@dataclass(frozen=True)
class JobStatus:
    """What DescribeTrainingJob says about a job, for people and for --json."""

    job_name: str
    status: str
    secondary_status: str
    failure_reason: str | None = None
    messages: tuple[str, ...] = ()
    """The SecondaryStatusTransitions, each `Status: StatusMessage`, oldest first."""
    training_seconds: int | None = None
    billable_seconds: int | None = None
    spot: bool = False
    checkpoint_uri: str | None = None
    output_path: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def drafter_uri(self) -> str | None:
        """Where the job's drafter lands (there once it is Completed)."""
        if not self.output_path:
            return None
        from peagle_train.contract import drafter_uri

        return drafter_uri(self.output_path, self.job_name)

    @property
    def spot_savings(self) -> float | None:
        """Share of the training time not billed (spot), as SageMaker computes it."""
        if not self.spot or not self.training_seconds or self.billable_seconds is None:
            return None
        return max(0.0, 1.0 - self.billable_seconds / self.training_seconds)

    def billing_line(self) -> str | None:
        if self.billable_seconds is None:
            return None
        text = f"billable {self.billable_seconds} s"
        if self.training_seconds:
            text += f" of {self.training_seconds} s trained"
        savings = self.spot_savings
        return f"{text} (spot saved {savings:.0%})" if savings is not None else text

    def to_json(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name,
            "status": self.status,
            "secondary_status": self.secondary_status,
            "failure_reason": self.failure_reason,
            "messages": list(self.messages),
            "training_seconds": self.training_seconds,
            "billable_seconds": self.billable_seconds,
            "spot": self.spot,
            "spot_savings": self.spot_savings,
            "checkpoint_uri": self.checkpoint_uri,
            "output_path": self.output_path,
            "drafter_uri": self.drafter_uri,
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
        }


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def job_status(described: Mapping[str, Any]) -> JobStatus:
    transitions = described.get("SecondaryStatusTransitions") or []
    messages = tuple(
        f"{t.get('Status')}: {t.get('StatusMessage')}"
        if t.get("StatusMessage")
        else str(t.get("Status"))
        for t in transitions
        if isinstance(t, Mapping)
    )
    resources = described.get("ResourceConfig") or {}
    return JobStatus(
        job_name=str(described.get("TrainingJobName")),
        status=str(described.get("TrainingJobStatus", "unknown")),
        secondary_status=str(described.get("SecondaryStatus", "")),
        failure_reason=described.get("FailureReason"),
        messages=messages,
        training_seconds=_int(described.get("TrainingTimeInSeconds")),
        billable_seconds=_int(described.get("BillableTimeInSeconds")),
        spot=bool(described.get("EnableManagedSpotTraining")),
        checkpoint_uri=(described.get("CheckpointConfig") or {}).get("S3Uri"),
        output_path=(described.get("OutputDataConfig") or {}).get("S3OutputPath"),
        instance_type=resources.get("InstanceType"),
        instance_count=_int(resources.get("InstanceCount")),
        raw=described,
    )


def _elapsed(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def wait_for_job(
    sm: Any,
    job_name: str,
    *,
    say: Say | None = None,
    until: frozenset[str] = SETTLED,
    timeout_s: float | None = None,
) -> JobStatus:
    """Poll DescribeTrainingJob until the job's status is in `until`; `say` gets one line
    per status change and per new transition message. Raises WatchInterrupted on Ctrl-C
    and TrainingJobError past `timeout_s` (the job is left running either way)."""
    start = _clock()
    delay = FIRST_POLL_S
    seen_messages = 0
    last = ("", "")
    status = "unknown"
    try:
        while True:
            now = job_status(describe(sm, job_name))
            status = now.status
            elapsed = _elapsed(_clock() - start)
            if say is not None and (now.status, now.secondary_status) != last:
                say(f"{job_name}: {now.status} / {now.secondary_status} ({elapsed})")
            last = (now.status, now.secondary_status)
            if say is not None:
                for message in now.messages[seen_messages:]:
                    say(f"  {message}")
            seen_messages = max(seen_messages, len(now.messages))
            if now.status in until:
                if say is not None and now.billing_line():
                    say(f"{job_name}: {now.billing_line()}")
                return now
            if timeout_s is not None and _clock() - start >= timeout_s:
                raise TrainingJobError(
                    f"gave up watching training job {job_name}: it is still {now.status} "
                    f"and goes on (`{watch_hint(job_name)}`)"
                )
            _sleep(delay)
            delay = min(MAX_POLL_S, delay * BACKOFF)
    except KeyboardInterrupt:
        raise WatchInterrupted(job_name, status) from None
