"""Runs INSIDE the CPU-only vLLM venv (scripts/vllm-env.sh), driven by
tests/container/test_container_contract.py: one process checks every case in a batch.

Usage: python vllm_contract_probe.py cases.json results.json

What it asks vLLM 0.30.0 itself (import paths verified against the installed wheel):
- argv: `vllm.entrypoints.launchers.cli_args.make_arg_parser(
  vllm.utils.argparse_utils.FlexibleArgumentParser())` parses each case's server
  arguments, then `validate_parsed_serve_args` runs vLLM's pre-load checks on the
  namespace. That is exactly what the launch command (`python3 -m
  vllm.entrypoints.openai.api_server`, as the AWS image runs it) does: its `__main__`
  calls `vllm.entrypoints.launchers.api_server.entry.main`, which builds the same parser
  (the probe checks both in vLLM's source). For `--allowed-origins` the probe also asks
  Starlette's CORSMiddleware, which vLLM installs with that value, whether a foreign
  origin would be allowed.
- spec (field validation): `vllm.config.SpeculativeConfig(**config)` with its
  `__post_init__` replaced by a no-op. That keeps pydantic's validation of every field
  (types, `gt=0` on num_speculative_tokens, the SpeculativeMethod Literal, `extra="forbid"`)
  and the `_verify_args` model validator (tensor_parallel_size, K present and > 0),
  and skips only what needs the target model's config (`__post_init__` builds the
  draft ModelConfig from the target's). The per-batch-size schedule, which vLLM checks
  when the scheduler starts, goes through
  `vllm.v1.spec_decode.dynamic.utils.validate_and_normalize_dynamic_sd_schedule`.
- full: the real `SpeculativeConfig(...)`, `__post_init__` included, against a
  `vllm.config.ModelConfig` of the synthetic target and the synthetic drafter on disk.
- introspection: SpeculativeConfig's init fields, the SpeculativeMethod values, that
  `VLLM_USE_V2_MODEL_RUNNER` is a vLLM environment variable.
- mask tokens: `vllm.v1.worker.gpu.spec_decode.utils.get_parallel_drafting_token_id`
  on drafter configs (the preflight's rule 8 must agree with it).
- metrics: Prometheus text from vLLM's own `SpecDecodingProm`.
- safetensors: the real `safetensors` library reads the synthetic drafter files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import sys
import typing
from types import SimpleNamespace
from typing import Any


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def check_argv(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    results = []
    for case in cases:
        argv = case["args"]
        parser = make_arg_parser(FlexibleArgumentParser(prog="api_server"))
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                args = parser.parse_args(argv)
                validate_parsed_serve_args(args)
        except SystemExit as e:
            results.append(
                {"name": case["name"], "ok": False, "error": stderr.getvalue() or str(e)}
            )
            continue
        except Exception as e:  # validate_parsed_serve_args raises TypeError/ValueError
            results.append({"name": case["name"], "ok": False, "error": _error(e)})
            continue
        dests = {tok[2:].replace("-", "_") for tok in argv if tok.startswith("--")} | {
            "port",
            "model",
            "speculative_config",
            *case.get("dests", []),
        }
        results.append(
            {
                "name": case["name"],
                "ok": True,
                "values": {d: _jsonable(getattr(args, d, "<missing>")) for d in sorted(dests)},
                "cors_allows_foreign_origin": cors_allows(args.allowed_origins),
            }
        )
    return results


def cors_allows(allowed_origins: list[str]) -> bool:
    """Whether vLLM's CORS middleware (vllm/entrypoints/serve/middleware/register.py
    passes allow_origins=args.allowed_origins) would let a foreign origin in."""
    from starlette.middleware.cors import CORSMiddleware

    cors = CORSMiddleware(app=lambda *a: None, allow_origins=allowed_origins)
    return bool(cors.is_allowed_origin("https://foreign.example"))


def server_module_uses_this_parser() -> bool:
    """`python3 -m vllm.entrypoints.openai.api_server` runs entry.main, which parses with
    make_arg_parser(FlexibleArgumentParser(...)) and validate_parsed_serve_args."""
    import inspect

    import vllm.entrypoints.openai.api_server as module
    from vllm.entrypoints.launchers.api_server import entry

    dispatch = inspect.getsource(module).split('if __name__ == "__main__":', 1)[-1]
    main_source = inspect.getsource(entry.main)
    return (
        "from vllm.entrypoints.launchers.api_server.entry import main" in dispatch
        and "make_arg_parser(parser)" in main_source
        and "validate_parsed_serve_args(args)" in main_source
    )


def check_speculative_fields(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm.config import SpeculativeConfig
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    original = SpeculativeConfig.__post_init__
    SpeculativeConfig.__post_init__ = lambda self: None  # type: ignore[method-assign]
    results = []
    try:
        for case in cases:
            config = case["config"]
            try:
                sc = SpeculativeConfig(**config)
                if config.get("num_speculative_tokens_per_batch_size") is not None:
                    validate_and_normalize_dynamic_sd_schedule(
                        config["num_speculative_tokens_per_batch_size"]
                    )
                results.append(
                    {
                        "name": case["name"],
                        "ok": True,
                        "method": sc.method,
                        "num_speculative_tokens": sc.num_speculative_tokens,
                        "parallel_drafting": sc.parallel_drafting,
                    }
                )
            except Exception as e:
                results.append({"name": case["name"], "ok": False, "error": _error(e)})
    finally:
        SpeculativeConfig.__post_init__ = original  # type: ignore[method-assign]
    return results


def check_full(target: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    model_config = ModelConfig(model=target, tokenizer=target, max_model_len=256)
    results = []
    for case in cases:
        try:
            sc = SpeculativeConfig(
                **case["config"],
                target_model_config=model_config,
                target_parallel_config=ParallelConfig(),
            )
            hf = sc.draft_model_config.hf_config
            results.append(
                {
                    "name": case["name"],
                    "ok": True,
                    "method": sc.method,
                    "parallel_drafting": sc.parallel_drafting,
                    "num_speculative_tokens": sc.num_speculative_tokens,
                    "draft_architectures": list(sc.draft_model_config.architectures),
                    "mask_token_id": getattr(hf, "mask_token_id", None),
                    "target_hidden_size": getattr(hf, "target_hidden_size", None),
                }
            )
        except Exception as e:
            results.append({"name": case["name"], "ok": False, "error": _error(e)})
    return results


def mask_tokens(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vLLM's own mask-token lookup for parallel drafting on each drafter config."""
    from vllm.v1.worker.gpu.spec_decode.utils import get_parallel_drafting_token_id

    results = []
    for case in cases:
        try:
            value = get_parallel_drafting_token_id(SimpleNamespace(**case["config"]))
            results.append({"name": case["name"], "ok": True, "value": value})
        except ValueError as e:
            results.append({"name": case["name"], "ok": False, "error": _error(e)})
    return results


