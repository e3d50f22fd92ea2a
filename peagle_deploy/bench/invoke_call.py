"""InvokeEndpointWithResponseStream requests as boto3 builds them, for an asyncio client.

Nothing about AWS is re-implemented here. A boto3 client is created as boto3 would
create it (credential chain, region, `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`,
the service's endpoint rules) and prepares ONE real request, which is captured at
botocore's `before-send` event instead of being sent. Its URL, its headers and the
credential scope of its signature (signing region and name, as botocore chose them) are
what every benchmark request reuses; each request body is then signed by botocore's
`SigV4Auth` with the session's current credentials (refreshed by botocore when due).
Error responses are parsed by botocore's protocol parser and turned into the exception
class boto3 would raise, so failure reasons read exactly as they did through boto3.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from botocore import auth
from botocore.awsrequest import AWSRequest

from peagle_deploy.errors import InputError, PeagleError

OPERATION = "InvokeEndpointWithResponseStream"
CONTENT_TYPE = "application/json"
# Set per request by the signer or by the HTTP client; everything else is reused.
_PER_REQUEST_HEADERS = frozenset(
    {
        "authorization",
        "x-amz-date",
        "x-amz-security-token",
        "content-length",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
        "expect",
    }
)
_SCOPE = re.compile(r"^AWS4-HMAC-SHA256 Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request,")


class _SigningRequest(AWSRequest):
    """An AWSRequest whose `body` is its bytes.

    botocore's `AWSRequest.body` prepares a copy of the whole request on every access,
    and the signer reads it several times; for a bytes body the prepared body is these
    same bytes. (About 15 % of a signature's cost.)
    """

    @property
    def body(self) -> Any:
        return self.data


class _Captured(Exception):  # noqa: N818 (control flow, not an error)
    """Carries the prepared request out of botocore's send path."""


def _capture(request: Any, **_: Any) -> None:
    raise _Captured(request)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


class InvokeStreamCall:
    """What one InvokeEndpointWithResponseStream call needs, derived from a boto3 client.

    `client` is a `sagemaker-runtime` client; `credentials` the session's credentials
    object (botocore `Credentials` or `RefreshableCredentials`).
    """

    def __init__(
        self,
        client: Any,
        credentials: Any,
        endpoint_name: str,
        *,
        target_variant: str | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        self.client = client
        self.credentials = credentials
        self.ca_bundle = ca_bundle
        """The CA certificates file botocore verifies TLS with (AWS_CA_BUNDLE or certifi's)."""
        operation = client.meta.service_model.operation_model(OPERATION)
        self.event_stream_shape = operation.output_shape.members["Body"]
        params: dict[str, Any] = {
            "EndpointName": endpoint_name,
            "Body": b"{}",
            "ContentType": CONTENT_TYPE,
        }
        if target_variant:
            params["TargetVariant"] = target_variant
        prepared = self._prepare(params)
        self.url: str = prepared.url
        self.headers: dict[str, str] = {
            _text(name): _text(value)
            for name, value in prepared.headers.items()
            if _text(name).lower() not in _PER_REQUEST_HEADERS
        }
        auth = _text(prepared.headers.get("Authorization") or "")
        match = _SCOPE.match(auth)
        if match is None:
            scheme = auth.split(" ", 1)[0] or "no signature"
            raise PeagleError(
                f"the SageMaker target signs requests with SigV4, but botocore chose {scheme} "
                "for this endpoint"
            )
        self.signing_region, self.signing_name = match.group(1), match.group(2)
        self._signed: dict[tuple[bytes, str, str, str | None], dict[str, str]] = {}
        self._signed_at = ""
        self.signature_reuses = 0

    @classmethod
    def from_environment(
        cls,
        endpoint_name: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        target_variant: str | None = None,
        max_pool_connections: int = 10,
    ) -> InvokeStreamCall:
        """The boto3 session of this environment (profile, env vars, config files)."""
        import boto3
        import botocore.session
        from botocore.config import Config
        from botocore.exceptions import NoRegionError
        from botocore.httpsession import get_cert_path

        core = botocore.session.get_session()
        session = boto3.Session(botocore_session=core, region_name=region)
        credentials = session.get_credentials()
        if credentials is None:
            raise PeagleError(
                "no AWS credentials found for the SageMaker target "
                "(set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
            )
        config = Config(
            max_pool_connections=max_pool_connections,
            retries={"total_max_attempts": 1, "mode": "standard"},
        )
        try:
            client = session.client("sagemaker-runtime", config=config, endpoint_url=endpoint_url)
        except NoRegionError:
            raise InputError(
                "--region", "no AWS region configured", "an AWS region, e.g. us-west-2"
            ) from None
        ca_bundle = get_cert_path(core.get_config_variable("ca_bundle") or True)
        return cls(
            client,
            credentials,
            endpoint_name,
            target_variant=target_variant,
            ca_bundle=str(ca_bundle) if ca_bundle else None,
        )

    def _prepare(self, params: dict[str, Any]) -> Any:
        events = self.client.meta.events
        name = f"before-send.{self.client.meta.service_model.service_id.hyphenize()}.{OPERATION}"
        events.register_first(name, _capture)
        try:
            self.client.invoke_endpoint_with_response_stream(**params)
        except _Captured as captured:
            return captured.args[0]
        finally:
            events.unregister(name, _capture)
        raise RuntimeError("botocore sent the request instead of letting it be captured")

    def sign(self, body: bytes, credentials: Any) -> dict[str, str]:
        """The headers of one request: the captured ones plus botocore's SigV4 signature.

        A signature is a function of the request, the second (`X-Amz-Date`) and the
        credentials only, so the same body signed again within the same second reuses
        botocore's result. Why: botocore's signer costs ~150 us per call, and a closed
        loop at 700 requests/s over HumanEval's 164 prompts repeats bodies within a
        second; signing every one was a third of the client's CPU at concurrency 128.
        """
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())  # botocore's X-Amz-Date format
        key = (body, stamp, credentials.access_key, credentials.token)
        cached = self._signed.get(key)
        if cached is not None:
            self.signature_reuses += 1
            return cached
        request = _SigningRequest(method="POST", url=self.url, data=body, headers=self.headers)
        auth.SigV4Auth(credentials, self.signing_name, self.signing_region).add_auth(request)
        headers = {name: _text(value) for name, value in request.headers.items()}
        signed_at = headers.get("X-Amz-Date", stamp)
        if signed_at != self._signed_at:  # a new second: older signatures are never reused
            self._signed.clear()
            self._signed_at = signed_at
        self._signed[(body, signed_at, credentials.access_key, credentials.token)] = headers
        return headers

    async def signed_headers(self, body: bytes) -> dict[str, str]:
        """`sign` with the current credentials; a due refresh runs off the event loop."""
        creds = self.credentials
        refresh_needed = getattr(creds, "refresh_needed", None)
        if refresh_needed is not None and refresh_needed():
            frozen = await asyncio.to_thread(creds.get_frozen_credentials)
        else:
            frozen = creds.get_frozen_credentials()
        return self.sign(body, frozen)

    def error_reason(self, status: int, headers: Any, body: bytes) -> str:
        """A non-200 answer as boto3 reports it: `ModelError: An error occurred (...)`."""
        from botocore.exceptions import ClientError
        from botocore.parsers import create_parser

        service = self.client.meta.service_model
        operation = service.operation_model(OPERATION)
        parser = create_parser(service.protocol)
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        parsed = parser.parse(
            {"status_code": status, "headers": lowered, "body": body}, operation.output_shape
        )
        code = str(parsed.get("Error", {}).get("Code") or status)
        # One attempt, never retried (a throttled request is counted, not hidden behind a
        # retry that inflates its latency); boto3 with total_max_attempts=1 says so.
        parsed.setdefault("ResponseMetadata", {}).update(MaxAttemptsReached=True, RetryAttempts=0)
        exc: ClientError = self.client.exceptions.from_code(code)(parsed, OPERATION)
        return f"{type(exc).__name__}: {exc}"
