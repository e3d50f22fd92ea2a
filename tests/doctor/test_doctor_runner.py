"""The runner: every check, concurrently, in a stable order; a crash is not a pass."""

from __future__ import annotations

from typing import Any

import pytest
from doctor_testkit import Account, make_plan, statuses

from peagle_deploy.doctor import runner
from peagle_deploy.doctor.context import DoctorContext
from peagle_deploy.doctor.result import CheckResult

ALL_CHECKS = [
    "model-data.location",
    "drafter.location",
    "drafter.config",
    "drafter.weights",
    "drafter.target",
    "drafter.trained-tokens",  # the catalog knows the Qwen3-Coder head's count (18)
    "role.trust",
    "role.s3-model-data",
    "role.s3-drafter",
    "role.ecr",
    "capacity.quota",
    "image.exists",
]


def test_a_ready_account_passes_every_check(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    report = account.doctor(plan)
    assert list(statuses(report)) == ALL_CHECKS
    assert set(statuses(report).values()) == {"pass"}
    assert report.ok and report.exit_code == 0
    doc = report.to_json()
    assert doc["summary"] == {"pass": len(ALL_CHECKS), "fail": 0, "warn": 0}
    assert [c["check"] for c in doc["checks"]] == ALL_CHECKS


def test_only_read_calls_are_made(inprocess: Account) -> None:
    plan = make_plan(kms_key_id=inprocess.client("kms").create_key()["KeyMetadata"]["KeyId"])
    inprocess.stage(plan)
    inprocess.record()
    inprocess.doctor(plan)
    names = {name for name, _ in inprocess.calls}
    reads = ("Get", "List", "Describe", "Head", "Simulate", "BatchGet")
    assert names and all(name.startswith(reads) for name in names), names


def test_a_check_that_crashes_is_reported_as_not_checked(
    inprocess: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ctx: DoctorContext) -> list[CheckResult]:
        raise RuntimeError("boom")

    checks: list[tuple[str, Any]] = [
        (name, broken if name == "capacity.quota" else check) for name, check in runner.CHECKS
    ]
    monkeypatch.setattr(runner, "CHECKS", tuple(checks))
    plan = make_plan()
    inprocess.stage(plan)
    report = inprocess.doctor(plan)
    result = {r.check: r for r in report.results}["capacity.quota"]
    assert result.status == "warn" and result.detail == "could not check: RuntimeError: boom"
    assert len(report.results) == len(ALL_CHECKS) and report.ok


def test_no_drafter_checks_without_speculation(inprocess: Account) -> None:
    plan = make_plan(**{"speculative.mode": "none"})
    inprocess.stage(plan)
    checks = list(statuses(inprocess.doctor(plan)))
    assert not [c for c in checks if c.startswith("drafter")] and "role.s3-drafter" not in checks
