"""Memory of `peagle bench` against an endpoint that answers 400 with an endless body.

Each mode runs in a fresh process against a real loopback server
(tests/bench/endless_server.py) and reports the process's peak RSS growth (VmHWM) and
the bytes the server wrote before the client hung up:

- `capped`: the URL target and the SageMaker target as shipped (`read_capped`), N
  requests each;
- `unbounded`: what the targets did before, `await resp.read()`, for one request with a
  request timeout of `--seconds` (it reads until then).

    .venv/bin/python benchmarks/bench_error_body.py [--requests 20] [--seconds 2] [--json]

Compare the two rows of one run: the capped growth stays flat with the number of
requests, the unbounded one grows with the time allowed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "user", "content": "hi"}]


def _hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


async def _capped(url: str, requests: int) -> int:
    import os

    from peagle_deploy.bench import OpenAITarget, SageMakerTarget

    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
    failed = 0
    for target in (
        OpenAITarget(url + "/v1", model="m", request_timeout_s=60),
        SageMakerTarget("ep", region="us-east-1", endpoint_url=url, request_timeout_s=60),
    ):
        await target.start(1)
        for _ in range(requests):
            out = await target.request(MESSAGES, 8, 0.0)
            failed += not out.success
        await target.close()
    return failed


async def _unbounded(url: str, seconds: float) -> int:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=seconds)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            async with session.post(url + "/v1/chat/completions", data=b"{}") as resp:
                await resp.read()
        except TimeoutError:
            pass
    return 1


def child(mode: str, requests: int, seconds: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    import aiohttp  # noqa: F401 (imported before the baseline, as in the capped mode)
    import botocore.session  # noqa: F401
    from endless_server import EndlessErrorServer

    import peagle_deploy.bench  # noqa: F401

    with EndlessErrorServer() as server:
        before = _hwm_kib()
        if mode == "capped":
            count = 2 * requests
            failed = asyncio.run(_capped(server.url, requests))
        else:
            count = 1
            failed = asyncio.run(_unbounded(server.url, seconds))
        server.wait_ended(count, 30)
        growth = _hwm_kib() - before
        sent = sum(server.sent)
    return {"mode": mode, "requests": count, "failed": failed,
            "peak_rss_growth_mib": round(growth / 1024, 1),
            "server_sent_mib": round(sent / (1 << 20), 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20, help="capped requests per target")
    parser.add_argument("--seconds", type=float, default=2.0, help="unbounded read time")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--child", choices=["capped", "unbounded"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.requests, args.seconds)))
        return 0
    rows = []
    for mode in ("capped", "unbounded"):
        done = subprocess.run(
            [sys.executable, __file__, "--child", mode, "--requests", str(args.requests),
             "--seconds", str(args.seconds)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
        rows.append(json.loads(done.stdout))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'mode':<10} {'requests':>8} {'peak RSS growth MiB':>20} {'server sent MiB':>16}")
    for row in rows:
        print(
            f"{row['mode']:<10} {row['requests']:>8} {row['peak_rss_growth_mib']:>20} "
            f"{row['server_sent_mib']:>16}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
