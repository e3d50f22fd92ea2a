"""`peagle doctor`: exit codes, JSON, and the table's one line per check."""

from __future__ import annotations

import json

import pytest
from doctor_testkit import MODEL, REGION, ROLE, make_plan
from peagle_local.emulator import LocalAWS

from peagle_deploy.cli.app import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lists_every_check(local: LocalAWS, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "doctor", MODEL, "--role-arn", ROLE, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True
    assert {c["status"] for c in doc["checks"]} == {"pass"}
    assert {"check", "status", "resource", "detail", "fix"} <= set(doc["checks"][0])
    assert doc["endpoint_name"] == make_plan().endpoint_name and doc["plan_warnings"]


def test_failure_exits_1_with_the_resource_and_the_fix(
    local: LocalAWS, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # each row on one line (piped tables fold at COLUMNS)
    local.account.set_endpoint_quota("ml.g7e.2xlarge", 0, region=REGION)
    code, out, _ = _run(capsys, "doctor", MODEL, "--role-arn", ROLE)
    flat = " ".join(out.replace("│", " ").split())
    assert code == 1
    assert "FAIL capacity.quota sagemaker quota 'ml.g7e.2xlarge for endpoint usage'" in flat
    assert "request-service-quota-increase" in flat
    assert "1 check(s) would fail the deployment" in flat
    code, out, _ = _run(capsys, "doctor", MODEL, "--role-arn", ROLE, "--json")
    assert code == 1 and json.loads(out)["summary"]["fail"] == 1


def test_warnings_alone_exit_0(local: LocalAWS, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "doctor", MODEL, "--json")  # no role: role checks not run
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["warn"] >= 1 and doc["summary"]["fail"] == 0


def test_bad_input_exits_2_before_any_aws_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens here
    code, out, err = _run(capsys, "doctor", MODEL, "--instance-type", "ml.nope.xlarge")
    assert code == 2 and out == ""
    assert err.startswith("error: instance_type:") and len(err.strip().splitlines()) == 1


def test_missing_credentials_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    code, _, err = _run(capsys, "doctor", MODEL, "--role-arn", ROLE)
    assert code == 1 and "configure AWS credentials" in err and "Traceback" not in err
