"""The waiter on its own, with a scripted fake DescribeEndpoint (no moto needed)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from sdk_testkit import ManualClock

from peagle_deploy.sdk import waiter
from peagle_deploy.sdk.waiter import (
    EndpointGoneError,
    WaitInterrupted,
    WaitTimeoutError,
    wait_for_endpoint,
)


class FakeSageMaker:
    """Answers DescribeEndpoint from a list of statuses keyed by the clock."""

    def __init__(self, clock: ManualClock, timeline: list[tuple[float, str | None]]):
        self.clock = clock
        self.timeline = timeline  # (from time, status); None = endpoint gone
        self.calls = 0

    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:  # noqa: N803 (boto3 kwarg)
        self.calls += 1
        status = None
        for start, value in self.timeline:
            if self.clock() >= start:
                status = value
        if status is None:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "Could not find endpoint"}},
                "DescribeEndpoint",
            )
        return {"EndpointName": EndpointName, "EndpointStatus": status}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    c = ManualClock()
    monkeypatch.setattr(waiter, "_clock", c)
    monkeypatch.setattr(waiter, "_sleep", c.advance)
    return c


def test_notices_inservice_within_the_poll_cap(clock: ManualClock) -> None:
    start = clock.now
    sm = FakeSageMaker(clock, [(start, "Creating"), (start + 600.0, "InService")])
    result = wait_for_endpoint(sm, "ep", timeout_s=3600, progress=False)
    assert result.status == "InService"
    assert 600.0 <= result.waited_s <= 602.0  # at most one 2 s poll interval late
    assert [s for s, _ in result.transitions] == ["Creating", "InService"]
    assert result.polls == sm.calls


def test_backoff_starts_fast_and_caps(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    monkeypatch.setattr(waiter, "_sleep", sleep)
    sm = FakeSageMaker(clock, [(clock.now, "Creating"), (clock.now + 20.0, "InService")])
    wait_for_endpoint(sm, "ep", timeout_s=100, poll_interval_s=2.0, progress=False)
    assert sleeps[0] == 0.5
    assert max(sleeps) == 2.0
    assert sleeps == sorted(sleeps)


def test_timeout_and_gone_and_interrupt(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = FakeSageMaker(clock, [(clock.now, "Creating")])
    with pytest.raises(WaitTimeoutError, match="still Creating"):
        wait_for_endpoint(sm, "ep", timeout_s=30, progress=False)
    gone = FakeSageMaker(clock, [(clock.now, "Deleting"), (clock.now + 5.0, None)])
    with pytest.raises(EndpointGoneError, match="does not exist") as info:
        wait_for_endpoint(gone, "ep", timeout_s=30, progress=False)
    assert "deleted while waiting" in str(info.value) and "as Deleting" in str(info.value)
    # A name that never existed (a typo) is not reported as deleted.
    never = FakeSageMaker(clock, [])
    with pytest.raises(EndpointGoneError) as info:
        wait_for_endpoint(never, "typo", timeout_s=30, progress=False)
    assert str(info.value) == "endpoint typo does not exist"

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(waiter, "_sleep", ctrl_c)
    with pytest.raises(WaitInterrupted, match="peagle status ep --wait"):
        wait_for_endpoint(sm, "ep", timeout_s=30, progress=False)


def test_progress_reports_transitions_on_stderr(
    clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    sm = FakeSageMaker(clock, [(clock.now, "Updating"), (clock.now + 9.0, "InService")])
    wait_for_endpoint(sm, "ep", timeout_s=60, progress=True)
    err = capsys.readouterr().err
    assert "ep: Updating" in err and "ep: InService" in err
