"""Fixtures for the emulator's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from peagle_local.emulator import LocalAWS


class ManualClock:
    """A monotonic clock the test moves by hand, so transitions need no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def local_aws(clock: ManualClock) -> Iterator[LocalAWS]:
    with LocalAWS(clock=clock) as aws:
        yield aws
