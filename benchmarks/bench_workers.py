#!/usr/bin/env python3
"""`--workers N` against the client's ceiling: the same level with N = 1, 2, 3 processes.

Server: the loopback server in its own process, at raised priority when allowed (nice
-10, e.g. as root: on a shared machine the stand-in endpoint must not be what is
starved), paced like bench_sagemaker_target.py (TTFT 50 ms, one token every 2 ms, 64
tokens per request, one token per event), driven at c=256 (the pacing asks for 93k
events/s). The runs alternate (N = 1, 2, 3, 1, 2, 3, ...) so that each N sees the same
machine; medians over rounds are compared, each level's metrics merged from all its
workers' samples.

The streams carry logprobs with 20 alternatives per token (vLLM's default
`max_logprobs`, vllm/config/model.py in 0.30.0): each event costs the client several
times what it costs the server, which sends prepared bytes. That is the case `--workers`
exists for, and it shows on a 2-core machine: with plain streams client and server cost
about the same per event, the server needs the second core, and extra client processes
only take turns on the cores (measured here: N = 2 slower than N = 1). `--top-logprobs
0` runs plain streams; on a machine with N + 1 cores or more they gain too.

    .venv/bin/python benchmarks/bench_workers.py [--target url|sagemaker] [--workers 1,2,3]
        [--concurrency 256] [--top-logprobs 20] [--rounds 3] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from peagle_local.emulator.loopback import LoopbackProcess, sagemaker_runtime_env

from peagle_deploy.bench import BenchSettings, OpenAITarget, SageMakerTarget, SweepConfig, run_sweep

TTFT_MS = 50.0
TOKEN_DELAY_MS = 2.0
TOKENS = 64


def measure(target: Any, concurrency: int, requests: int, workers: int) -> dict[str, Any]:
    config = SweepConfig(
        settings=BenchSettings(
            concurrency=[concurrency],
            num_prompts=requests,
            warmup=concurrency,
            max_tokens=TOKENS,
        ),
        progress=False,
        workers=workers,
    )
    level = run_sweep(target, config).levels[0].to_dict()
    if level["failed"]:
        raise RuntimeError(f"{workers} workers: failures {level['errors']}")
    return level


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--target", choices=("url", "sagemaker"), default="url")
    p.add_argument("--workers", default="1,2,3")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--top-logprobs", type=int, default=20, help="0: plain streams")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    c = args.concurrency
    requests = 8 * c
    pacing = c * TOKENS / ((TTFT_MS + (TOKENS - 1) * TOKEN_DELAY_MS) / 1000)

    report: dict[str, Any] = {
        "target": args.target,
        "concurrency": c,
        "requests": requests,
        "pacing_output_throughput": pacing,
        "load_before": os.getloadavg(),
        "runs": {n: [] for n in counts},
    }
    server_args: tuple[str, ...] = (
        "--ttft-ms", str(TTFT_MS), "--token-delay-ms", str(TOKEN_DELAY_MS),
    )  # fmt: skip
    if args.top_logprobs:
        server_args += ("--top-logprobs", str(args.top_logprobs))
    report["top_logprobs"] = args.top_logprobs
    with LoopbackProcess(*server_args, "--output-tokens", str(TOKENS), priority=-10) as server:
        report["server_prioritized"] = server.prioritized
        os.environ.update(sagemaker_runtime_env(server.root))
        os.environ.pop("AWS_PROFILE", None)
        for i in range(args.rounds):
            for n in counts:
                target: Any = (
                    OpenAITarget(server.url, model="loopback")
                    if args.target == "url"
                    else SageMakerTarget("loopback", logs_delay_s=0)
                )
                level = measure(target, c, requests, n)
                report["runs"][n].append(
                    {k: level[k] for k in ("output_throughput", "median_ttft_ms", "p99_ttft_ms")}
                )
                print(
                    f"round {i + 1} workers={n}: {level['output_throughput']:>9,.0f} tok/s, "
                    f"median TTFT {level['median_ttft_ms']:.1f} ms",
                    flush=True,
                )
    report["load_after"] = os.getloadavg()
    med = statistics.median
    base = med(r["output_throughput"] for r in report["runs"][counts[0]])
    print()
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    print(f"loopback server at raised priority (nice -10): {report['server_prioritized']}")
    print(
        f"{args.target} target, c={c}, top logprobs {args.top_logprobs}, "
        f"pacing allows {pacing:,.0f} tok/s, {os.cpu_count()} cores"
    )
    print("| workers | output tok/s (median) | vs first | median TTFT ms |")
    print("|---|---|---|---|")
    summary: dict[int, float] = {}
    for n in counts:
        tp = med(r["output_throughput"] for r in report["runs"][n])
        ttft = med(r["median_ttft_ms"] for r in report["runs"][n])
        summary[n] = tp
        print(f"| {n} | {tp:,.0f} | {tp / base:.2f}x | {ttft:.1f} |")
    report["median_output_throughput"] = summary
    rising = len(counts) < 2 or summary[counts[1]] > summary[counts[0]]
    print()
    print(f"{'PASS' if rising else 'FAIL'}  the ceiling rises from {counts[0]} to {counts[1]}")
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if rising else 1


if __name__ == "__main__":
    sys.exit(main())
