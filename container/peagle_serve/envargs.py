"""SM_VLLM_* environment -> vLLM server arguments, exactly as AWS's vLLM images do it.

Users move to this container from AWS's vLLM SageMaker images, so every variable means
what it means there. The reference is the images' own converter, read at
aws/deep-learning-containers@dceae13291323f0985f5e90923f4b332c387af6a
`scripts/docker/vllm/sagemaker_args.py` (run by `scripts/docker/vllm/sagemaker_entrypoint.sh`;
both are copied into the `vllm-sagemaker-amzn2023` target of `docker/vllm/Dockerfile.amzn2023`,
which builds the `vllm:server-sagemaker-cuda-*` images):

- the arguments start with `--port 8080`; then `--model` from the model ladder when
  SM_VLLM_MODEL is unset (a non-empty /opt/ml/model, else HF_MODEL_ID); then every
  `SM_VLLM_<NAME>` in name order as `--<name>` (lowercase, `_` -> `-`);
- `true` / `false` in any case (surrounding spaces ignored) -> bare flag / flag omitted;
  an empty value -> bare flag;
- for `--allowed-origins`, `--allowed-methods`, `--allowed-headers` and `--middleware`
  the value is one token as written (so `[]` is passed as `[]`: no allowed origins);
- a JSON array (`[...]`) -> one token per element: strings as they are, objects and
  arrays as compact JSON, true/false as `true`/`false`, null as an empty string, numbers
  as Python prints them; `[]` -> flag omitted; text in brackets that is not JSON -> as is;
- several JSON objects in a row (`{...} {...}`) -> one compact-JSON token each; one
  object, or anything else -> the value as is.

Where this converter deliberately differs (docs/container.md lists it): a value that is
JSON but breaks strict_json's limits (nesting, duplicate keys, NaN, size, bytes that are
not UTF-8) is refused with one line instead of being passed on; SM_VLLM_PORT other than
8080 is refused (SageMaker only sends traffic to 8080); no model anywhere is an error
(the AWS images start vLLM's default model); a bare `SM_VLLM_` names no flag and is
skipped; SM_VLLM_PORT=8080 is not repeated.

Everything here is pure (environment in, arguments out) so the table can be tested
exhaustively; the preflight and the process handling live elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from peagle_serve import contract, strict_json

# Flags whose value vLLM parses itself (json.loads, or one value per occurrence), so
# the AWS converter passes their value through as one token (sagemaker_args.py,
# SINGLE_TOKEN_FLAGS).
SINGLE_TOKEN_ARRAY_FLAGS: Final = frozenset(
    {"--allowed-origins", "--allowed-methods", "--allowed-headers", "--middleware"}
)
# Where the target model sits in the container; overridable so tests can point it
# anywhere.
MODEL_DIR_ENV: Final = "PEAGLE_MODEL_DIR"
PORT_ENV: Final = contract.PORT_ENV


class ArgvError(ValueError):
    """An environment that cannot become a vLLM argv (names the variable)."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


@dataclass(frozen=True)
class ModelChoice:
    """Which model vLLM will serve and where that choice came from."""

    value: str
    source: str  # the variable or path that decided it


def flag_name(variable: str) -> str:
    """`SM_VLLM_MAX_MODEL_LEN` -> `--max-model-len`."""
    return "--" + variable[len(contract.SM_VLLM_PREFIX) :].lower().replace("_", "-")


_NOT_JSON: Final = object()


def _parse(variable: str, text: str) -> Any:
    """One JSON value under strict_json's limits; _NOT_JSON when it is not JSON at all."""
    try:
        return strict_json.loads(text, what=variable, max_bytes=strict_json.ENV_VALUE_MAX_BYTES)
    except strict_json.JsonSyntaxError:
        return _NOT_JSON
    except strict_json.JsonLimitError as e:
        raise ArgvError(variable, e.problem) from None


