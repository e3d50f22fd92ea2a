"""Watching an endpoint until it settles, fast, with a progress line for humans.

boto3's `endpoint_in_service` waiter polls every 30 s; a person at a terminal (and a CI
job) wants to know within seconds. `wait_for_endpoint` polls DescribeEndpoint with a
short, capped backoff (0.5 s growing to `poll_interval_s`, 2 s by default), so it notices
InService at most ~2 s after it happens. On Ctrl-C it leaves the endpoint alone (SageMaker
carries on) and says how to resume watching.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.errors import DeployError

SETTLED = frozenset({"InService", "Failed", "OutOfService"})
IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"})
FIRST_POLL_S = 0.5
BACKOFF = 1.5

# Indirections the tests replace (a Ctrl-C is simulated by a sleep that raises).
_sleep: Callable[[float], None] = time.sleep
_clock: Callable[[], float] = time.monotonic


def resume_hint(endpoint_name: str) -> str:
    return f"peagle status {endpoint_name} --wait"


class WaitTimeoutError(DeployError):
    """The endpoint did not settle in time; it is left as it is (still going)."""

    def __init__(self, endpoint_name: str, status: str, waited_s: float):
        self.endpoint_name = endpoint_name
        self.status = status
        self.waited_s = waited_s
        super().__init__(
            f"gave up waiting for endpoint {endpoint_name} after {waited_s:.0f} s: it is "
            f"still {status}. Nothing was deleted; SageMaker carries on. Watch it with "
            f"`{resume_hint(endpoint_name)}`."
        )


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during an operation on an endpoint; `str()` says what to run to resume.

    Still a KeyboardInterrupt (a script's `except KeyboardInterrupt` keeps working); the
    CLI prints the message and exits 130.
    """

    def __init__(self, endpoint_name: str, message: str):
        self.endpoint_name = endpoint_name
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class WaitInterrupted(Interrupted):
    """Ctrl-C while waiting (between polls or with DescribeEndpoint in flight). The
    endpoint keeps going; `str()` says how to resume."""

    def __init__(self, endpoint_name: str, status: str, waited_s: float):
        self.status = status
        self.waited_s = waited_s
        super().__init__(
            endpoint_name,
            f"stopped watching endpoint {endpoint_name} ({status} after {waited_s:.0f} s). "
            "SageMaker carries on; nothing was cancelled or deleted. Resume watching with "
            f"`{resume_hint(endpoint_name)}` (or run the same deploy again: it waits and then "
            "records the deployment manifest).",
        )


class EndpointGoneError(DeployError):
    """The endpoint disappeared (deleted) while being watched, or never existed."""


@dataclass
class WaitResult:
    description: dict[str, Any]
    status: str
    waited_s: float
    polls: int
    transitions: list[tuple[str, float]] = field(default_factory=list)


def use_progress(progress: bool | None) -> bool:
    """Explicit choice, else on only when stderr is a terminal."""
    if progress is not None:
        return progress
    return sys.stderr.isatty()


def _fmt_elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def wait_for_endpoint(
    sagemaker: Any,
    endpoint_name: str,
    *,
    timeout_s: float,
    poll_interval_s: float = 2.0,
    progress: bool | None = None,
    until: Callable[[dict[str, Any]], bool] | None = None,
    label: str = "",
) -> WaitResult:
    """Poll DescribeEndpoint until the endpoint settles (or `until(description)` is true).

    Raises WaitTimeoutError, WaitInterrupted (Ctrl-C, whether between polls or while a
    DescribeEndpoint call is in flight) or EndpointGoneError; never changes the endpoint.
    """
    from peagle_deploy.aws import is_not_found

    show = use_progress(progress)
    start = _clock()
    delay = min(FIRST_POLL_S, poll_interval_s)
    polls = 0
    status = "unknown"
    transitions: list[tuple[str, float]] = []
    status_cm: Any = None
    console: Any = None
    if show:
        from peagle_deploy.terminal import escaped, plain_console

        console = plain_console(stderr=True)
        shown = escaped(endpoint_name)
        status_cm = console.status(f"{escaped(label) if label else shown}...", spinner="dots")
        status_cm.__enter__()
    try:
        while True:
            try:  # Ctrl-C during the call: the except KeyboardInterrupt below
                description = sagemaker.describe_endpoint(EndpointName=endpoint_name)
            except Exception as exc:
                if is_not_found(exc):
                    # Only "deleted" if it was seen: a mistyped name never existed.
                    raise EndpointGoneError(
                        f"endpoint {endpoint_name} does not exist (deleted while waiting, "
                        f"after {_fmt_elapsed(_clock() - start)} as {status})"
                        if polls
                        else f"endpoint {endpoint_name} does not exist"
                    ) from None
                raise
            polls += 1
            elapsed = _clock() - start
            new_status = str(description.get("EndpointStatus", "unknown"))
            if new_status != status:
                transitions.append((new_status, elapsed))
                if console is not None:
                    console.print(
                        f"{shown}: {escaped(new_status)} ({_fmt_elapsed(elapsed)})",
                        highlight=False,
                    )
                status = new_status
            done = until(description) if until is not None else status in SETTLED
            if done:
                return WaitResult(description, status, elapsed, polls, transitions)
            if elapsed >= timeout_s:
                raise WaitTimeoutError(endpoint_name, status, elapsed)
            if status_cm is not None:
                status_cm.update(
                    f"{shown}: [bold]{escaped(status)}[/] {_fmt_elapsed(elapsed)} "
                    "[dim](Ctrl-C: stop watching)[/]"
                )
            _sleep(min(delay, max(0.0, timeout_s - elapsed)) or delay)
            delay = min(poll_interval_s, delay * BACKOFF)
    except KeyboardInterrupt:
        raise WaitInterrupted(endpoint_name, status, _clock() - start) from None
    finally:
        if status_cm is not None:
            status_cm.__exit__(None, None, None)


def log_tail(
    logs_client: Any, endpoint_name: str, *, limit: int = 20, since_ms: int | None = None
) -> list[str]:
    """The last `limit` lines of the endpoint's newest CloudWatch log stream (best effort).

    Returns [] when the group does not exist or cannot be read: an error report must not
    fail because the logs are missing.
    """
    group = f"/aws/sagemaker/Endpoints/{endpoint_name}"
    try:
        streams = logs_client.describe_log_streams(
            logGroupName=group, orderBy="LastEventTime", descending=True, limit=1
        ).get("logStreams", [])
        if not streams:
            return []
        kwargs: dict[str, Any] = {
            "logGroupName": group,
            "logStreamName": streams[0]["logStreamName"],
            "startFromHead": False,
            "limit": limit,
        }
        if since_ms is not None:
            kwargs["startTime"] = since_ms
        events = logs_client.get_log_events(**kwargs).get("events", [])
    except Exception:
        return []
    return [str(e.get("message", "")).rstrip("\n") for e in events][-limit:]
