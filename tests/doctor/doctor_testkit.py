"""Shared helpers of the doctor tests: an emulated account staged for a plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from peagle_local.emulator import AccountExtensions
from peagle_local.emulator.world import StagedWorld, stage_world

from peagle_deploy.doctor import DoctorReport, run_doctor
from peagle_deploy.doctor.result import CheckResult
from peagle_deploy.plan import Plan, build_plan
from peagle_deploy.spec import load_spec

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
ROLE = f"arn:aws:iam::{ACCOUNT}:role/peagle-doctor-test"
MODEL = "qwen3-coder-30b-a3b-instruct"


def make_plan(model: str = MODEL, **overrides: Any) -> Plan:
    overrides.setdefault("execution_role_arn", ROLE)
    overrides.setdefault("region", REGION)
    return build_plan(load_spec(None, model=model, **overrides))


@dataclass
class Account:
    """One emulated AWS account (moto in-process or LocalAWS) and the calls made in it."""

    mode: str
    session: Any
    quotas: AccountExtensions
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=REGION)

    def stage(self, plan: Plan, **kwargs: Any) -> StagedWorld:
        return stage_world(plan, self.session, self.quotas, **kwargs)

    def doctor(self, plan: Plan) -> DoctorReport:
        return run_doctor(plan, boto_session=self.session)

    def deny(self, operation: str, service: str) -> None:
        """Make the caller's `operation` answer AccessDenied (a caller without the right)."""
        from botocore.exceptions import ClientError

        def refuse(**_: Any) -> None:
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "not authorized (test)"}}, operation
            )

        self.session.events.register(f"before-call.{service}.{operation}", refuse)

    def record(self) -> Callable[..., None]:
        def seen(model: Any, params: Any, **_: Any) -> None:
            self.calls.append((model.name, dict(params)))

        self.session.events.register("before-parameter-build", seen)
        return seen


def by_check(report: DoctorReport) -> dict[str, CheckResult]:
    return {r.check: r for r in report.results}


def statuses(report: DoctorReport) -> dict[str, str]:
    return {r.check: r.status for r in report.results}


def only_failure(report: DoctorReport) -> CheckResult:
    """The one failing line a seeded misconfiguration must produce."""
    failures = report.failures
    assert len(failures) == 1, [r.line() for r in report.results]
    return failures[0]
