"""Shared helpers of the SDK tests (constants, the manual clock, the emulated-AWS handle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from peagle_local.emulator import MotoExtensions

from peagle_deploy.aws import make_session as aws_session

ROLE = "arn:aws:iam::123456789012:role/peagle-sdk-test"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"
READ_PREFIXES = ("Describe", "List", "Get")


class ManualClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class AwsEnv:
    """One emulated AWS: control API, a session, and the API calls seen through it."""

    mode: str
    ext: MotoExtensions
    session: Any
    clock: ManualClock
    calls: list[str] = field(default_factory=list)

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=REGION)

    def mutating_calls(self) -> list[str]:
        return [c for c in self.calls if not c.startswith(READ_PREFIXES)]

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.session.events.register_first(event, handler)

    def names(self) -> dict[str, list[str]]:
        sm = self.client("sagemaker")
        return {
            "endpoints": sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
            "configs": sorted(
                c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]
            ),
            "models": sorted(m["ModelName"] for m in sm.list_models()["Models"]),
        }


def make_session() -> Any:
    """A fresh session per test (own credentials/events), sharing parsed service models."""
    return aws_session(REGION)
