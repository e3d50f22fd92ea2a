#!/usr/bin/env python3
"""Cold start of `peagle plan MODEL --json`, as a ratio to `import sagemaker.serve`.

    .venv/bin/python benchmarks/cold_start.py [--pairs 9] [--model MODEL] [--json]
                                              [--against DIR|REV [--also DIR|REV ...]]
                                              [--target RATIO]

Each pair runs two fresh processes back to back, in alternating order: the console
script `peagle plan MODEL --json`, and `python -c 'import sagemaker.serve'` (the SDK
import every SageMaker deploy script pays first; docs/platform-facts.md). The machine
is shared, so absolute seconds drift with its load; a pair's two runs see about the
same load, and the ratio of the two medians is what is quoted (issue 23: target
<= 0.08). One unmeasured warm-up of each first, so the OS file cache is warm and the
bytecode written, as they are for a user's second command. CPU time (user + sys of the
child) is shown beside wall time: on a loaded machine wall time includes waiting for a
core, CPU time does not.

`--against DIR|REV` takes another checkout (a directory, or a git revision exported as
benchmarks/bench_cli_start.py does) as the reference instead: the same plan command with
its code (DIR, DIR/container, DIR/local on PYTHONPATH), and the target 1.15 (issue 31:
the typer path, in a copy whose fast path is switched off, against the fast path). `--also DIR|REV`
(repeatable) times more checkouts in the same rounds and reports each one's ratios to
the reference too. The ratio of the CPU medians is reported beside the wall one.

Then runs the plan once more in-process under a `sys.modules` probe and reports whether
boto3, botocore, typer, rich, pydantic or any sagemaker module was loaded (the plan must
not need an AWS SDK). Exit code 0 when the ratio holds and the plan exits 0, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from revision_tree import export_revision

TARGET_RATIO = 0.08
"""Against `import sagemaker.serve` (issue 23)."""
AGAINST_TARGET = 1.15
"""Against the same command from another checkout (issue 31)."""
REPORTED = ("boto3", "botocore", "sagemaker", "typer", "rich", "pydantic", "yaml")

_PROBE = """
import contextlib, io, json, sys
from peagle_deploy.cli.app import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "tops": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _peagle() -> str:
    """The console script next to this interpreter (the project's venv)."""
    candidate = Path(sys.executable).with_name("peagle")
    return str(candidate) if candidate.exists() else "peagle"


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process (which must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _pairs(
    commands: dict[str, list[str]], envs: dict[str, dict[str, str]], pairs: int
) -> dict[str, Any]:
    """Interleaved runs: pair i runs the commands in order, pair i+1 in reverse order."""
    for name, argv in commands.items():
        _run(argv, envs[name])  # warm-up, not measured
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for i in range(pairs):
        for name in names if i % 2 == 0 else names[::-1]:
            w, c = _run(commands[name], envs[name])
            wall[name].append(w)
            cpu[name].append(c)
    return {"wall": wall, "cpu": cpu}


def _loaded(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env, check=True
    ).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    return {"exit_code": doc["code"], "loaded": [r for r in REPORTED if r in doc["tops"]]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9, help="interleaved pairs of runs")
    parser.add_argument("--model", default="qwen3-coder-30b-a3b-instruct", help="launch model")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--against", help="reference: another checkout (a directory or a git rev)")
    parser.add_argument(
        "--also", action="append", default=[], help="with --against: one more checkout"
    )
    parser.add_argument("--target", type=float, help="the largest ratio that passes")
    ns = parser.parse_args()
    if ns.pairs < 1:
        parser.error("--pairs must be at least 1")
    if ns.also and ns.against is None:
        parser.error("--also needs --against")
    with tempfile.TemporaryDirectory() as tmp:
        return _measure(ns, Path(tmp))


def _checkout(value: str, tmp: Path) -> Path:
    """A directory holding peagle_deploy/, or a git revision exported under `tmp`."""
    if Path(value).is_dir():
        tree = Path(value).resolve()
    else:
        tree = export_revision(value, tmp / f"rev-{len(list(tmp.iterdir()))}")
    if not (tree / "peagle_deploy").is_dir():
        raise SystemExit(f"{value}: no peagle_deploy/ there")
    return tree


def _commands(
    ns: argparse.Namespace, env: dict[str, str], tmp: Path
) -> tuple[str, dict[str, list[str]], dict[str, dict[str, str]], dict[str, str]]:
    """The reference's name, and every command with its environment and title."""
    commands = {"plan": [_peagle(), "plan", ns.model, "--json"]}
    envs = {"plan": env}
    if ns.against is None:
        # `sagemaker.serve` refuses to import without a region (botocore NoRegionError).
        commands["sagemaker"] = [sys.executable, "-c", "import sagemaker.serve"]
        envs["sagemaker"] = {**env, "AWS_DEFAULT_REGION": "us-east-1"}
        title = "AWS_DEFAULT_REGION=us-east-1 python -c 'import sagemaker.serve'"
        return "sagemaker", commands, envs, {"sagemaker": title}
    titles = {}
    for name, value in [("against", ns.against), *((f"also {v}", v) for v in ns.also)]:
        tree = _checkout(value, tmp)
        titles[name] = f"the same, from {value}"
        commands[name] = commands["plan"]
        envs[name] = _checkout_env(env, tree)
    return "against", commands, envs, titles


def _measure(ns: argparse.Namespace, tmp: Path) -> int:
    # No AWS credentials, no region: the plan path must not need either. Bytecode is
    # written (the warm-up writes what an edited checkout lacks), as pip writes it at
    # install: a PYTHONDONTWRITEBYTECODE shell would compile every edited module per run.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    plan_args = ["plan", ns.model, "--json"]
    reference, commands, envs, titles = _commands(ns, env, tmp)
    target = ns.target or (TARGET_RATIO if ns.against is None else AGAINST_TARGET)
    runs = _pairs(commands, envs, ns.pairs)
    medians = {name: statistics.median(times) for name, times in runs["wall"].items()}
    cpu = {name: statistics.median(times) for name, times in runs["cpu"].items()}
    ratio = medians["plan"] / medians[reference]
    per_pair = [p / s for p, s in zip(runs["wall"]["plan"], runs["wall"][reference], strict=True)]
    probe = _loaded(plan_args, env)
    ok = ratio <= target and probe["exit_code"] == 0
    result = {
        "commands": {"plan": f"peagle {' '.join(plan_args)}", **titles},
        "pairs": ns.pairs,
        "median_wall_s": {k: round(v, 3) for k, v in medians.items()},
        "median_cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "ratio_of_medians": round(ratio, 4),
        "median_pair_ratio": round(statistics.median(per_pair), 4),
        "cpu_ratio_of_medians": round(cpu["plan"] / cpu[reference], 4),
        "target_ratio": target,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "also": {
            name[5:]: _ratios(runs, name, reference) for name in commands if name[:5] == "also "
        },
        **probe,
        "pass": ok,
    }
    if ns.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0 if ok else 1


def _checkout_env(env: dict[str, str], tree: Path) -> dict[str, str]:
    """`env` with a checkout's code first on the path (as its tests run it)."""
    paths = (tree, tree / "container", tree / "local")
    return {**env, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


def _ratios(runs: dict[str, Any], name: str, reference: str) -> dict[str, float]:
    """One command's medians over the reference's: wall, and CPU."""
    return {
        kind: round(
            statistics.median(runs[kind][name]) / statistics.median(runs[kind][reference]), 4
        )
        for kind in ("wall", "cpu")
    }


def _print(r: dict[str, Any]) -> None:
    load = ", ".join(f"{x:.1f}" for x in r["load_average"])
    print(f"cold start, {r['pairs']} interleaved pairs, {os.cpu_count()} CPUs, load {load}")
    for name, command in r["commands"].items():
        print(
            f"  {command:<66} median {r['median_wall_s'][name]:.3f} s "
            f"(cpu {r['median_cpu_s'][name]:.3f} s)"
        )
    print(
        f"  ratio of medians {r['ratio_of_medians']:.3f} (median of pair ratios "
        f"{r['median_pair_ratio']:.3f}; target <= {r['target_ratio']})  "
        f"{'PASS' if r['pass'] else 'FAIL'}; of the CPU medians {r['cpu_ratio_of_medians']:.3f}"
    )
    for tree, ratios in r["also"].items():
        print(f"  {tree} over the reference: wall {ratios['wall']:.3f}, cpu {ratios['cpu']:.3f}")
    print(f"  the plan loaded: {', '.join(r['loaded']) or 'none of ' + ', '.join(REPORTED)}")


if __name__ == "__main__":
    sys.exit(main())
