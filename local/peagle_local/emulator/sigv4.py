"""Is a request to the emulator signed with its credentials? Signature V4, checked in full.

The client's signature is recomputed from the request as it arrived (method, path and
query as sent, the headers it names as signed, the body's SHA-256) with botocore's own
signer (`botocore.auth.SigV4Auth`, `S3SigV4Auth` for S3: the code that signed it) and
the emulator's secret key, and compared in constant time. Checking the access key id
alone would make the id a password sent in clear with every request; the full check
keeps the secret off the wire and ties the signature to what the request asks.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request,\s*SignedHeaders=(?P<headers>[a-z0-9;-]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})"
)
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
HINT = "sign with the key of the export lines `peagle emulator start` printed (new each start)"


@dataclass(frozen=True)
class EmulatorCredentials:
    """The one access key the emulator accepts: new on every start, printed in the
    export lines, known to nobody else. Shaped like AWS's (20 and 40 characters) but
    never one of AWS's (AWS's key ids start with AKIA or ASIA)."""

    access_key_id: str
    secret_access_key: str

    @classmethod
    def new(cls) -> EmulatorCredentials:
        key_id = "PEAGLE" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(14))
        return cls(key_id, secrets.token_urlsafe(30))

    def __repr__(self) -> str:  # never the secret in a log or a traceback
        return f"EmulatorCredentials({self.access_key_id!r}, <secret>)"


_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


@dataclass(frozen=True)
class Problem:
    """Why a request is refused: an AWS error code and a one-line message."""

    code: str
    message: str


def check(
    environ: dict[str, Any],
    host: str,
    credentials: EmulatorCredentials,
    read_body: Callable[[dict[str, Any]], bytes],
) -> Problem | None:
    """None when the request is signed with `credentials`, else why not. `read_body` is
    called only once the access key is the emulator's (nobody else's body is read)."""
    auth = _AUTHORIZATION.fullmatch(environ.get("HTTP_AUTHORIZATION", "").strip())
    if auth is None:
        return _unsigned(environ)
    if not hmac.compare_digest(auth["key"].encode(), credentials.access_key_id.encode()):
        return Problem("InvalidClientTokenId", f"the access key is not this emulator's: {HINT}")
    timestamp = environ.get("HTTP_X_AMZ_DATE", "")
    signed = auth["headers"].split(";")
    target = environ.get("RAW_URI", "")
    if not _AMZ_DATE.fullmatch(timestamp) or timestamp[:8] != auth["date"]:
        return Problem("IncompleteSignature", "X-Amz-Date is missing or not the credential's date")
    if "host" not in signed or not target.startswith("/"):
        return Problem("IncompleteSignature", "the signature must cover Host and a request path")
    headers = {name: _header(environ, name) for name in signed}
    missing = [name for name, value in headers.items() if value is None]
    if missing:
        return Problem("SignatureDoesNotMatch", f"signed headers missing: {', '.join(missing)}")
    body = read_body(environ)
    declared = headers.get("x-amz-content-sha256") or ""
    if _HEX_DIGEST.fullmatch(declared) and declared != hashlib.sha256(body).hexdigest():
        return Problem("XAmzContentSHA256Mismatch", "the body is not the one the request signed")
    request = _request(
        environ["REQUEST_METHOD"], f"http://{host}{target}", headers, body, timestamp=timestamp
    )
    if not hmac.compare_digest(_signature(request, auth, credentials), auth["signature"]):
        return Problem(
            "SignatureDoesNotMatch",
            f"the signature is not made with this emulator's secret key: {HINT}",
        )
    return None


def _unsigned(environ: dict[str, Any]) -> Problem:
    if "X-Amz-Credential=" in environ.get("QUERY_STRING", ""):
        return Problem("AccessDenied", "presigned URLs are not accepted: sign with Authorization")
    if environ.get("HTTP_AUTHORIZATION"):
        return Problem("IncompleteSignature", "the Authorization header is not AWS Signature V4")
    return Problem("MissingAuthenticationToken", f"the request is not signed: {HINT}")


def _header(environ: dict[str, Any], name: str) -> str | None:
    """A request header as the WSGI server passed it on (values of a repeated header are
    joined with commas, as the signer joins them)."""
    key = name.upper().replace("-", "_")
    if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        key = f"HTTP_{key}"
    value = environ.get(key)
    return None if value is None else str(value)


def _request(
    method: str, url: str, headers: dict[str, str | None], body: bytes, *, timestamp: str
) -> Any:
    """The request as botocore's signer saw it: only the signed headers, and its time."""
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    request.context["timestamp"] = timestamp
    return request


def _signature(request: Any, auth: re.Match[str], credentials: EmulatorCredentials) -> str:
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.credentials import Credentials

    signer_class = S3SigV4Auth if auth["service"] == "s3" else SigV4Auth
    signer = signer_class(
        Credentials(credentials.access_key_id, credentials.secret_access_key),
        auth["service"],
        auth["region"],
    )
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))
