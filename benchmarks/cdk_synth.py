#!/usr/bin/env python3
"""Time `npx cdk synth` of the three-stage app against a minimal one-resource CDK app.

Both apps are synthesized through the same pinned CDK CLI, with the same Python, in the
same run, alternating (minimal, peagle, minimal, peagle, ...) so that machine load hits
both alike. What is compared is what a user waits for: CLI start, Python and aws_cdk
start (jsii), building the constructs, and writing the cloud assembly. The minimal app
is written to a temporary directory: one stack with one resource.

Usage: .venv/bin/python benchmarks/cdk_synth.py [--repetitions 5] [--json]
Exit code 1 when the median ratio is above --target (default 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MINIMAL_APP = """
import aws_cdk as cdk
from aws_cdk import aws_sns as sns

app = cdk.App()
stack = cdk.Stack(app, "Minimal")
sns.Topic(stack, "Topic")
app.synth()
"""


def _python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def write_minimal_app(directory: Path) -> Path:
    """A one-stack, one-resource CDK app run by the same Python as the real one."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "app.py").write_text(MINIMAL_APP)
    (directory / "cdk.json").write_text(json.dumps({"app": f"{_python()} app.py"}))
    return directory


def synth_seconds(npx: str, app_dir: Path, outdir: Path, env: dict[str, str]) -> float:
    """Wall time of one `npx cdk synth` in `app_dir` (fails loudly if synth fails)."""
    if outdir.exists():
        shutil.rmtree(outdir)
    # The CLI pinned in this repository's package.json, for both apps.
    command = [npx, "--no-install", "--prefix", str(ROOT), "cdk", "synth"]
    command += ["--quiet", "--no-notices", "-o", str(outdir)]
    start = time.perf_counter()
    result = subprocess.run(
        command, cwd=app_dir, env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"cdk synth failed in {app_dir}:\n{result.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=5, help="runs of each app")
    parser.add_argument("--target", type=float, default=1.5, help="maximum median ratio")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    npx = shutil.which("npx")
    if npx is None or not (ROOT / "node_modules" / "aws-cdk").is_dir():
        raise SystemExit("needs Node.js and the pinned CDK CLI: run `make setup`")
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "CDK_DEFAULT_ACCOUNT"):
        env.pop(var, None)
    times: dict[str, list[float]] = {"minimal": [], "peagle": []}
    with tempfile.TemporaryDirectory(prefix="cdk-synth-bench-") as tmp:
        base = Path(tmp)
        minimal = write_minimal_app(base / "minimal")
        for i in range(args.repetitions):
            for name, app_dir in (("minimal", minimal), ("peagle", ROOT)):
                seconds = synth_seconds(npx, app_dir, base / f"out-{name}", env)
                times[name].append(seconds)
                if not args.json:
                    print(f"run {i + 1}/{args.repetitions} {name:8s} {seconds:6.2f} s", flush=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["peagle"] / medians["minimal"]
    result = {
        "repetitions": args.repetitions,
        "seconds": times,
        "median_seconds": medians,
        "ratio": round(ratio, 3),
        "target": args.target,
        "ok": ratio <= args.target,
        "cpu_count": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"median minimal app {medians['minimal']:.2f} s, three-stage app "
            f"{medians['peagle']:.2f} s, ratio {ratio:.2f} (target <= {args.target})"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
