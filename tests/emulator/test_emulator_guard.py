"""The emulator on a laptop (issue 29, item 3): only its own Host, no web page, only its
own key, only the services the project calls, no CORS headers, no Docker.

Each finding is reproduced with real HTTP against `LocalAWS` (the server `peagle
emulator start` runs): a DNS-rebinding Host, a browser's Origin, another key, a body
changed after signing, Lambda.
"""

from __future__ import annotations

import http.client
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from peagle_local.emulator import LocalAWS

ROOT = Path(__file__).resolve().parents[2]
LIST_ROLES = b"Action=ListRoles&Version=2010-05-08"
FORM = "application/x-www-form-urlencoded; charset=utf-8"


def _port(aws: LocalAWS) -> int:
    return int(aws.endpoint_url.rsplit(":", 1)[1])


def _signed_headers(
    aws: LocalAWS, body: bytes, *, host: str | None = None, key: tuple[str, str] | None = None
) -> dict[str, str]:
    """An IAM ListRoles request signed as botocore signs it (for `host`, with `key`)."""
    env = aws.env()
    access, secret = key or (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
    url = f"http://{host or f'127.0.0.1:{_port(aws)}'}/"
    request = AWSRequest("POST", url, data=body, headers={"Content-Type": FORM})
    SigV4Auth(Credentials(access, secret), "iam", "us-east-1").add_auth(request)
    return {**dict(request.headers.items()), "Host": url.split("/")[2]}


def _send(
    aws: LocalAWS, headers: dict[str, str], body: bytes = LIST_ROLES, method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", _port(aws), timeout=30)
    try:
        conn.request(method, "/", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _cors(headers: dict[str, str]) -> list[str]:
    return [name for name in headers if name.startswith("access-control-")]


def test_a_signed_request_is_answered_without_cors_headers(local_aws: LocalAWS) -> None:
    status, headers, body = _send(local_aws, _signed_headers(local_aws, LIST_ROLES))
    assert status == 200 and b"<ListRolesResponse" in body
    assert _cors(headers) == []  # moto's flask-cors sent Access-Control-Allow-Origin: *


def test_a_dns_rebinding_host_is_refused(local_aws: LocalAWS) -> None:
    """A page of rebind.example whose name now resolves to 127.0.0.1: the browser sends
    its own host name. Even signed right for that host, the request is refused."""
    host = f"rebind.example:{_port(local_aws)}"
    status, headers, body = _send(local_aws, _signed_headers(local_aws, LIST_ROLES, host=host))
    assert status == 421
    assert f"Host 127.0.0.1:{_port(local_aws)} only".encode() in body
    assert _cors(headers) == []


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("POST", {"Origin": "https://attacker.example"}),
        ("POST", {"Origin": "null"}),
        ("POST", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}),
        (
            "OPTIONS",
            {"Origin": "https://attacker.example", "Access-Control-Request-Method": "POST"},
        ),
    ],
)
def test_a_request_from_a_web_page_is_refused(
    local_aws: LocalAWS, method: str, extra: dict[str, str]
) -> None:
    headers = {**_signed_headers(local_aws, LIST_ROLES), **extra}
    status, answer_headers, body = _send(local_aws, headers, method=method)
    assert status == 403 and b"web pages" in body
    assert _cors(answer_headers) == []  # the browser hands the page nothing


@pytest.mark.parametrize(
    ("key", "code"),
    [
        (
            ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "InvalidClientTokenId",
        ),
        (("testing", "testing"), "InvalidClientTokenId"),  # what every moto server accepts
        ((None, "not-the-secret"), "SignatureDoesNotMatch"),  # its key id, another secret
    ],
)
def test_another_key_is_refused(
    local_aws: LocalAWS, key: tuple[str | None, str], code: str
) -> None:
    access = key[0] or local_aws.env()["AWS_ACCESS_KEY_ID"]
    client = boto3.client(
        "sagemaker",
        endpoint_url=local_aws.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=access,
        aws_secret_access_key=key[1],
    )
    with pytest.raises(ClientError) as refused:
        client.list_endpoints()
    assert refused.value.response["Error"]["Code"] == code
    assert "peagle emulator start" in refused.value.response["Error"]["Message"]


def test_an_unsigned_request_is_refused(local_aws: LocalAWS) -> None:
    status, _, body = _send(local_aws, {"Host": f"127.0.0.1:{_port(local_aws)}"})
    assert status == 403 and b"MissingAuthenticationToken" in body
    unsigned = boto3.client(
        "s3",
        endpoint_url=local_aws.endpoint_url,
        region_name="us-east-1",
        config=Config(signature_version=botocore_unsigned()),
    )
    with pytest.raises(ClientError) as refused:
        unsigned.list_buckets()
    assert refused.value.response["Error"]["Code"] == "MissingAuthenticationToken"


