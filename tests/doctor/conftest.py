"""Fixtures: an emulated account, in-process (moto.mock_aws) and over HTTP (LocalAWS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from doctor_testkit import REGION, Account
from moto import mock_aws

from peagle_deploy.aws import make_session
from peagle_deploy.emulator import AccountExtensions, LocalAWS


@pytest.fixture(params=["inprocess", "server"])
def account(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    if request.param == "inprocess":
        with mock_aws(), AccountExtensions() as quotas:
            yield Account("inprocess", make_session(REGION), quotas)
    else:
        with LocalAWS(region=REGION) as local:
            monkeypatch.setenv("AWS_ENDPOINT_URL", local.endpoint_url)
            yield Account("server", make_session(REGION), local.account)


@pytest.fixture
def inprocess(monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """Only moto in-process: for the many variations of one check."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(), AccountExtensions() as quotas:
        yield Account("inprocess", make_session(REGION), quotas)
