#!/usr/bin/env python3
"""Cold start of the bench commands' help, against another revision in the same run.

    .venv/bin/python benchmarks/bench_cli_start.py [--baseline main] [--runs 21]

Times `peagle --help`, `peagle bench --help` and `peagle bench compare --help` (each run
a fresh interpreter, after one unmeasured warm-up) for this checkout and, with
`--baseline REV`, for REV exported by `git archive` into a temporary directory; the two
are interleaved run by run so a change in machine load hits both alike, and the ratio
is what to read (on a shared machine absolute times move with the load). Also reports
whether `peagle --help` loaded pydantic or the bench settings models (it must not: the
root help lists `bench` from the command registry without building it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revision_tree import export_revision

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--help"], ["bench", "--help"], ["bench", "compare", "--help"])

# Runs `peagle` from the tree in PEAGLE_TREE, not from the editable install.
_RUNNER = """
import os, sys
tree = os.environ["PEAGLE_TREE"]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:0] = [tree, os.path.join(tree, "container")]
from peagle_deploy.cli.app import main
code = main(sys.argv[1:])
if os.environ.get("PEAGLE_PROBE"):
    loaded = [m for m in ("pydantic", "peagle_deploy.bench.settings") if m in sys.modules]
    print("LOADED", ",".join(loaded), file=sys.stderr)
sys.exit(code)
"""


def _once(tree: Path, args: list[str]) -> tuple[float, float]:
    env = {**os.environ, "PEAGLE_TREE": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _RUNNER, *args], capture_output=True, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _loaded(tree: Path, args: list[str]) -> str:
    env = {**os.environ, "PEAGLE_TREE": str(tree), "PEAGLE_PROBE": "1"}
    err = subprocess.run(
        [sys.executable, "-c", _RUNNER, *args], capture_output=True, text=True, env=env, check=True
    ).stderr
    line = next((ln for ln in err.splitlines() if ln.startswith("LOADED")), "LOADED ")
    return line.removeprefix("LOADED ").strip() or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision to compare with (e.g. main)")
    parser.add_argument("--runs", type=int, default=21)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this": ROOT}
        if ns.baseline:
            trees[ns.baseline] = export_revision(ns.baseline, Path(tmp))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{ns.runs} runs each, {os.cpu_count()} CPUs, load average {load}")
        for args in COMMANDS:
            for tree in trees.values():
                _once(tree, args)  # warm-up
            walls: dict[str, list[float]] = {name: [] for name in trees}
            cpus: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(ns.runs):
                for name, tree in trees.items():
                    wall, cpu = _once(tree, args)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            cells = [
                f"{name}: median {statistics.median(walls[name]):.3f} s "
                f"(cpu {statistics.median(cpus[name]):.3f} s)"
                for name in trees
            ]
            if ns.baseline:
                ratio = statistics.median(walls["this"]) / statistics.median(walls[ns.baseline])
                cells.append(f"this/{ns.baseline} {ratio:.2f}")
            print(f"  peagle {' '.join(args):<22} " + "; ".join(cells))
        print(f"  `peagle --help` loaded: {_loaded(ROOT, ['--help'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
