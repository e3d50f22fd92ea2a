"""Parse the training driver's vLLM server argv with vLLM 0.30.0's own parser.

Run by tests/container/test_train_commands.py in the vLLM CPU environment. Reads
{"name": argv} on stdin, prints {"name": namespace-or-error}. The parser is the one
`python3 -m vllm.entrypoints.openai.api_server` runs (tests/container/data/
vllm_contract_probe.py uses it too): vllm.entrypoints.launchers.cli_args.make_arg_parser
over a FlexibleArgumentParser, then validate_parsed_serve_args; the KV-transfer flag is
parsed into vLLM's KVTransferConfig and the speculative method looked up in vLLM's
SpeculativeMethod.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import typing
from typing import Any


def literal_values(annotation: Any) -> set[str]:
    """Every string of a (nested) Literal, e.g. vLLM's SpeculativeMethod."""
    args = typing.get_args(annotation)
    if not args:
        return set()
    if typing.get_origin(annotation) is typing.Literal:
        return {a for a in args if isinstance(a, str)} | set().union(
            *(literal_values(a) for a in args if not isinstance(a, str))
        )
    return set().union(*(literal_values(a) for a in args))


def parse(argv: list[str]) -> dict[str, Any]:
    from vllm.config import KVTransferConfig
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"], argv[:3]
    parser = make_arg_parser(FlexibleArgumentParser(prog="api_server"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv[3:])
    except SystemExit as e:
        return {"error": f"exit {e.code}: {err.getvalue().strip()[-400:]}"}
    validate_parsed_serve_args(args)
    out = {
        "model": args.model,
        "host": args.host,
        "port": args.port,
        "seed": args.seed,
        "max_model_len": args.max_model_len,
        "speculative_config": args.speculative_config,
        "kv_transfer_config": None,
        "method_known": None,
    }
    if isinstance(args.speculative_config, dict):
        from vllm.config.speculative import SpeculativeMethod

        method = args.speculative_config.get("method")
        out["method_known"] = method in literal_values(SpeculativeMethod)
    if args.kv_transfer_config is not None:
        kv = args.kv_transfer_config
        config = kv if isinstance(kv, KVTransferConfig) else KVTransferConfig(**kv)
        out["kv_transfer_config"] = {
            "kv_connector": config.kv_connector,
            "kv_role": config.kv_role,
            "kv_connector_extra_config": config.kv_connector_extra_config,
            "is_kv_producer": config.is_kv_producer,
        }
    return out


def main() -> int:
    # The libraries log to stdout (vLLM's logger); only the JSON answer goes there.
    answer, sys.stdout = sys.stdout, sys.stderr
    cases = json.load(sys.stdin)
    results = {}
    for name, argv in cases.items():
        try:
            results[name] = parse(argv)
        except Exception as e:
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(results, answer, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
