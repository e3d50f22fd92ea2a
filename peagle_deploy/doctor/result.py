"""What one doctor check found, and what all of them found together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "warn"]
"""`fail`: the deployment would fail; `warn`: could not check (or a risk that does not
block); `pass`: checked and fine."""


@dataclass(frozen=True)
class CheckResult:
    """One line of the doctor's report."""

    check: str
    """Stable id of the check, `<concern>.<what>` (e.g. `drafter.weights`)."""
    status: Status
    resource: str
    """The S3 location, role, repository or quota the line is about."""
    detail: str
    """What was found, in one line."""
    fix: str = ""
    """What to change, when the status is not `pass`."""

    def line(self) -> str:
        """The result as one plain-text line (for errors and logs)."""
        text = f"{self.status.upper()} {self.check} {self.resource}: {self.detail}"
        return f"{text} (fix: {self.fix})" if self.fix and self.status != "pass" else text

    def to_json(self) -> dict[str, str]:
        return {
            "check": self.check,
            "status": self.status,
            "resource": self.resource,
            "detail": self.detail,
            "fix": self.fix,
        }


def passed(check: str, resource: str, detail: str) -> CheckResult:
    return CheckResult(check, "pass", resource, detail)


def failed(check: str, resource: str, detail: str, fix: str) -> CheckResult:
    return CheckResult(check, "fail", resource, detail, fix)


def warned(check: str, resource: str, detail: str, fix: str = "") -> CheckResult:
    return CheckResult(check, "warn", resource, detail, fix)


@dataclass
class DoctorReport:
    """Every check's result for one plan, in a stable order."""

    endpoint_name: str
    region: str
    results: list[CheckResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    """What doctor cannot see at all, said once (not a warning per check)."""

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "warn"]

    @property
    def ok(self) -> bool:
        """True when nothing blocks the deployment (warnings do not)."""
        return not self.failures

    @property
    def exit_code(self) -> int:
        """0 nothing blocks, 1 a check failed (2, bad input, is raised before any check)."""
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "endpoint_name": self.endpoint_name,
            "region": self.region,
            "elapsed_s": round(self.elapsed_s, 3),
            "summary": {
                status: sum(1 for r in self.results if r.status == status)
                for status in ("pass", "fail", "warn")
            },
            "checks": [r.to_json() for r in self.results],
            "notes": list(self.notes),
        }