def botocore_unsigned() -> Any:
    from botocore import UNSIGNED

    return UNSIGNED


def test_a_body_changed_after_signing_is_refused(local_aws: LocalAWS) -> None:
    headers = _signed_headers(local_aws, LIST_ROLES)
    changed = b"Action=DeleteRole&RoleName=x&Version=2010-05-08"
    headers["Content-Length"] = str(len(changed))
    status, _, body = _send(local_aws, headers, changed)
    assert status == 403 and b"SignatureDoesNotMatch" in body


def test_every_start_has_its_own_key() -> None:
    with LocalAWS() as one:
        first = one.env()
    with LocalAWS() as two:
        second = two.env()
    assert first["AWS_ACCESS_KEY_ID"] != second["AWS_ACCESS_KEY_ID"]
    assert first["AWS_SECRET_ACCESS_KEY"] != second["AWS_SECRET_ACCESS_KEY"]
    assert not first["AWS_ACCESS_KEY_ID"].startswith(("AKIA", "ASIA"))  # never AWS's


READ_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "application-autoscaling": ("describe_scalable_targets", {"ServiceNamespace": "sagemaker"}),
    "cloudformation": ("list_stacks", {}),
    "cloudwatch": ("list_metrics", {}),
    "ecr": ("describe_repositories", {}),
    "iam": ("list_roles", {}),
    "kms": ("list_keys", {}),
    "logs": ("describe_log_groups", {}),
    "s3": ("list_buckets", {}),
    "sagemaker": ("list_endpoints", {}),
    "secretsmanager": ("list_secrets", {}),
    "service-quotas": ("list_service_quotas", {"ServiceCode": "sagemaker"}),
    "ssm": ("describe_parameters", {}),
    "sts": ("get_caller_identity", {}),
}


def test_every_service_the_project_calls_is_served(local_aws: LocalAWS) -> None:
    for service, (operation, params) in READ_CALLS.items():
        answer = getattr(local_aws.client(service), operation)(**params)
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200, service
    runtime = local_aws.client("sagemaker-runtime")
    with pytest.raises(ClientError) as missing:  # served: the emulator's own answer
        runtime.invoke_endpoint(EndpointName="none", Body=b"{}", ContentType="application/json")
    assert "Endpoint none of account" in missing.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("service", "operation", "backend"),
    [("lambda", "list_functions", "awslambda"), ("sqs", "list_queues", "sqs")],
)
def test_a_service_the_project_does_not_call_is_refused(
    local_aws: LocalAWS, service: str, operation: str, backend: str
) -> None:
    with pytest.raises(ClientError) as refused:
        getattr(local_aws.client(service), operation)()
    error = refused.value.response["Error"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Code"] == "AccessDenied" and f"does not serve '{backend}'" in error["Message"]


def test_moto_control_routes_are_refused(local_aws: LocalAWS) -> None:
    """moto's `/moto-api` (its dashboard, and a reset of every account) and the
    instance-metadata route (credentials) are not AWS services the project calls."""
    port = _port(local_aws)
    env = local_aws.env()
    for path in ("/moto-api/data.json", "/latest/meta-data/iam/security-credentials/"):
        request = AWSRequest("GET", f"http://127.0.0.1:{port}{path}")
        credentials = Credentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])
        SigV4Auth(credentials, "sts", "us-east-1").add_auth(request)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", path, headers=dict(request.headers.items()))
            response = conn.getresponse()
            assert response.status == 403 and b"does not serve" in response.read(), path
        finally:
            conn.close()


_CLIENT_CALL = re.compile(r"""(?:\bclient|make_client)\(\s*["']([a-z0-9-]+)["']""")


def test_the_served_services_are_the_ones_the_code_calls() -> None:
    """Every service the package and the stand-ins make a client for, and no other."""
    from peagle_local.emulator.guard import SERVED

    called = set()
    for root in (ROOT / "peagle_deploy", ROOT / "local" / "peagle_local"):
        for path in root.rglob("*.py"):
            called |= set(_CLIENT_CALL.findall(path.read_text(encoding="utf-8")))
    assert called == set(SERVED)


def test_moto_starts_no_docker_container(local_aws: LocalAWS) -> None:
    """Lambda functions (through CloudFormation custom resources, log subscriptions) and
    Batch jobs run in Docker in moto: not while the emulator is installed."""
    from moto.utilities.docker_utilities import DockerModel

    with pytest.raises(RuntimeError, match="starts no Docker container"):
        _ = DockerModel().docker_client
