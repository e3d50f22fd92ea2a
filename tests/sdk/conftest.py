"""Fixtures: the SDK against moto in-process AND against a moto server on loopback.

Both modes share one manual clock between the SDK's waiter and the emulator's scripted
transitions, so waiting takes no wall time and tests never depend on timing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws
from peagle_local.emulator import LocalAWS, MotoExtensions
from sdk_testkit import REGION, AwsEnv, ManualClock, make_session

from peagle_deploy.sdk import waiter


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["inprocess", "server"])
def aws(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[AwsEnv]:
    for var in (
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SAGEMAKER",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setattr(waiter, "_sleep", clock.advance)
    monkeypatch.setattr(waiter, "_clock", clock)
    if request.param == "inprocess":
        with mock_aws(), MotoExtensions(clock=clock) as ext:
            env = AwsEnv("inprocess", ext, make_session(), clock)
            env.on("before-call", lambda model, **_: env.calls.append(model.name))
            yield env
    else:
        with LocalAWS(region=REGION, clock=clock) as local:
            for key, value in local.env().items():  # its endpoint, its own key
                monkeypatch.setenv(key, value)
            env = AwsEnv("server", local, make_session(), clock)
            env.on("before-call", lambda model, **_: env.calls.append(model.name))
            yield env
