"""Runs INSIDE the CPU-only vLLM 0.30.0 venv (scripts/vllm-env.sh), driven by
tests/plan/test_plan_engine_acceptance.py.

Usage: python vllm_engine_probe.py cases.json results.json

For each case: vLLM's own `vllm serve` parser (make_arg_parser + FlexibleArgumentParser,
then validate_parsed_serve_args) parses the argv, and `SpeculativeConfig(**config)`
validates the speculative config's fields (pydantic, extra="forbid", the method Literal,
_verify_args) with `__post_init__` skipped, as it needs the target model's files.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any


def main() -> int:
    import vllm
    from vllm.config import SpeculativeConfig
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    with open(sys.argv[1]) as f:
        cases: list[dict[str, Any]] = json.load(f)
    SpeculativeConfig.__post_init__ = lambda self: None  # type: ignore[method-assign]
    results = []
    for case in cases:
        result: dict[str, Any] = {"name": case["name"], "ok": True}
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(case["argv"][2:])
                validate_parsed_serve_args(args)
            result["speculative_config"] = args.speculative_config
            if case["config"] is not None:
                SpeculativeConfig(**case["config"])
        except SystemExit as e:
            result.update(ok=False, error=err.getvalue() or str(e))
        except Exception as e:
            result.update(ok=False, error=f"{type(e).__name__}: {e}")
        results.append(result)
    with open(sys.argv[2], "w") as f:
        json.dump({"vllm_version": vllm.__version__, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
