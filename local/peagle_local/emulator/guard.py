"""The emulator's front door: who may talk to it, and about which services.

A moto server answers anything from anyone who reaches its port, and on a laptop that is
more than the user's own shell: every web page the browser shows (a page may send
requests to 127.0.0.1, and a DNS-rebinding page reaches it under its own host name),
every other account on the machine (loopback is shared), and, through moto's Lambda,
code run in Docker. The emulated account holds what users paste into it (secrets,
environment values), so `Guard` answers before moto does and lets a request through only
when all of these hold:

1. `Host` is the address the server is bound to (`127.0.0.1:PORT`): a rebinding page
   sends its own host name (421 otherwise);
2. no `Origin` nor `Sec-Fetch-Site`: only browsers send them, an AWS SDK never (403);
3. SigV4 signed with this server's own credentials (`EmulatorCredentials`, new on every
   start), the signature recomputed in full by `sigv4.check` (403 otherwise);
4. the moto service it reaches is one the project calls (`SERVED`; 403 otherwise).

No answer carries CORS headers: moto's server adds flask-cors to every service (with
`Access-Control-Allow-Origin: *` even to a request without an Origin), and `Guard`
drops every `Access-Control-*` header on the way out.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from peagle_local.emulator import sigv4
from peagle_local.emulator.sigv4 import EmulatorCredentials

SERVED: dict[str, str] = {
    # boto3 client name: moto backend (moto.backend_index) -- who calls it
    "application-autoscaling": "applicationautoscaling",  # sdk: scaling policies
    "cloudformation": "cloudformation",  # cli.cdk_stage: the stack's role (doctor --stage)
    "cloudwatch": "cloudwatch",  # experiment: per-variant metrics
    "ecr": "ecr",  # doctor: the image, its repository policy
    "iam": "iam",  # doctor: the role, SimulatePrincipalPolicy
    "kms": "kms",  # doctor: key policies
    "logs": "logs",  # sdk, bench, experiment: the container's log lines
    "s3": "s3",  # doctor: weights and drafter
    "sagemaker": "sagemaker",  # everything
    "sagemaker-runtime": "sagemakerruntime",  # invoke, bench
    "secretsmanager": "secretsmanager",  # sdk: secrets given by reference
    "service-quotas": "servicequotas",  # doctor: the hosting quota
    "ssm": "ssm",  # manifests and records
    "sts": "sts",  # doctor: the caller's account
}
"""The AWS services the emulator serves: those the project's code makes clients for
(tests/emulator/test_emulator_guard.py keeps the two lists equal). Anything else,
Lambda included, and moto's own `/moto-api` and instance-metadata routes, is refused."""

__all__ = ["SERVED", "EmulatorCredentials", "Guard", "refuse", "served_apps"]

FORBIDDEN = "403 Forbidden"
MISDIRECTED = "421 Misdirected Request"
BROWSER_HEADERS = ("HTTP_ORIGIN", "HTTP_SEC_FETCH_SITE")


def served_apps(create_app: Callable[[Any], Any]) -> Callable[[str], Any]:
    """moto's per-service app factory, answering for the `SERVED` backends only."""
    allowed = frozenset(SERVED.values())

    def create(backend: str) -> Any:
        return create_app(backend) if backend in allowed else _NotServed(backend)

    return create


class _NotServed:
    """The app moto's dispatcher gets for a service the emulator does not serve."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        served = ", ".join(sorted(SERVED))
        return refuse(
            environ,
            start_response,
            FORBIDDEN,
            "AccessDenied",
            f"the peagle emulator does not serve {self.backend!r} (it serves: {served})",
        )


class Guard:
    """WSGI middleware in front of moto's dispatcher (see the module's docstring)."""

    def __init__(self, app: Any, host: str, credentials: EmulatorCredentials) -> None:
        self.app = app
        self.host = host
        self.credentials = credentials

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        refusal = self._refusal(environ)
        if refusal is not None:
            status, code, message = refusal
            return refuse(environ, start_response, status, code, message)

        def without_cors(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *exc)

        return self.app(environ, without_cors)

    def _refusal(self, environ: dict[str, Any]) -> tuple[str, str, str] | None:
        """(status, error code, message) when the request may not reach moto, else None."""
        host = environ.get("HTTP_HOST", "")
        if host != self.host:
            return (
                MISDIRECTED,
                "MisdirectedRequest",
                f"the peagle emulator answers for Host {self.host} only (got {host[:80]!r})",
            )
        if any(name in environ for name in BROWSER_HEADERS):
            return (
                FORBIDDEN,
                "AccessDenied",
                "the peagle emulator refuses requests from web pages (Origin / Sec-Fetch-Site)",
            )
        problem = sigv4.check(environ, self.host, self.credentials, _body)
        if problem is not None:
            return FORBIDDEN, problem.code, problem.message
        return None


def _body(environ: dict[str, Any]) -> bytes:
    """The whole request body, read once and put back for moto."""
    stream = environ["wsgi.input"]
    if environ.get("wsgi.input_terminated"):  # chunked: werkzeug ends the stream
        body = stream.read()
    else:
        declared = str(environ.get("CONTENT_LENGTH") or "0")
        length = int(declared) if declared.isdigit() else 0  # garbage: no body (and no match)
        body = stream.read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return bytes(body)


def refuse(
    environ: dict[str, Any], start_response: Any, status: str, code: str, message: str
) -> list[bytes]:
    """An AWS-shaped error that botocore parses into `code` and `message`: JSON for the
    JSON protocols, query-XML for the query protocol and S3 (`_wants_json`)."""
    if not _wants_json(environ):
        from xml.sax.saxutils import escape

        body = (
            "<ErrorResponse><Error><Type>Sender</Type>"
            f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            "</Error><RequestId>peagle-emulator</RequestId></ErrorResponse>"
        ).encode()
        content_type = "text/xml"
    else:
        import json

        body = json.dumps({"__type": code, "message": message}).encode()
        content_type = "application/json"
    start_response(
        status,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("x-amzn-ErrorType", code),
            ("Connection", "close"),  # the refused request's body may be unread
        ],
    )
    return [body]


def _wants_json(environ: dict[str, Any]) -> bool:
    """JSON bodies and bodiless requests signed for a JSON service (Lambda's GETs) get
    JSON; form-encoded ones (the query protocol), S3's and unsigned ones get XML."""
    content_type = environ.get("CONTENT_TYPE", "")
    if "json" in content_type:
        return True
    if content_type.startswith("application/x-www-form-urlencoded"):
        return False
    auth = environ.get("HTTP_AUTHORIZATION", "")
    return bool(auth) and "/s3/aws4_request" not in auth
