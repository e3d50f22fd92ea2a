"""The doctor as a gate in front of a deployment: stop before any create call."""

from __future__ import annotations

from typing import Any

from peagle_deploy.doctor.result import DoctorReport
from peagle_deploy.errors import DeployError
from peagle_deploy.plan import Plan


class DoctorFailedError(DeployError):
    """A doctor check found what would fail the endpoint; nothing was created."""

    def __init__(self, report: DoctorReport) -> None:
        self.report = report
        lines = [r.line() for r in report.failures]
        super().__init__(
            f"doctor: {len(lines)} check(s) would fail the deployment of "
            f"{report.endpoint_name}; nothing was created (skip with --no-doctor / "
            "doctor=False):\n  " + "\n  ".join(lines)
        )


def require_healthy(
    plan: Plan, *, boto_session: Any = None, raise_on_failure: bool = True
) -> DoctorReport:
    """Run the doctor; raise DoctorFailedError when a check fails (warnings pass).

    `raise_on_failure=False` (a dry run, a preview): the report is returned whatever it
    says, for the caller to show.
    """
    from peagle_deploy.doctor.runner import run_doctor

    report = run_doctor(plan, boto_session=boto_session)
    if raise_on_failure and not report.ok:
        raise DoctorFailedError(report)
    return report
