"""The doctor as a gate in front of a deployment: stop before any create call."""

from __future__ import annotations

from typing import Any

from peagle_deploy.doctor.coming import DEPLOY, ComingRun
from peagle_deploy.doctor.result import CheckResult, DoctorReport
from peagle_deploy.errors import DeployError
from peagle_deploy.plan import Plan


class DoctorFailedError(DeployError):
    """A doctor check found what would fail the endpoint; nothing was created."""

    def __init__(self, report: DoctorReport) -> None:
        self.report = report
        lines = [line for r in report.failures for line in _lines(r)]
        super().__init__(
            f"doctor: {len(report.failures)} check(s) would fail the deployment of "
            f"{report.endpoint_name}; nothing was created (skip with --no-doctor / "
            "doctor=False):\n  " + "\n  ".join(lines)
        )


def _lines(result: CheckResult) -> list[str]:
    """A failure and its fix on lines of their own: an error line is cut at
    redaction.MESSAGE_CHARS, and a fix (a command to paste) must arrive whole."""
    text = f"{result.status.upper()} {result.check} {result.resource}: {result.detail}"
    return [text, f"  fix: {result.fix}"] if result.fix else [text]


def require_healthy(
    plan: Plan,
    *,
    boto_session: Any = None,
    raise_on_failure: bool = True,
    coming: ComingRun = DEPLOY,
) -> DoctorReport:
    """Run the doctor; raise DoctorFailedError when a check fails (warnings pass).

    `raise_on_failure=False` (a dry run, a preview): the report is returned whatever it
    says, for the caller to show. `coming`: the run it goes before (default: a deploy of
    `plan`).
    """
    from peagle_deploy.doctor.runner import run_doctor

    report = run_doctor(plan, boto_session=boto_session, coming=coming)
    if raise_on_failure and not report.ok:
        raise DoctorFailedError(report)
    return report
