"""Suite-wide fixtures."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _deploy_gate_off_unless_marked(request: pytest.FixtureRequest, monkeypatch: Any) -> None:
    """`deploy_peagle()` runs `peagle doctor` first. The deployment tests drive the
    create/update state machine against an emulator that holds no model artifacts, role,
    image or quotas, so the gate would stop each of them; here it answers "nothing
    blocks". The gate itself is tested in tests/doctor, in tests marked `doctor_gate`,
    which run it for real against an emulated account staged for the plan.
    """
    if request.node.get_closest_marker("doctor_gate"):
        return
    from peagle_deploy import doctor
    from peagle_deploy.doctor.result import DoctorReport

    def nothing_blocks(plan: Any, **_: Any) -> DoctorReport:
        return DoctorReport(plan.endpoint_name, plan.region)

    monkeypatch.setattr(doctor, "require_healthy", nothing_blocks)
