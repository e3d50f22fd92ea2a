"""AWS failures that reach the CLI become one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from peagle_deploy.cli.app import aws_error_message, main


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "peagle-some-endpoint", "--region", "us-east-1"],
        # invoke wraps the botocore error in its own (InvokeError): the same hint (issue 31)
        ["invoke", "peagle-some-endpoint", "hello", "--region", "us-east-1"],
        ["invoke", "peagle-some-endpoint", "hello", "--region", "us-east-1", "--stream"],
    ],
    ids=["status", "invoke", "invoke --stream"],
)
def test_missing_credentials_is_one_line_with_the_hint(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for var in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER",
    ):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("PEAGLE_AWS_MAX_ATTEMPTS", "1")
    code = main(argv)
    assert code == 1
    err = capsys.readouterr().err
    assert "Unable to locate credentials" in err
    assert "configure AWS credentials" in err and "peagle demo" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_client_error_names_operation_and_code() -> None:
    exc = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}},
        "CreateModel",
    )
    assert aws_error_message(exc) == "CreateModel failed: AccessDeniedException: not allowed"


def test_other_errors_are_not_swallowed() -> None:
    assert aws_error_message(ValueError("a bug")) is None
