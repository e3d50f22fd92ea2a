"""The SageMaker target's requests are the requests boto3 would send (same clock, same keys).

boto3 prepares the reference request itself (its `before-send` event hands over the
fully signed request, which is then not sent), so the comparison is with botocore's own
signer, endpoint resolution and headers, not with a copy of them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.config import Config

from peagle_deploy.bench.invoke_call import InvokeStreamCall
from peagle_deploy.errors import InputError, PeagleError

FIXED = datetime.datetime(2026, 11, 23, 6, 1, 25)
BODY = b'{"messages": [{"role": "user", "content": "caf\\u00e9 \xc3\xa9"}], "stream": true}'


class _Sent(Exception):  # noqa: N818 (control flow)
    pass


def boto3_request(client: Any, **params: Any) -> Any:
    """The request boto3 sends for these parameters, signed, captured before sending."""

    def capture(request: Any, **_: Any) -> None:
        raise _Sent(request)

    name = "before-send.sagemaker-runtime.InvokeEndpointWithResponseStream"
    client.meta.events.register_first(name, capture)
    try:
        client.invoke_endpoint_with_response_stream(**params)
    except _Sent as sent:
        return sent.args[0]
    finally:
        client.meta.events.unregister(name, capture)
    raise AssertionError("boto3 sent the request")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[pytest.MonkeyPatch]:
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    yield monkeypatch


@pytest.mark.parametrize("variant", [None, "blue"])
@pytest.mark.parametrize(
    "endpoint_env",
    [
        {},
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"},
        {"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "https://runtime.example.test:8443/prefix"},
    ],
)
def test_signed_request_equals_boto3s(
    env: pytest.MonkeyPatch, variant: str | None, endpoint_env: dict[str, str]
) -> None:
    for name, value in endpoint_env.items():
        env.setenv(name, value)
    with mock.patch("botocore.auth.get_current_datetime", return_value=FIXED):
        call = InvokeStreamCall.from_environment("my-endpoint", target_variant=variant)
        ours = call.sign(BODY, call.credentials.get_frozen_credentials())
        client = boto3.Session().client(
            "sagemaker-runtime", config=Config(retries={"total_max_attempts": 1})
        )
        params: dict[str, Any] = {
            "EndpointName": "my-endpoint",
            "Body": BODY,
            "ContentType": "application/json",
        }
        if variant:
            params["TargetVariant"] = variant
        theirs = boto3_request(client, **params)
    assert call.url == theirs.url
    if endpoint_env:
        assert call.url.startswith(next(iter(endpoint_env.values())))
    headers = {_text(k): _text(v) for k, v in theirs.headers.items()}
    # Same canonical request and signature: same signed headers, same Authorization.
    assert ours["Authorization"] == headers["Authorization"]
    assert "Signature=" in ours["Authorization"]
    for name in ("X-Amz-Date", "X-Amz-Security-Token", "Content-Type"):
        assert ours[name] == headers[name]
    assert ours.get("X-Amzn-SageMaker-Target-Variant") == headers.get(
        "X-Amzn-SageMaker-Target-Variant"
    )
    assert theirs.body == BODY


def test_signature_changes_with_body_and_second_and_is_reused_within_one(
    env: pytest.MonkeyPatch,
) -> None:
    call = InvokeStreamCall.from_environment("ep")
    creds = call.credentials.get_frozen_credentials()
    with mock.patch("botocore.auth.get_current_datetime", return_value=FIXED):
        first = call.sign(BODY, creds)
        other = call.sign(BODY + b" ", creds)
    later = FIXED + datetime.timedelta(seconds=1)
    with mock.patch("botocore.auth.get_current_datetime", return_value=later):
        next_second = call.sign(BODY, creds)
    assert first["Authorization"] != other["Authorization"]
    assert first["Authorization"] != next_second["Authorization"]
    assert next_second["X-Amz-Date"] == "20261123T060126Z"
    # Same body in the same (real) second: botocore's result is reused, not recomputed.
    from botocore.auth import SigV4Auth

    reused = call.signature_reuses
    real = SigV4Auth.add_auth
    with mock.patch.object(SigV4Auth, "add_auth", autospec=True, side_effect=real) as add_auth:
        a = call.sign(b"same", creds)
        b = call.sign(b"same", creds)
    assert a["Authorization"].startswith("AWS4-HMAC-SHA256 ")
    if a["X-Amz-Date"] == b["X-Amz-Date"]:  # not split by a second boundary
        assert b is a
        assert add_auth.call_count == 1
        assert call.signature_reuses == reused + 1
    else:
        assert add_auth.call_count == 2


def test_missing_region_and_credentials_name_what_is_missing(env: pytest.MonkeyPatch) -> None:
    env.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(InputError) as err:
        InvokeStreamCall.from_environment("ep")
    assert err.value.field == "--region"
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.delenv(var)
    with pytest.raises(PeagleError, match="no AWS credentials"):
        InvokeStreamCall.from_environment("ep", region="us-east-1")


@pytest.mark.parametrize(
    ("status", "error_type", "body", "expected"),
    [
        (
            400,
            "ThrottlingException",
            b'{"message": "Rate exceeded"}',
            "ClientError: An error occurred (ThrottlingException) when calling the "
            "InvokeEndpointWithResponseStream operation (reached max retries: 0): "
            "Rate exceeded",
        ),
        (
            403,
            "ExpiredTokenException",
            b'{"message": "The security token included in the request is expired"}',
            "ClientError: An error occurred (ExpiredTokenException) when calling the "
            "InvokeEndpointWithResponseStream operation (reached max retries: 0): "
            "The security token included in the request is expired",
        ),
        (
            424,
            "ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/",
            b'{"Message": "Received server error (500) from primary", "OriginalStatusCode": 500}',
            "ModelError: An error occurred (ModelError) when calling the "
            "InvokeEndpointWithResponseStream operation (reached max retries: 0): "
            "Received server error (500) from primary",
        ),
    ],
)
def test_error_answers_read_as_boto3_reports_them(
    env: pytest.MonkeyPatch, status: int, error_type: str, body: bytes, expected: str
) -> None:
    call = InvokeStreamCall.from_environment("ep")
    headers = {"X-Amzn-ErrorType": error_type, "Content-Type": "application/json"}
    assert call.error_reason(status, headers, body) == expected


def test_tls_uses_the_ca_bundle_boto3_would(env: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from botocore.httpsession import get_cert_path

    env.delenv("AWS_CA_BUNDLE", raising=False)
    assert InvokeStreamCall.from_environment("ep").ca_bundle == get_cert_path(True)
    bundle = tmp_path / "corporate-ca.pem"
    bundle.write_text("not read here\n")
    env.setenv("AWS_CA_BUNDLE", str(bundle))
    assert InvokeStreamCall.from_environment("ep").ca_bundle == str(bundle)
