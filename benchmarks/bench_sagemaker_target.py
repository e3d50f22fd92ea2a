#!/usr/bin/env python3
"""The SageMaker target next to the URL target, side by side in one run (issue 12).

Server: the loopback server in its own process (its own interpreter and event loop),
at raised priority when allowed (nice -10, e.g. as root: on a shared machine the
stand-in endpoint must not be what is starved), with known pacing: TTFT 50 ms, then one
token every 2 ms, 64 tokens per request, one token per event. It answers the same
stream as OpenAI SSE on /v1/chat/completions (the URL target) and in SageMaker's
InvokeEndpointWithResponseStream framing, PayloadPart event-stream messages, on
/endpoints/<name>/invocations-response-stream (the SageMaker target, pointed there by
AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME with throw-away credentials; every request is
SigV4-signed as against AWS).

Per level both targets run in turns (URL, SageMaker, URL, ...) for --rounds rounds, so
both see the same machine; medians over rounds are compared. "Server tok/s" is what the
pacing allows: c x 64 / (50 ms + 63 x 2 ms); "server TTFT" the median TTFT the server
really produced in each run (GET /loopback/ttft; asyncio timers fire up to 1 ms late).
`--workers-at C` also runs level C with --workers 2 for both targets.

Goals: at c=128 the SageMaker target keeps >= 0.9x the URL target's output tok/s and
its median TTFT is within 15 ms of the URL target's; at c=1 and c=8 both targets'
median TTFT is within 2 ms of the server's.

Where the client's CPU goes: at c=128 a single-process client is CPU-bound on a
2-core machine (the server takes the other core). The SageMaker target does what the
URL target does plus botocore's event-stream decoding of every PayloadPart (pure
Python, about a quarter of the URL target's whole per-event cost) and SigV4 signing
(botocore; one signature per distinct body and second).

    .venv/bin/python benchmarks/bench_sagemaker_target.py [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from peagle_local.emulator.loopback import TTFT_PATH, LoopbackProcess, sagemaker_runtime_env

from peagle_deploy.bench import BenchSettings, OpenAITarget, SageMakerTarget, SweepConfig, run_sweep

TTFT_MS = 50.0
TOKEN_DELAY_MS = 2.0
TOKENS = 64
REQUESTS = {1: 24, 8: 96, 128: 1536}
REQUEST_S = (TTFT_MS + (TOKENS - 1) * TOKEN_DELAY_MS) / 1000  # one request, as paced
TARGETS = ("url", "sagemaker")


def server_ttft_ms(root: str) -> float | None:
    """The median TTFT the loopback server produced since the last call (then reset)."""
    with urllib.request.urlopen(root + TTFT_PATH, timeout=10) as resp:
        median = json.load(resp)["median_ms"]
    return None if median is None else float(median)


def measure(
    target: Any, concurrency: int, requests: int, workers: int, root: str
) -> dict[str, Any]:
    config = SweepConfig(
        settings=BenchSettings(
            concurrency=[concurrency],
            num_prompts=requests,
            warmup=concurrency,  # every connection of the pool opened before measuring
            max_tokens=TOKENS,
        ),
        progress=False,
        workers=workers,
    )
    server_ttft_ms(root)  # forget what earlier runs produced
    level = run_sweep(target, config).levels[0].to_dict()
    if level["failed"]:
        raise RuntimeError(f"{target.label}: failures {level['errors']}")
    level["server_ttft_ms"] = server_ttft_ms(root)
    return level


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over rounds; each client's TTFT against the server's in the same run."""
    med = statistics.median
    out: dict[str, Any] = {}
    for name, runs in rows.items():
        out[f"{name}_output_throughput"] = med(r["output_throughput"] for r in runs)
        out[f"{name}_median_ttft_ms"] = med(r["median_ttft_ms"] for r in runs)
        out[f"{name}_ttft_over_server_ms"] = med(
            r["median_ttft_ms"] - r["server_ttft_ms"] for r in runs
        )
        out[f"{name}_runs"] = [
            {k: r[k] for k in ("output_throughput", "median_ttft_ms", "server_ttft_ms")}
            for r in runs
        ]
    out["server_ttft_ms"] = med(r["server_ttft_ms"] for runs in rows.values() for r in runs)
    # Each round's URL and SageMaker runs are neighbours in time: their ratio is the
    # comparison least disturbed by what else the machine does.
    out["paired_ratio_median"] = med(
        b["output_throughput"] / a["output_throughput"]
        for a, b in zip(rows["url"], rows["sagemaker"], strict=True)
    )
    return out


