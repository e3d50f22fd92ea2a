"""`deploy_peagle()` and `peagle deploy` run the doctor first and stop before any create."""

from __future__ import annotations

import json
from typing import Any

import pytest
from doctor_testkit import MODEL, REGION, ROLE, make_plan
from peagle_local.emulator import LocalAWS
from peagle_local.emulator.world import clear_prefix

from peagle_deploy.aws import make_session
from peagle_deploy.cli.app import main
from peagle_deploy.doctor import DoctorFailedError
from peagle_deploy.sdk import deploy_peagle

pytestmark = pytest.mark.doctor_gate
READS = ("Get", "List", "Describe", "Head", "Simulate", "BatchGet")


def _recorded(session: Any) -> list[str]:
    calls: list[str] = []
    session.events.register("before-call", lambda model, **_: calls.append(model.name))
    return calls


def _break_drafter(aws: LocalAWS) -> str:
    drafter = make_plan().drafter_uri
    assert drafter is not None
    clear_prefix(aws.client("s3"), drafter)
    return drafter


def test_failing_check_stops_before_any_create(local: LocalAWS) -> None:
    drafter = _break_drafter(local)
    session = make_session(REGION)
    calls = _recorded(session)
    with pytest.raises(DoctorFailedError) as caught:
        deploy_peagle(MODEL, role_arn=ROLE, boto_session=session, wait=False, progress=False)
    assert calls and all(name.startswith(READS) for name in calls), calls
    assert "DescribeEndpoint" not in calls  # the gate runs before the deployment looks
    message = str(caught.value)
    assert f"FAIL drafter.location {drafter}" in message and "nothing was created" in message
    assert local.client("sagemaker").list_models()["Models"] == []


def test_ready_account_deploys(local: LocalAWS) -> None:
    endpoint = deploy_peagle(
        MODEL, role_arn=ROLE, boto_session=make_session(REGION), wait=False, progress=False
    )
    assert endpoint.deployment is not None and endpoint.deployment.action == "create"


def test_doctor_false_skips_the_gate(local: LocalAWS) -> None:
    _break_drafter(local)
    endpoint = deploy_peagle(
        MODEL,
        role_arn=ROLE,
        boto_session=make_session(REGION),
        wait=False,
        progress=False,
        doctor=False,
    )
    assert endpoint.deployment is not None and endpoint.deployment.action == "create"


def test_warnings_reach_the_outcome(local: LocalAWS) -> None:
    local.account._quotas.clear()  # no quota information: could not check
    endpoint = deploy_peagle(
        MODEL, role_arn=ROLE, boto_session=make_session(REGION), wait=False, progress=False
    )
    assert endpoint.deployment is not None
    assert any(w.startswith("doctor: WARN capacity.quota") for w in endpoint.deployment.warnings)


def test_cli_deploy_stops_and_no_doctor_goes_on(
    local: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    drafter = _break_drafter(local)
    code = main(["deploy", MODEL, "--role-arn", ROLE, "--no-wait", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"FAIL drafter.location {drafter}" in " ".join(err.split())
    assert local.client("sagemaker").list_endpoints()["Endpoints"] == []
    code = main(["deploy", MODEL, "--role-arn", ROLE, "--no-wait", "--no-doctor", "--json"])
    assert code == 0, capsys.readouterr().err
    assert len(local.client("sagemaker").list_endpoints()["Endpoints"]) == 1


def test_dry_run_reports_doctor_failures_without_failing(
    local: LocalAWS, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run is a preview: what doctor finds is shown, the exit code is 0."""
    drafter = _break_drafter(local)
    code = main(["deploy", MODEL, "--role-arn", ROLE, "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "dry run: would create" in out
    assert f"doctor: FAIL drafter.location {drafter}" in " ".join(err.split())
    code = main(["deploy", MODEL, "--role-arn", ROLE, "--dry-run", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["dry_run"] is True
    assert any(w.startswith("doctor: FAIL drafter.location") for w in doc["warnings"])
    assert local.client("sagemaker").list_models()["Models"] == []


def test_dry_run_help_says_it_is_a_preview(capsys: pytest.CaptureFixture[str]) -> None:
    main(["deploy", "--help"])
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "failing checks are shown, not fatal" in text


def test_role_arn_over_2048_characters_exits_2_before_any_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens here
    role = "arn:aws:iam::123456789012:role/" + "r" * 3000
    for command in ("doctor", "deploy", "plan"):
        code = main([command, MODEL, "--role-arn", role])
        out, err = capsys.readouterr()
        assert code == 2 and out == "", (command, err)
        assert err.startswith("error: execution_role_arn: is 3031 characters long")


def test_the_fix_of_a_long_failure_arrives_whole() -> None:
    """A quota failure with an experiment's fleets and the endpoint's own (issue 30): the
    error printed every line cut at MESSAGE_CHARS, so the fix command lost its end."""
    from peagle_deploy.doctor.result import DoctorReport, failed
    from peagle_deploy.redaction import MESSAGE_CHARS, safe_lines

    fix = (
        "aws service-quotas request-service-quota-increase --region us-east-1 "
        "--service-code sagemaker --quota-code L-1A2B3C4D --desired-value 6"
    )
    detail = (
        "the applied quota is 4 instances; the endpoint needs 4 (2 for "
        "initial_instance_count + 2 for the experiment's candidate); 2 already run: "
        "peagle-gpt-oss-20b-dev 2 (this endpoint, until an update has moved traffic)"
    )
    resource = "sagemaker quota 'ml.g7e.2xlarge for endpoint usage' (us-east-1)"
    report = DoctorReport(
        "peagle-gpt-oss-20b-dev", REGION, [failed("capacity.quota", resource, detail, fix)]
    )
    assert len(f"FAIL capacity.quota {resource}: {detail} (fix: {fix})") > MESSAGE_CHARS
    shown = safe_lines(str(DoctorFailedError(report)))
    assert fix in shown and detail in shown and "…" not in shown