def _json_objects(variable: str, text: str) -> list[dict[str, Any]] | None:
    """The objects of a run of JSON objects (`{...} {...}`), or None for anything else."""
    try:
        strict_json.check_text(text, what=variable, max_bytes=strict_json.ENV_VALUE_MAX_BYTES)
    except strict_json.JsonLimitError as e:
        raise ArgvError(variable, e.problem) from None
    decoder = strict_json.decoder()
    objects: list[dict[str, Any]] = []
    pos, n = 0, len(text)
    while pos < n:
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError as e:
            error = strict_json.parse_error(variable, e)
            if isinstance(error, strict_json.JsonLimitError):
                raise ArgvError(variable, error.problem) from None
            return None
        if not isinstance(obj, dict):
            return None
        objects.append(obj)
        while pos < n and text[pos].isspace():
            pos += 1
    return objects or None


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _array_element(value: object) -> str:
    """One JSON array element as an argv token (sagemaker_args.py, as_token)."""
    if isinstance(value, dict | list):
        return _compact(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def value_tokens(flag: str, value: str, variable: str = "") -> list[str] | None:
    """The argv tokens for one flag and its raw value, or None when the flag is omitted.

    `variable` names the value in errors (defaults to the flag).
    """
    variable = variable or flag
    lowered = value.strip().lower()
    if lowered == "true":
        return [flag]
    if lowered == "false":
        return None
    if not value:
        return [flag]
    stripped = value.strip()
    if flag in SINGLE_TOKEN_ARRAY_FLAGS:
        if stripped.startswith(("[", "{")):
            _parse(variable, stripped)  # limits only: vLLM parses it with json.loads
        return [flag, value]
    if stripped.startswith("[") and stripped.endswith("]"):
        items = _parse(variable, stripped)
        if isinstance(items, list):
            if not items:
                return None
            return [flag, *(_array_element(item) for item in items)]
        return [flag, value]
    if stripped.startswith("{") and stripped.endswith("}"):
        objects = _json_objects(variable, stripped)
        if objects is not None and len(objects) > 1:
            return [flag, *(_compact(obj) for obj in objects)]
        return [flag, value]
    return [flag, value]


def _dir_has_entries(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(True for _ in it)
    except OSError:
        return False


def resolve_model(env: Mapping[str, str]) -> ModelChoice:
    """SM_VLLM_MODEL, else a non-empty model directory, else HF_MODEL_ID."""
    explicit = env.get(contract.MODEL_ENV, "")
    if explicit.strip():
        return ModelChoice(explicit, contract.MODEL_ENV)
    model_dir = env.get(MODEL_DIR_ENV) or contract.MODEL_DIR
    if _dir_has_entries(model_dir):
        return ModelChoice(model_dir, model_dir)
    hf_id = env.get(contract.HF_MODEL_ID_ENV, "")
    if hf_id.strip():
        return ModelChoice(hf_id, contract.HF_MODEL_ID_ENV)
    raise ArgvError(
        contract.MODEL_ENV,
        f"no model to serve: set {contract.MODEL_ENV}, put the model in {model_dir} "
        f"(ModelDataSource), or set {contract.HF_MODEL_ID_ENV}",
    )


def build_args(
    env: Mapping[str, str],
    *,
    overrides: Mapping[str, str] | None = None,
) -> list[str]:
    """The vLLM server arguments for this environment (no program name), in the AWS
    converter's order.

    `overrides` replaces the raw value of some SM_VLLM_* variables (the preflight uses
    it to pass a corrected speculative config) without touching the environment.
    """
    model = resolve_model(env)
    args = ["--port", str(contract.SERVING_PORT)]
    values = {k: v for k, v in env.items() if k.startswith(contract.SM_VLLM_PREFIX)}
    values.update(overrides or {})
    if contract.MODEL_ENV not in values or not values[contract.MODEL_ENV].strip():
        args += ["--model", model.value]
    for variable in sorted(values):
        if len(variable) == len(contract.SM_VLLM_PREFIX):
            continue  # a bare "SM_VLLM_" names no flag
        if variable == contract.MODEL_ENV:
            if values[variable].strip():
                args += ["--model", model.value]
            continue
        if variable == PORT_ENV:
            port = values[variable].strip()
            if port != str(contract.SERVING_PORT):
                raise ArgvError(
                    PORT_ENV,
                    f"SageMaker sends traffic to port {contract.SERVING_PORT}; "
                    f"got {port!r} (remove the variable)",
                )
            continue  # --port 8080 is already there
        tokens = value_tokens(flag_name(variable), values[variable], variable)
        if tokens:
            args.extend(tokens)
    return args
