"""What does the emulator's front door (local/peagle_local/emulator/guard.py) cost a request?

Against `LocalAWS` in this process: the time of whole STS GetCallerIdentity calls (boto3
client -> HTTP -> the guard -> moto) and, in the same run, the time of the guard's own
checks (Host, browser headers, the SigV4 signature recomputed in full) on the same
request, built once with botocore's signer. Interleaved pairs; the figure is the median
ratio of the guard's time to the whole call's.

    .venv/bin/python benchmarks/emulator_guard.py [--pairs 7] [--calls 200]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from typing import Any


def _environ(aws: Any, body: bytes) -> dict[str, Any]:
    """A WSGI environ of one signed GetCallerIdentity, as werkzeug hands it to the guard."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    host = aws.endpoint_url.removeprefix("http://")
    content_type = "application/x-www-form-urlencoded; charset=utf-8"
    request = AWSRequest(
        "POST", f"http://{host}/", data=body, headers={"Content-Type": content_type}
    )
    credentials = aws.credentials
    SigV4Auth(
        Credentials(credentials.access_key_id, credentials.secret_access_key), "sts", aws.region
    ).add_auth(request)
    environ = {
        "REQUEST_METHOD": "POST",
        "RAW_URI": "/",
        "QUERY_STRING": "",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": host,
    }
    for name, value in request.headers.items():
        if name.lower() != "content-type":
            environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


def _guard_s(guard: Any, environ: dict[str, Any], body: bytes, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        environ["wsgi.input"] = io.BytesIO(body)
        if guard._refusal(environ) is not None:
            raise SystemExit("the guard refused the benchmark's own request")
    return time.perf_counter() - started


def _calls_s(sts: Any, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        sts.get_caller_identity()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    from peagle_local.emulator import LocalAWS
    from peagle_local.emulator.guard import Guard

    body = b"Action=GetCallerIdentity&Version=2011-06-15"
    with LocalAWS() as aws:
        sts = aws.client("sts")
        sts.get_caller_identity()  # service model loaded, connection open
        host = aws.endpoint_url.removeprefix("http://")
        guard = Guard(None, host, aws.credentials)
        environ = _environ(aws, body)
        ratios = []
        for _ in range(args.pairs):
            whole = _calls_s(sts, args.calls)
            checks = _guard_s(guard, environ, body, args.calls)
            ratios.append(checks / whole)
    print(
        f"guard / whole call: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}; {args.pairs} pairs of "
        f"{args.calls} GetCallerIdentity calls); per call {1e6 * checks / args.calls:.0f} us "
        f"of {1e6 * whole / args.calls:.0f} us in the last pair"
    )


if __name__ == "__main__":
    main()
