"""SM_VLLM_* environment -> `vllm serve` argv, with the AWS vLLM images' semantics.

Users move to this container from AWS's vLLM SageMaker images, so every variable must
mean exactly what it meant there (docs/container.md):

- `SM_VLLM_<NAME>` becomes `--<name>` (lowercase, `_` -> `-`); `--port 8080` always.
- `true` (any case) or an empty value -> bare flag; `false` (any case) -> flag omitted.
- a JSON array -> one argv token per element, except for the flags in
  SINGLE_TOKEN_ARRAY_FLAGS, which take the whole array as one token; `[]` -> omitted.
- one JSON object -> passed verbatim as one token; several whitespace-separated objects
  -> one token each; anything else -> passed as is.
- the model: `SM_VLLM_MODEL`, else a non-empty model directory (/opt/ml/model), else
  `HF_MODEL_ID`.

Everything here is pure (environment in, argv out) so that the table can be tested
exhaustively; the preflight and the process handling live elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from peagle_serve import contract

# Flags whose JSON-array value vLLM parses itself (json.loads / str), so the array
# stays one token.
SINGLE_TOKEN_ARRAY_FLAGS: Final = frozenset(
    {"--allowed-origins", "--allowed-methods", "--allowed-headers", "--middleware"}
)
# Where the target model sits in the container; overridable so tests can point it
# anywhere.
MODEL_DIR_ENV: Final = "PEAGLE_MODEL_DIR"
PORT_ENV: Final = contract.SM_VLLM_PREFIX + "PORT"


class ArgvError(ValueError):
    """An environment that cannot become a `vllm serve` argv (names the variable)."""

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


def _json_objects(text: str) -> list[str] | None:
    """The verbatim substrings of one or more whitespace-separated JSON objects.

    None when `text` is anything else (so the caller passes it as is).
    """
    decoder = json.JSONDecoder()
    parts: list[str] = []
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        if text[pos] != "{":
            return None
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        parts.append(text[pos:end])
        pos = end
    return parts or None


def _array_element(value: object) -> str:
    """One JSON array element as an argv token (strings unquoted, the rest as JSON)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def value_tokens(flag: str, value: str) -> list[str] | None:
    """The argv tokens for one flag, or None when the flag is omitted."""
    stripped = value.strip()
    lowered = stripped.lower()
    if lowered == "false":
        return None
    if lowered == "true" or value == "":
        return [flag]
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError:
            items = None
        if isinstance(items, list):
            if not items:
                return None
            if flag in SINGLE_TOKEN_ARRAY_FLAGS:
                return [flag, stripped]
            return [flag, *(_array_element(item) for item in items)]
    if stripped.startswith("{"):
        objects = _json_objects(stripped)
        if objects is not None:
            return [flag, *objects]
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
        return ModelChoice(hf_id.strip(), contract.HF_MODEL_ID_ENV)
    raise ArgvError(
        contract.MODEL_ENV,
        f"no model to serve: set {contract.MODEL_ENV}, put the model in {model_dir} "
        f"(ModelDataSource), or set {contract.HF_MODEL_ID_ENV}",
    )


def build_argv(
    env: Mapping[str, str],
    *,
    overrides: Mapping[str, str] | None = None,
    executable: str = "vllm",
) -> list[str]:
    """The full `vllm serve` argv for this environment.

    `overrides` replaces the raw value of some SM_VLLM_* variables (the preflight uses
    it to pass a corrected speculative config) without touching the environment.
    Variables are taken in name order so the argv is deterministic.
    """
    model = resolve_model(env)
    argv = [executable, "serve", "--model", model.value, "--port", str(contract.SERVING_PORT)]
    values = {k: v for k, v in env.items() if k.startswith(contract.SM_VLLM_PREFIX)}
    values.update(overrides or {})
    for variable in sorted(values):
        if variable == contract.MODEL_ENV:
            continue  # already resolved above
        if len(variable) == len(contract.SM_VLLM_PREFIX):
            continue  # a bare "SM_VLLM_" names no flag
        if variable == PORT_ENV:
            port = values[variable].strip()
            if port != str(contract.SERVING_PORT):
                raise ArgvError(
                    PORT_ENV,
                    f"SageMaker sends traffic to port {contract.SERVING_PORT}; "
                    f"got {port!r} (remove the variable)",
                )
            continue  # --port 8080 is always there
        tokens = value_tokens(flag_name(variable), values[variable])
        if tokens:
            argv.extend(tokens)
    return argv
