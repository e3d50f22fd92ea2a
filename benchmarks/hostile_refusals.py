"""How fast, and how briefly, is hostile input refused?

Runs every case of the hostile-input corpus (`tests/hostile/test_hostile_cli.py`: spec
files, flags, gates files, environment values) through `peagle` in this process, as the
tests do, and reports per case the time to the refusal, the exit code and the bytes
printed; then the median and the slowest. AWS calls are refused (none is expected).

    .venv/bin/python benchmarks/hostile_refusals.py [--json]

Times are this machine's; compare cases within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str]) -> tuple[int, float, int]:
    from peagle_deploy.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    seconds = time.perf_counter() - start
    return code, seconds, len(out.getvalue().encode()) + len(err.getvalue().encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "hostile"))
    from botocore.client import BaseClient
    from hostile_kit import write_files
    from test_hostile_cli import CORPUS

    def refuse(self: Any, operation: str, params: Any) -> Any:
        raise RuntimeError(f"AWS call {operation}")

    BaseClient._make_api_call = refuse  # type: ignore[method-assign]
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.chdir(ROOT)
    _run(["plan", "gpt-oss-20b", "--json"])  # imports once, as a warm CLI would have them
    rows = []
    for case in CORPUS:
        tmp = Path(tempfile.mkdtemp())
        write_files(tmp, case.files)
        if case.id == "spec-directory":
            (tmp / "directory").unlink()
            (tmp / "directory").mkdir()
        saved = {k: os.environ.get(k) for k in case.env}
        os.environ.update(case.env)
        try:
            code, seconds, size = _run([a.replace("{tmp}", str(tmp)) for a in case.argv])
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        rows.append({"case": case.id, "exit": code, "ms": round(seconds * 1000, 1), "bytes": size})
    times = [r["ms"] for r in rows]
    summary = {
        "cases": len(rows),
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "slowest": max(rows, key=lambda r: r["ms"])["case"],
        "max_bytes": max(r["bytes"] for r in rows),
        "all_exit_2": all(r["exit"] == 2 for r in rows),
    }
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=2))
    else:
        for r in rows:
            print(f"{r['case']:32} exit {r['exit']}  {r['ms']:8.1f} ms  {r['bytes']:5d} bytes")
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
