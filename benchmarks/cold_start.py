#!/usr/bin/env python3
"""Cold start of the `peagle` CLI: median wall time of fresh processes, and what they import.

    .venv/bin/python benchmarks/cold_start.py [--runs 15] [--model MODEL] [--json]

Measures `peagle --help` (target <= 0.5 s) and `peagle plan <launch model> --json`
(target <= 0.8 s) as subprocesses, each run a new interpreter, after one unmeasured
warm-up run (so the OS file cache is warm, as it is for a user's second command).
Then runs both commands once more in-process under a `sys.modules` probe and fails
if either imported `sagemaker.serve` or `aws_cdk` (seconds each; docs/platform-facts.md); it
also reports whether boto3, botocore, yaml or any sagemaker module was loaded.
CPU time (user + sys of the child) is reported beside wall time: on a shared 2-core
machine wall time includes waiting for a core, CPU time does not.
Exit code 0 when every target holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS_S = {"help": 0.5, "plan": 0.8}
FORBIDDEN = ("sagemaker.serve", "aws_cdk")
REPORTED = ("boto3", "botocore", "yaml", "sagemaker", "matplotlib", "moto")

_PROBE = """
import contextlib, io, json, sys
from peagle_deploy.cli.app import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
tops = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"code": code, "modules": sorted(sys.modules), "tops": tops}))
"""


def _peagle() -> str:
    """The console script next to this interpreter (the project's venv)."""
    candidate = Path(sys.executable).with_name("peagle")
    return str(candidate) if candidate.exists() else "peagle"


def _time_runs(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run (a fresh process each time)."""
    subprocess.run(argv, capture_output=True, env=env, check=True)  # warm-up, not measured
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def _imports(args: list[str], env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env, check=True
    ).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    modules: list[str] = doc["modules"]
    return {
        "exit_code": doc["code"],
        "forbidden": [
            f for f in FORBIDDEN if any(m == f or m.startswith(f + ".") for m in modules)
        ],
        "loaded": [r for r in REPORTED if r in doc["tops"]],
        "module_count": len(modules),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="measured runs per command")
    parser.add_argument("--model", default="qwen3-coder-30b-a3b-instruct", help="launch model")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    ns = parser.parse_args()

    # No AWS credentials, no region: the plan path must not need either.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    peagle = _peagle()
    commands = {
        "help": ["--help"],
        "plan": ["plan", ns.model, "--json"],
    }
    result: dict[str, dict[str, object]] = {}
    ok = True
    for name, args in commands.items():
        times, cpu = _time_runs([peagle, *args], ns.runs, env)
        median = statistics.median(times)
        probe = _imports(args, env)
        passed = median <= TARGETS_S[name] and not probe["forbidden"] and probe["exit_code"] == 0
        ok = ok and passed
        result[name] = {
            "command": " ".join(["peagle", *args]),
            "runs": ns.runs,
            "median_s": round(median, 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
            "median_cpu_s": round(statistics.median(cpu), 3),
            "target_s": TARGETS_S[name],
            **probe,
            "pass": passed,
        }
    if ns.json:
        print(json.dumps(result, indent=2))
    else:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"cold start, {ns.runs} runs each, {os.cpu_count()} CPUs, load average {load}")
        for r in result.values():
            print(
                f"  {r['command']:<52} median {r['median_s']:.3f} s "
                f"(min {r['min_s']:.3f}, max {r['max_s']:.3f}; cpu {r['median_cpu_s']:.3f} s; "
                f"target <= {r['target_s']} s)  "
                f"{'PASS' if r['pass'] else 'FAIL'}"
            )
            print(
                f"    modules: {r['module_count']}; forbidden loaded: {r['forbidden'] or 'none'}; "
                f"also loaded: {', '.join(r['loaded']) or 'none'}"  # type: ignore[arg-type]
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
