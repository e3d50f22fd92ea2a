#!/usr/bin/env python3
"""Time of one plan (spec -> requests), against another revision in the same run.

    .venv/bin/python benchmarks/plan_time.py [--baseline REV] [--rounds 7] [--plans 200]

Two measures, for this checkout and (with `--baseline`) for REV exported by `git archive`
into a temporary directory, interleaved round by round so that a change in machine load
hits both alike; the ratio is what to read:
- `build_plan`: median time of one `build_plan(spec)` in a warm process, for a few specs
  (a catalog model's defaults; eagle3 with a K schedule; a custom model in a VPC with
  a KMS key, autoscaling and a canary rollout);
- `peagle plan MODEL --json`: median wall time of the whole command, a fresh interpreter
  per run (start-up included).
No AWS call and no credentials: the AWS_* variables are removed from the children.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revision_tree import export_revision

ROOT = Path(__file__).resolve().parent.parent
MODEL = "qwen3-coder-30b-a3b-instruct"
SPECS = {
    "catalog defaults": {"model": MODEL},
    "eagle3 + K schedule": {
        "model": "gpt-oss-20b",
        "speculative": {
            "mode": "eagle3",
            "num_speculative_tokens": 5,
            "num_speculative_tokens_per_batch_size": [[1, 8, 5], [9, 64, 3]],
        },
    },
    "custom, VPC, KMS, scaling": {
        "model": "custom",
        "instance_type": "ml.g7e.12xlarge",
        "initial_instance_count": 2,
        "custom": {
            "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/own-vllm:1",
            "model_data_uri": "s3://bucket/model/",
            "drafter_uri": "s3://bucket/drafter/",
            "weights_gb": 40,
        },
        "vllm_version": "0.30.0",
        "vpc": {"subnet_ids": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123abcd"]},
        "kms_key_id": "alias/peagle",
        "scaling": {"min_instances": 2, "max_instances": 4},
        "rollout": {"strategy": "canary", "alarms": ["peagle-5xx"]},
        "execution_role_arn": "arn:aws:iam::123456789012:role/peagle",
    },
}

# Runs in a child with PEAGLE_TREE first on sys.path (not the editable install).
_PREAMBLE = """
import os, sys
tree = os.environ["PEAGLE_TREE"]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:0] = [tree, os.path.join(tree, "container")]
"""
_PLANS = (
    _PREAMBLE
    + """
import json, statistics, time
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec
specs = json.loads(os.environ["PEAGLE_SPECS"])
n = int(os.environ["PEAGLE_PLANS"])
out = {}
for name, doc in specs.items():
    spec = load_spec(**doc)
    build_plan(spec)  # warm: catalog data read, caches filled
    times = []
    for _ in range(n):
        start = time.perf_counter()
        build_plan(spec)
        times.append(time.perf_counter() - start)
    out[name] = statistics.median(times)
print(json.dumps(out))
"""
)
_COMMAND = (
    _PREAMBLE
    + """
from peagle_deploy.cli.app import main
sys.exit(main(sys.argv[1:]))
"""
)


def _env(tree: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "PEAGLE_TREE": str(tree), **extra}


def _plans(tree: Path, plans: int) -> dict[str, float]:
    env = _env(tree, PEAGLE_SPECS=json.dumps(SPECS), PEAGLE_PLANS=str(plans))
    out = subprocess.run(
        [sys.executable, "-c", _PLANS], capture_output=True, text=True, env=env, check=True
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _command(tree: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _COMMAND, "plan", MODEL, "--json"],
        capture_output=True,
        env=_env(tree),
        check=True,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare with (e.g. main)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--plans", type=int, default=200, help="plans per spec per round")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this": ROOT}
        if ns.baseline:
            trees[ns.baseline] = export_revision(ns.baseline, Path(tmp))
        per_plan: dict[str, dict[str, list[float]]] = {t: {s: [] for s in SPECS} for t in trees}
        whole: dict[str, list[float]] = {t: [] for t in trees}
        for tree in trees.values():
            _command(tree)  # warm-up: OS file cache, .pyc files
        for _ in range(ns.rounds):
            for name, tree in trees.items():
                for spec, seconds in _plans(tree, ns.plans).items():
                    per_plan[name][spec].append(seconds)
                whole[name].append(_command(tree))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{ns.rounds} rounds, {ns.plans} plans per spec per round, {os.cpu_count()} CPUs, "
        f"load average {load}"
    )
    base = ns.baseline
    for spec in SPECS:
        cells = [f"{t}: {statistics.median(per_plan[t][spec]) * 1e3:.3f} ms" for t in trees]
        if base:
            ratio = statistics.median(per_plan["this"][spec]) / statistics.median(
                per_plan[base][spec]
            )
            cells.append(f"this/{base} {ratio:.2f}")
        print(f"  build_plan, {spec:<28} " + "; ".join(cells))
    cells = [f"{t}: {statistics.median(whole[t]):.3f} s" for t in trees]
    if base:
        cells.append(
            f"this/{base} {statistics.median(whole['this']) / statistics.median(whole[base]):.2f}"
        )
    print(f"  peagle plan {MODEL} --json: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
