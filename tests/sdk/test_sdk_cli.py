"""`peagle deploy/status/invoke/list/delete` end to end against the loopback emulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sdk_testkit import MODEL, ROLE, AwsEnv

from peagle_deploy.cli.app import main

NAME = "peagle-qwen3-coder-30b-a3b-instruct-dev"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("aws", ["server"], indirect=True)
def test_cli_lifecycle(aws: AwsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    aws.ext.script_endpoint(NAME, creating_s=20.0, updating_s=20.0)
    plan = _json(capsys, "deploy", MODEL, "--role-arn", ROLE, "--dry-run")
    assert (plan["action"], plan["dry_run"]) == ("create", True)
    created = _json(capsys, "deploy", MODEL, "--role-arn", ROLE)
    assert (created["action"], created["status"]) == ("create", "InService")
    again = _json(capsys, "deploy", MODEL, "--role-arn", ROLE)
    assert again["action"] == "noop"
    updated = _json(
        capsys,
        "deploy",
        MODEL,
        "--role-arn",
        ROLE,
        "-k",
        "5",
        "--rollout",
        "linear",
        "--alarm",
        "peagle-5xx",
    )
    assert updated["action"] == "update"
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)
    routing = desc["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "LINEAR"

    status = _json(capsys, "status", NAME, "--wait")
    assert status["status"] == "InService"
    assert status["endpoint_config_name"] == updated["endpoint_config_name"]
    assert status["manifest"]["content_hash"] == updated["content_hash"]
    assert status["manifest"]["deployed_by"] == "peagle deploy"
    code, out, _ = _run(capsys, "status", NAME)
    assert code == 0 and f"manifest: spec {updated['content_hash']}" in out

    code, out, _ = _run(capsys, "invoke", NAME, "Say hi", "--stream", "--max-tokens", "6")
    assert code == 0 and out.strip()
    streamed = _json(capsys, "invoke", NAME, "Say hi", "--stream", "--max-tokens", "6")
    assert streamed["usage"]["completion_tokens"] == 6
    plain = _json(capsys, "invoke", NAME, "Say hi", "--max-tokens", "6")
    assert plain["choices"][0]["message"]["content"] == streamed["text"]

    listed = _json(capsys, "list")
    assert [(e["endpoint_name"], e["stage"]) for e in listed] == [(NAME, "dev")]
    assert _json(capsys, "list", "--stage", "prod") == []

    code, _, err = _run(capsys, "delete", NAME)
    assert code == 1 and "--yes" in err
    assert aws.names()["endpoints"] == [NAME]
    deleted = _json(capsys, "delete", NAME, "--yes")
    assert deleted["endpoint_deleted"] is True
    assert aws.names() == {"endpoints": [], "configs": [], "models": []}
    gone = _json(capsys, "delete", NAME, "--yes")
    assert gone["endpoint_deleted"] is False
    code, _, err = _run(capsys, "status", NAME)
    assert code == 1 and "not found" in err


@pytest.mark.parametrize("aws", ["server"], indirect=True)
def test_cli_deploy_errors_are_one_line(aws: AwsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "deploy", MODEL, "--json")
    assert code == 2 and out == ""
    assert err.startswith("error: execution_role_arn:") and "Traceback" not in err
    assert aws.calls == []
    aws.ext.script_endpoint(NAME, creating_s=5.0, fail_reason="capacity", log_lines=["boom"])
    code, _, err = _run(capsys, "deploy", MODEL, "--role-arn", ROLE, "--no-progress")
    assert code == 1
    assert "failed: capacity" in err and "boom" in err
    assert aws.names() == {"endpoints": [], "configs": [], "models": []}


@pytest.mark.parametrize("aws", ["server"], indirect=True)
def test_cli_status_wait_reports_failed(aws: AwsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    aws.ext.script_endpoint(NAME, creating_s=5.0, fail_reason="capacity", log_lines=["oom"])
    _json(capsys, "deploy", MODEL, "--role-arn", ROLE, "--no-wait")
    code, out, _ = _run(capsys, "status", NAME, "--wait", "--json")
    assert code == 1
    doc = json.loads(out)
    assert (doc["status"], doc["failure_reason"], doc["log_tail"]) == (
        "Failed",
        "capacity",
        ["oom"],
    )


@pytest.mark.parametrize("aws", ["server"], indirect=True)
@pytest.mark.parametrize("timeout", ["-1", "0"])
def test_cli_timeout_must_be_positive(
    aws: AwsEnv, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    """A nonsense --timeout is a usage error, not a deploy that "gives up after 0 s"."""
    code, out, err = _run(capsys, "deploy", MODEL, "--role-arn", ROLE, "--timeout", timeout)
    assert code == 2 and out == ""
    assert "--timeout" in err and "Traceback" not in err
    assert aws.calls == []
    code, _, err = _run(capsys, "status", NAME, "--wait", "--timeout", timeout)
    assert code == 2 and "--timeout" in err


@pytest.mark.parametrize("aws", ["server"], indirect=True)
def test_cli_dry_run_says_what_it_would_do(aws: AwsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "deploy", MODEL, "--role-arn", ROLE, "--dry-run")
    assert code == 0 and f"would create {NAME} (now absent)" in " ".join(out.split())
    _json(capsys, "deploy", MODEL, "--role-arn", ROLE, "--no-progress")
    code, out, _ = _run(capsys, "deploy", MODEL, "--role-arn", ROLE, "--dry-run")
    text = " ".join(out.split())
    assert code == 0 and f"nothing to do: {NAME} (InService) already serves" in text
    assert "noop" not in text
    code, out, _ = _run(capsys, "deploy", MODEL, "--role-arn", ROLE, "-k", "5", "--dry-run")
    assert code == 0 and "would update (blue/green)" in " ".join(out.split())
