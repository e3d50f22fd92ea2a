"""How long does `peagle doctor` take, and how many AWS calls does it make?

Runs against the local emulator (a moto server on loopback with the peagle extensions,
real HTTP) after staging an account in which the plan would deploy (weights, a P-EAGLE
drafter, the execution role, the image, the quota). Each run is what `peagle doctor
MODEL --role-arn ...` does after planning: a fresh boto3 session, clients, every check.
It times `peagle doctor` as a process (imports, planning and checks), the first run in a
process (service models loaded) and later runs; later runs are repeated with the checks
one after another (a one-thread pool) to show what running them concurrently buys, and
with `--latency-ms N` every HTTP request first waits N ms, standing in for the round
trip to a real AWS endpoint.

    .venv/bin/python benchmarks/doctor_time.py [--runs 5] [--latency-ms 40] [--json]

Emulated figures: they measure doctor's own work and call pattern, not AWS's latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/peagle-doctor-bench"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"


def _one(plan: Any, latency_s: float, workers: int) -> tuple[float, Counter[str], int]:
    from peagle_deploy.aws import make_session
    from peagle_deploy.doctor import runner

    session = make_session(REGION)  # what the CLI uses (service models parsed once)
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[f"{model.service_model.service_name}:{model.name}"] += 1

    session.events.register("before-call", count)
    if latency_s:
        session.events.register("before-send", lambda **_: time.sleep(latency_s))
    saved = runner.MAX_WORKERS
    runner.MAX_WORKERS = workers
    try:
        started = time.perf_counter()
        report = runner.run_doctor(plan, boto_session=session)
        elapsed = time.perf_counter() - started
    finally:
        runner.MAX_WORKERS = saved
    if not report.ok or report.warnings:
        lines = "; ".join(r.line() for r in report.results if r.status != "pass")
        raise SystemExit(f"the staged account should pass every check: {lines}")
    return elapsed, calls, len(report.results)


def _cli(env: dict[str, str], runs: int) -> list[float]:
    """`peagle doctor` as a user runs it: a new process (imports, planning, checks)."""
    import os
    import subprocess

    argv = [os.path.join(os.path.dirname(sys.executable), "peagle"), "doctor", MODEL]
    argv += ["--role-arn", ROLE, "--region", REGION, "--json"]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"peagle doctor exited {done.returncode}: {done.stderr.decode()}")
    return times


def measure(runs: int, latency_ms: float) -> dict[str, Any]:
    from peagle_local.emulator import LocalAWS
    from peagle_local.emulator.world import stage_world

    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    results: dict[str, Any] = {"model": MODEL, "runs": runs, "latency_ms": latency_ms}
    with LocalAWS(region=REGION) as aws, aws.patched_environ():
        plan = build_plan(load_spec(None, model=MODEL, execution_role_arn=ROLE, region=REGION))
        stage_world(plan, aws.session(), aws.account)
        cli = _cli(aws.env(), runs)
        results["cli_process_s"] = {
            "median": round(statistics.median(cli), 3),
            "max": round(max(cli), 3),
        }
        cold, calls, checks = _one(plan, 0.0, 8)
        results["first_in_process_s"] = round(cold, 3)
        results["checks"] = checks
        results["api_calls"] = sum(calls.values())
        results["by_operation"] = dict(sorted(calls.items()))
        passes = [("loopback", 0.0)]
        if latency_ms:
            passes.append((f"+{latency_ms:g} ms per request", latency_ms / 1000))
        for label, latency in passes:
            concurrent = [_one(plan, latency, 8)[0] for _ in range(runs)]
            sequential = [_one(plan, latency, 1)[0] for _ in range(runs)]
            med_c, med_s = statistics.median(concurrent), statistics.median(sequential)
            results[label] = {
                "concurrent_median_s": round(med_c, 3),
                "sequential_median_s": round(med_s, 3),
                "sequential_over_concurrent": round(med_s / med_c, 2),
            }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=40.0, help="0 skips the delayed pass")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = measure(args.runs, args.latency_ms)
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"peagle doctor for {MODEL} against the local emulator ({args.runs} runs each)")
    cli = results["cli_process_s"]
    print(
        f"  `peagle doctor` process, start to exit: median {cli['median']:.2f} s "
        f"(max {cli['max']:.2f} s)"
    )
    print(
        f"  {results['checks']} checks, {results['api_calls']} API calls; first run in a "
        f"process (service models loaded) {results['first_in_process_s']:.3f} s"
    )
    for label, figures in results.items():
        if isinstance(figures, dict) and "concurrent_median_s" in figures:
            print(
                f"  later runs, {label}: concurrent {figures['concurrent_median_s']:.3f} s, "
                f"one at a time {figures['sequential_median_s']:.3f} s "
                f"({figures['sequential_over_concurrent']}x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
