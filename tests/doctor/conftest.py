"""Fixtures: an emulated account, in-process (moto.mock_aws) and over HTTP (LocalAWS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from doctor_testkit import REGION, Account, make_plan
from moto import mock_aws
from peagle_local.emulator import AccountExtensions, LocalAWS
from peagle_local.emulator.world import stage_world

from peagle_deploy.aws import make_session


def _test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake keys in this region; nothing from the user's AWS configuration."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture(params=["inprocess", "server"])
def account(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    _test_credentials(monkeypatch)
    if request.param == "inprocess":
        with mock_aws(), AccountExtensions() as quotas:
            yield Account("inprocess", make_session(REGION), quotas)
    else:
        with LocalAWS(region=REGION) as local:
            for key, value in local.env().items():  # its endpoint, its own key
                monkeypatch.setenv(key, value)
            yield Account("server", make_session(REGION), local.account)


@pytest.fixture
def inprocess(monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """Only moto in-process: for the many variations of one check."""
    _test_credentials(monkeypatch)
    with mock_aws(), AccountExtensions() as quotas:
        yield Account("inprocess", make_session(REGION), quotas)


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalAWS]:
    """A LocalAWS server whose account holds everything the doctor's plan needs."""
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with LocalAWS(region=REGION) as aws:
        for key, value in aws.env().items():
            monkeypatch.setenv(key, value)
        stage_world(make_plan(), aws.session(), aws.account)
        yield aws
