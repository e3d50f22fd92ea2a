"""How long after Ctrl-C does `peagle doctor` (or deploy's doctor phase) exit while an S3
read is stalled?

Runs against the local emulator (a moto server on loopback) after staging an account
in which the plan would deploy; the server holds every S3 GetObject for a minute (a read
stalled on the network). Each run starts `peagle doctor` / `peagle deploy` as a process,
waits until a read is held, sends SIGINT and times the exit. Before the doctor's workers
became daemon threads that nothing waits for, this took the stalled read's whole retry
budget (botocore: 60 s read timeout, three attempts).

    .venv/bin/python benchmarks/doctor_interrupt.py [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/peagle-doctor-bench"
MODEL = "qwen3-coder-30b-a3b-instruct"
REGION = "us-east-1"
HELD_S = 60.0


def measure(runs: int) -> dict[str, Any]:
    from moto.s3 import models as s3_models
    from peagle_local.emulator import LocalAWS
    from peagle_local.emulator.world import stage_world

    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    peagle = os.path.join(os.path.dirname(sys.executable), "peagle")
    results: dict[str, Any] = {"model": MODEL, "runs": runs, "held_s": HELD_S}
    with LocalAWS(region=REGION) as aws, aws.patched_environ():
        plan = build_plan(load_spec(None, model=MODEL, execution_role_arn=ROLE, region=REGION))
        stage_world(plan, aws.session(), aws.account)
        held, release = threading.Event(), threading.Event()
        real = s3_models.S3Backend.get_object

        def stalled(self: Any, *args: Any, **kwargs: Any) -> Any:
            held.set()
            release.wait(HELD_S)
            return real(self, *args, **kwargs)

        s3_models.S3Backend.get_object = stalled  # type: ignore[method-assign]
        try:
            for command in ("doctor", "deploy"):
                times, codes = [], []
                for _ in range(runs):
                    held.clear()
                    proc = subprocess.Popen(
                        [peagle, command, MODEL, "--role-arn", ROLE],
                        env={**os.environ, **aws.env()},
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    if not held.wait(60):
                        proc.kill()
                        raise SystemExit(f"peagle {command} never read from S3")
                    started = time.perf_counter()
                    proc.send_signal(signal.SIGINT)
                    codes.append(proc.wait(HELD_S * 4))
                    times.append(time.perf_counter() - started)
                results[command] = {
                    "median_s": round(statistics.median(times), 3),
                    "max_s": round(max(times), 3),
                    "exit_codes": sorted(set(codes)),
                }
        finally:
            release.set()
            s3_models.S3Backend.get_object = real  # type: ignore[method-assign]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = measure(args.runs)
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"SIGINT with an S3 read held {HELD_S:g} s by the emulator ({args.runs} runs each)")
    for command in ("doctor", "deploy"):
        r = results[command]
        print(
            f"  peagle {command}: SIGINT to exit median {r['median_s']:.3f} s "
            f"(max {r['max_s']:.3f} s), exit codes {r['exit_codes']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