def introspect() -> dict[str, Any]:
    import vllm
    import vllm.envs
    from vllm.config import SpeculativeConfig
    from vllm.config.speculative import SpeculativeMethod

    def literal_values(t: Any) -> list[str]:
        out: list[str] = []
        for arg in typing.get_args(t):
            if typing.get_origin(arg) is typing.Literal:
                out.extend(literal_values(arg))
            else:
                out.append(arg)
        return out

    return {
        "vllm_version": vllm.__version__,
        "speculative_init_fields": sorted(
            f.name for f in dataclasses.fields(SpeculativeConfig) if f.init
        ),
        "speculative_methods": sorted(literal_values(SpeculativeMethod)),
        "v2_runner_env_known": "VLLM_USE_V2_MODEL_RUNNER" in vllm.envs.environment_variables,
        "server_module_uses_this_parser": server_module_uses_this_parser(),
    }


def metrics_text(k: int, drafts: list[list[int]]) -> str:
    import prometheus_client
    from vllm.v1.spec_decode.metrics import SpecDecodingProm, SpecDecodingStats

    prom = SpecDecodingProm(
        SimpleNamespace(num_speculative_tokens=k), ["model_name", "engine"], {0: ["m", "0"]}
    )
    stats = SpecDecodingStats.new(k)
    for n_draft, n_accepted in drafts:
        stats.observe_draft(n_draft, n_accepted)
    prom.observe(stats, 0)
    text: str = prometheus_client.generate_latest().decode()
    return text


def serving_metrics() -> dict[str, Any]:
    """The bucket bounds of vLLM's latency histograms and the metric names its Prometheus
    logger registers (read from its source: registering them needs a whole engine)."""
    import inspect

    from vllm.v1.metrics import buckets, loggers

    source = inspect.getsource(loggers)
    return {
        "buckets": {
            "time_to_first_token": list(buckets.TIME_TO_FIRST_TOKEN_BUCKETS),
            "inter_token_latency": list(buckets.INTER_TOKEN_LATENCY_BUCKETS),
            "request_latency": list(buckets.REQUEST_LATENCY_BUCKETS),
        },
        "names": sorted(set(re.findall(r'name="(vllm:[a-z0-9_]+)"', source))),
    }


def safetensors_shapes(paths: list[str]) -> dict[str, dict[str, list[int]]]:
    from safetensors import safe_open

    out: dict[str, dict[str, list[int]]] = {}
    for path in paths:
        with safe_open(path, framework="numpy") as f:
            out[path] = {name: list(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    return out


def main() -> int:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = {
        **introspect(),
        "argv": check_argv(cases["argv"]),
        "speculative": check_speculative_fields(cases["speculative"]),
        "full": check_full(cases["target"], cases["full"]),
        "mask_tokens": mask_tokens(cases["mask_tokens"]),
        "metrics_text": metrics_text(cases["metrics"]["k"], cases["metrics"]["drafts"]),
        "serving_metrics": serving_metrics(),
        "safetensors": safetensors_shapes(cases["safetensors"]),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