def checks_for(name: str, c: int, lv: dict[str, Any]) -> dict[str, bool]:
    ratio = lv["sagemaker_output_throughput"] / lv["url_output_throughput"]
    paired = lv["paired_ratio_median"]
    if c >= 128:
        gap = abs(lv["sagemaker_median_ttft_ms"] - lv["url_median_ttft_ms"])
        return {
            f"{name}: SageMaker tok/s >= 0.9x URL ({ratio:.2f}x of the medians, "
            f"{paired:.2f}x per round)": min(ratio, paired) >= 0.9,
            f"{name}: median TTFT within 15 ms of URL ({gap:.1f} ms)": gap <= 15.0,
        }
    return {
        f"{name}: {t} median TTFT within 2 ms of the server's "
        f"({lv[f'{t}_ttft_over_server_ms']:+.2f} ms)": abs(lv[f"{t}_ttft_over_server_ms"]) <= 2.0
        for t in TARGETS
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--levels", default="1,8,128")
    p.add_argument("--workers-at", type=int, default=0, help="also run this level with 2 workers")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    modes = [(int(x), 1) for x in args.levels.split(",")]
    if args.workers_at:
        modes.append((args.workers_at, 2))

    report: dict[str, Any] = {"load_before": os.getloadavg(), "levels": {}}
    server_args = ("--ttft-ms", str(TTFT_MS), "--token-delay-ms", str(TOKEN_DELAY_MS))
    with LoopbackProcess(*server_args, "--output-tokens", str(TOKENS), priority=-10) as server:
        report["server_prioritized"] = server.prioritized
        os.environ.update(sagemaker_runtime_env(server.root))
        os.environ.pop("AWS_PROFILE", None)
        for c, workers in modes:
            n = REQUESTS.get(c, max(64, 12 * c))
            rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
            for i in range(args.rounds):
                url = OpenAITarget(server.url, model="loopback", label="url")
                rows["url"].append(measure(url, c, n, workers, server.root))
                sm = SageMakerTarget("loopback", label="sagemaker", logs_delay_s=0)
                rows["sagemaker"].append(measure(sm, c, n, workers, server.root))
                a, b = rows["url"][-1], rows["sagemaker"][-1]
                print(
                    f"c={c} workers={workers} round {i + 1}: "
                    f"url {a['output_throughput']:>9,.0f} tok/s TTFT {a['median_ttft_ms']:6.2f} ms"
                    f" | sagemaker {b['output_throughput']:>9,.0f} tok/s "
                    f"TTFT {b['median_ttft_ms']:6.2f} ms | server TTFT {b['server_ttft_ms']:.2f}",
                    flush=True,
                )
            report["levels"][f"c={c} workers={workers}"] = {
                "concurrency": c,
                "workers": workers,
                "requests": n,
                "server_output_throughput": c * TOKENS / REQUEST_S,
                **summarize(rows),
            }
    report["load_after"] = os.getloadavg()

    print()
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    print(f"loopback server at raised priority (nice -10): {report['server_prioritized']}")
    print(
        "| level | server tok/s | URL tok/s | SageMaker tok/s | SM/URL | SM/URL per round "
        "| server TTFT ms | URL TTFT ms | SM TTFT ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    checks: dict[str, bool] = {}
    for name, lv in report["levels"].items():
        lv["sagemaker_over_url"] = lv["sagemaker_output_throughput"] / lv["url_output_throughput"]
        print(
            f"| {name} | {lv['server_output_throughput']:,.0f} | "
            f"{lv['url_output_throughput']:,.0f} | {lv['sagemaker_output_throughput']:,.0f} | "
            f"{lv['sagemaker_over_url']:.2f}x | {lv['paired_ratio_median']:.2f}x | "
            f"{lv['server_ttft_ms']:.2f} | "
            f"{lv['url_median_ttft_ms']:.2f} | {lv['sagemaker_median_ttft_ms']:.2f} |"
        )
        checks.update(checks_for(name, lv["concurrency"], lv))
    print()
    for check, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {check}")
    report["checks"] = checks
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
