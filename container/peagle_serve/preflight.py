"""P-EAGLE preflight: catch a misconfigured drafter in the first second, not after a
15-minute endpoint provisioning that ends in a failed health check (or, worse, a
server that runs with silently low acceptance).

Every rule mirrors a check vLLM 0.30.0 makes later (or a trap it falls into), and each
failure is one line naming the variable and the field, which is what shows in
CloudWatch. Nothing here imports vLLM or torch: weights are inspected through their
safetensors headers only.

Rules (each has a passing and a failing test in tests/container):
 1. SM_VLLM_SPECULATIVE_CONFIG is one JSON object.
 2. Only fields SpeculativeConfig accepts from the command line (KNOWN_SPECULATIVE_FIELDS);
    `tensor_parallel_size` -> asks for `draft_tensor_parallel_size`, like vLLM.
 3. Field values: num_speculative_tokens an integer >= 1, method one of SPECULATIVE_METHODS,
    booleans are JSON booleans, sizes >= 1, the per-batch-size schedule well formed.
 4. parallel_drafting needs method eagle3; a missing method is set to eagle3 (vLLM
    would otherwise guess from the drafter's name and pick the wrong head type).
 5. disable_padded_drafter_batch cannot be combined with parallel_drafting.
 6. The V2 model runner does not do parallel drafting: VLLM_USE_V2_MODEL_RUNNER is
    set to 0, and an explicit 1 is an error.
 7. An EAGLE drafter needs `model`; a local drafter directory must exist and hold files.
 8. With parallel drafting the drafter's config.json carries a mask-token id
    (mask_token_id, ptd_token_id, pard_token or dflash_config.mask_token_id) and no
    M-RoPE section.
 9. With parallel drafting the weights carry a `mask_hidden` tensor whose size is
    target_hidden_size x number of auxiliary hidden states.
10. The drafter's target hidden size equals the target model's hidden size.
11. K above what the drafter was trained for: a warning (see TRAINED_TOKENS_KEYS).
12. SM_VLLM_PORT, when set, is 8080.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from peagle_serve import contract, drafter_rules, strict_json

# Rules 8-11 are pure functions in drafter_rules (shared with `peagle doctor`);
# mask_token_id and num_aux_hidden_states stay importable from here for older callers.
from peagle_serve.drafter_rules import (
    NON_SAFETENSORS_WEIGHT_SUFFIXES,
    TRAINED_TOKENS_KEYS,
    num_aux_hidden_states,  # noqa: F401
    trained_tokens,
)
from peagle_serve.drafter_rules import find_mask_token as mask_token_id  # noqa: F401
from peagle_serve.envargs import ModelChoice
from peagle_serve.numeric_env import NumericEnvError, numeric_value
from peagle_serve.safetensors_header import SafetensorsError, checkpoint_tensors

# Fields of vllm.config.SpeculativeConfig (0.30.0) that a user may set through
# --speculative-config. The engine fills target_/draft_ model and parallel configs
# itself; tensor_parallel_size exists only to be rejected. The contract test checks
# this set against the real dataclass.
KNOWN_SPECULATIVE_FIELDS: Final = frozenset(
    {
        "attention_backend",
        "code_revision",
        "disable_eagle_block_drop",
        "disable_padded_drafter_batch",
        "draft_load_config",
        "draft_sample_method",
        "draft_tensor_parallel_size",
        "dspark_draft_topk",
        "enable_adaptive_verification",
        "enforce_eager",
        "index_share_for_mtp_iteration",
        "kv_cache_dtype",
        "max_model_len",
        "method",
        "model",
        "moe_backend",
        "num_speculative_tokens",
        "num_speculative_tokens_per_batch_size",
        "parallel_drafting",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "quantization",
        "rejection_sample_method",
        "revision",
        "suffix_decoding_max_cached_requests",
        "suffix_decoding_max_spec_factor",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_min_token_prob",
        "synthetic_acceptance_length",
        "synthetic_acceptance_rates",
        "use_heterogeneous_vocab",
        "use_local_argmax_reduction",
    }
)
ENGINE_FILLED_SPECULATIVE_FIELDS: Final = frozenset(
    {"target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config"}
)
# The values of vllm.config.speculative.SpeculativeMethod (0.30.0); contract-tested.
SPECULATIVE_METHODS: Final = frozenset(
    {
        "bailing_hybrid_mtp",
        "bailing_hybrid_v3_mtp",
        "custom_class",
        "deepseek_mtp",
        "dflash",
        "dots3_note_mtp",
        "draft_model",
        "dspark",
        "eagle",
        "eagle3",
        "ernie_mtp",
        "exaone4_5_mtp",
        "exaone_moe_mtp",
        "extract_hidden_states",
        "gemma4_mtp",
        "glm4_moe_lite_mtp",
        "glm4_moe_mtp",
        "glm5_next_mtp",
        "glm_ocr_mtp",
        "hy_v3_mtp",
        "hy_v4_mtp",
        "inkling_mtp",
        "kimi_k3_mtp",
        "longcat_flash_mtp",
        "medusa",
        "mimo_mtp",
        "mimo_v2_mtp",
        "minimax_m3_mtp",
        "mlp_speculator",
        "mtp",
        "nemotron_h_mtp",
        "ngram",
        "ngram_gpu",
        "pangu_ultra_moe_mtp",
        "qwen3_5_mtp",
        "qwen3_next_mtp",
        "qwen4_exp_mtp",
        "step3p5_mtp",
        "suffix",
    }
)
PARALLEL_DRAFTING_METHOD: Final = "eagle3"
EAGLE_METHODS: Final = frozenset({"eagle", "eagle3"})
# Methods whose `model` is not a drafter checkpoint (a keyword or a Python class path).
NON_MODEL_METHODS: Final = frozenset({"ngram", "ngram_gpu", "suffix", "custom_class"})
BOOL_FIELDS: Final = (
    "parallel_drafting",
    "disable_padded_drafter_batch",
    "disable_eagle_block_drop",
    "use_local_argmax_reduction",
    "use_heterogeneous_vocab",
    "enable_adaptive_verification",
)
POSITIVE_INT_FIELDS: Final = (
    "draft_tensor_parallel_size",
    "max_model_len",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "dspark_draft_topk",
)
V2_RUNNER_ENV: Final = contract.V2_RUNNER_ENV
# Tells the preflight how many parallel tokens the drafter was trained for when its
# config.json does not say (e.g. 10 for amazon/GPT-OSS-20B-P-EAGLE, per its model card).
TRAINED_TOKENS_ENV: Final = contract.DRAFTER_TRAINED_TOKENS_ENV


class PreflightError(Exception):
    """One configuration problem; str() is the single line printed before exiting."""

    def __init__(self, variable: str, field_name: str | None, problem: str) -> None:
        where = f"{variable}.{field_name}" if field_name else variable
        super().__init__(f"{where}: {problem}")
        self.variable = variable
        self.field_name = field_name
        self.problem = problem


@dataclass
class PreflightResult:
    """What the entrypoint must change before starting vLLM, and what to log."""

    speculative: dict[str, Any] | None = None
    # A new raw value for SM_VLLM_SPECULATIVE_CONFIG when the preflight changed it.
    speculative_override: str | None = None
    env_updates: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


SPECULATIVE_ENV: Final = contract.SPECULATIVE_CONFIG_ENV


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_speculative_config(raw: str) -> dict[str, Any]:
    """Rule 1: exactly one JSON object (strict_json's limits apply)."""
    try:
        value = strict_json.loads(
            raw, what=SPECULATIVE_ENV, max_bytes=strict_json.ENV_VALUE_MAX_BYTES
        )
    except strict_json.JsonInputError as e:
        raise PreflightError(
            SPECULATIVE_ENV, None, f"{e.problem}; expected one JSON object"
        ) from None
    if not isinstance(value, dict):
        raise PreflightError(
            SPECULATIVE_ENV, None, f"expected one JSON object, got {type(value).__name__}"
        )
    return value


def check_fields(cfg: Mapping[str, Any]) -> None:
    """Rules 2 and 3: field names and values, as vLLM's SpeculativeConfig sees them."""
    if "tensor_parallel_size" in cfg:
        raise PreflightError(
            SPECULATIVE_ENV,
            "tensor_parallel_size",
            "not a speculative-config field; use draft_tensor_parallel_size (1 or the "
            "target's tensor parallel size)",
        )
    unknown = sorted(set(cfg) - KNOWN_SPECULATIVE_FIELDS)
    if unknown:
        raise PreflightError(
            SPECULATIVE_ENV,
            unknown[0],
            "unknown field (vLLM rejects it); allowed: "
            + ", ".join(sorted(KNOWN_SPECULATIVE_FIELDS)),
        )
    if "num_speculative_tokens" in cfg:
        k = cfg["num_speculative_tokens"]
        if not _is_int(k) or k < 1:
            raise PreflightError(
                SPECULATIVE_ENV, "num_speculative_tokens", f"must be an integer >= 1, got {k!r}"
            )
    if "method" in cfg and cfg["method"] not in SPECULATIVE_METHODS:
        raise PreflightError(
            SPECULATIVE_ENV,
            "method",
            f"unknown method {cfg['method']!r}; use eagle3 for P-EAGLE (allowed: "
            f"{', '.join(sorted(SPECULATIVE_METHODS))})",
        )
    if "model" in cfg and (not isinstance(cfg["model"], str) or not cfg["model"].strip()):
        raise PreflightError(
            SPECULATIVE_ENV, "model", f"must be a non-empty path, got {cfg['model']!r}"
        )
    for name in BOOL_FIELDS:
        if name in cfg and not isinstance(cfg[name], bool):
            raise PreflightError(SPECULATIVE_ENV, name, f"must be true or false, got {cfg[name]!r}")
    for name in POSITIVE_INT_FIELDS:
        if name in cfg and cfg[name] is not None and (not _is_int(cfg[name]) or cfg[name] < 1):
            raise PreflightError(
                SPECULATIVE_ENV, name, f"must be an integer >= 1, got {cfg[name]!r}"
            )
    schedule = cfg.get("num_speculative_tokens_per_batch_size")
    if schedule is not None:
        _check_schedule(schedule)


def _check_schedule(schedule: object) -> None:
    """vLLM's schedule rules, as the plan applies them (contract.k_schedule_problem)."""
    found = contract.k_schedule_problem(schedule, None)
    if found is not None:
        raise PreflightError(SPECULATIVE_ENV, contract.K_SCHEDULE_FIELD, found.problem)


def max_k(cfg: Mapping[str, Any]) -> int | None:
    """The largest K the server uses: num_speculative_tokens (vLLM caps every K of the
    per-batch-size schedule at it)."""
    k = cfg.get("num_speculative_tokens")
    return k if _is_int(k) else None


# --- drafter and target config helpers ----------------------------------------------


def _load_json(path: str, variable: str, field_name: str | None) -> dict[str, Any]:
    try:
        value = strict_json.load_file(path, max_bytes=strict_json.CONFIG_MAX_BYTES)
    except OSError as e:
        raise PreflightError(variable, field_name, f"cannot read {path}: {e.strerror}") from e
    except strict_json.JsonInputError as e:
        raise PreflightError(variable, field_name, str(e)) from None
    if not isinstance(value, dict):
        raise PreflightError(variable, field_name, f"{path} is not a JSON object")
    return value


def _is_local_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or os.path.exists(model)


# --- the preflight ------------------------------------------------------------------


def run_preflight(env: Mapping[str, str], target: ModelChoice) -> PreflightResult:
    """Check the speculative setup in `env`; raise PreflightError on the first problem."""
    result = PreflightResult()
    raw = env.get(SPECULATIVE_ENV)
    if raw is None:
        result.notes.append("no speculative decoding configured (SM_VLLM_SPECULATIVE_CONFIG unset)")
        return result
    cfg = parse_speculative_config(raw)
    check_fields(cfg)
    parallel = bool(cfg.get("parallel_drafting", False))
    changed = False

    if parallel:
        if "method" not in cfg:
            cfg["method"] = PARALLEL_DRAFTING_METHOD
            changed = True
            result.notes.append(
                f"{SPECULATIVE_ENV}.method: not set; set to {PARALLEL_DRAFTING_METHOD!r} for "
                "parallel drafting (vLLM would guess the method from the drafter's name)"
            )
        elif cfg["method"] != PARALLEL_DRAFTING_METHOD:
            raise PreflightError(
                SPECULATIVE_ENV,
                "method",
                f"parallel_drafting (P-EAGLE) needs method {PARALLEL_DRAFTING_METHOD!r}, "
                f"got {cfg['method']!r}",
            )
        if cfg.get("disable_padded_drafter_batch"):
            raise PreflightError(
                SPECULATIVE_ENV,
                "disable_padded_drafter_batch",
                "must be false with parallel_drafting (vLLM raises NotImplementedError)",
            )
        v2 = env.get(V2_RUNNER_ENV)
        if not contract.v2_runner_off(v2):
            raise PreflightError(
                V2_RUNNER_ENV,
                None,
                f"is {v2!r}, but the V2 model runner does not do parallel drafting; "
                "unset it or set 0",
            )
        result.env_updates[V2_RUNNER_ENV] = "0"
        result.notes.append(f"{V2_RUNNER_ENV}=0: parallel drafting runs on the V1 model runner")

    method = cfg.get("method")
    if (method in EAGLE_METHODS or parallel) and "model" not in cfg:
        raise PreflightError(
            SPECULATIVE_ENV,
            "model",
            f"method {method!r} needs the drafter path, e.g. {contract.drafter_mount_path()!r}",
        )

    drafter_config: dict[str, Any] | None = None
    drafter = cfg.get("model")
    if isinstance(drafter, str) and method not in NON_MODEL_METHODS:
        if _is_local_path(drafter):
            try:
                _check_drafter_dir(drafter)
                if method in EAGLE_METHODS:
                    drafter_config = _check_eagle_drafter(drafter, parallel, target, result)
            except OSError as e:  # permissions, a mount that went away, ...
                raise PreflightError(
                    SPECULATIVE_ENV, "model", f"cannot read drafter {drafter}: {e}"
                ) from e
        else:
            result.notes.append(
                f"{SPECULATIVE_ENV}.model: {drafter!r} is not a local path; vLLM downloads it, "
                "drafter file checks skipped"
            )

    if "num_speculative_tokens" not in cfg and not (
        drafter_config and trained_tokens(drafter_config)
    ):
        raise PreflightError(
            SPECULATIVE_ENV,
            "num_speculative_tokens",
            "required (an integer >= 1): the drafter's config.json gives no default",
        )
    _check_trained_tokens(cfg, drafter_config, env, result)

    result.speculative = cfg
    if changed:
        result.speculative_override = json.dumps(cfg, separators=(",", ":"))
    return result


def _check_drafter_dir(path: str) -> None:
    """Rule 7 for any drafter on the local disk."""
    if not os.path.exists(path):
        raise PreflightError(
            SPECULATIVE_ENV,
            "model",
            f"drafter directory {path} does not exist (is the additional model data "
            f"source channel mounted at {contract.ADDITIONAL_DATA_ROOT}/<channel>?)",
        )
    if not os.path.isdir(path):
        raise PreflightError(SPECULATIVE_ENV, "model", f"drafter path {path} is not a directory")
    if not os.listdir(path):
        raise PreflightError(SPECULATIVE_ENV, "model", f"drafter directory {path} is empty")


def _check_eagle_drafter(
    path: str, parallel: bool, target: ModelChoice, result: PreflightResult
) -> dict[str, Any]:
    """Rules 8-10 for an EAGLE / EAGLE-3 drafter on the local disk; returns its config."""
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        nested = sorted(
            entry
            for entry in os.listdir(path)
            if os.path.isfile(os.path.join(path, entry, "config.json"))
        )
        hint = (
            f" (found {nested[0]}/config.json: point model at {os.path.join(path, nested[0])})"
            if nested
            else ""
        )
        raise PreflightError(
            SPECULATIVE_ENV, "model", f"drafter directory {path} has no config.json{hint}"
        )
    config = _load_json(config_path, SPECULATIVE_ENV, "model")

    if parallel:
        for problem in (
            drafter_rules.mask_token_problem(config, config_path),
            drafter_rules.mrope_problem(config, config_path),
        ):
            if problem:
                raise PreflightError(SPECULATIVE_ENV, "model", problem)

    try:
        tensors = checkpoint_tensors(path)
    except SafetensorsError as e:
        raise PreflightError(SPECULATIVE_ENV, "model", f"drafter weights: {e}") from e
    if not tensors:
        other = [n for n in os.listdir(path) if n.endswith(NON_SAFETENSORS_WEIGHT_SUFFIXES)]
        if not other:
            raise PreflightError(
                SPECULATIVE_ENV, "model", f"drafter directory {path} has no weights"
            )
        result.warnings.append(
            f"{SPECULATIVE_ENV}.model: {path} has no safetensors weights; mask_hidden not checked"
        )
    elif parallel:
        problem = drafter_rules.mask_hidden_problem(tensors, config, path)
        if problem:
            raise PreflightError(SPECULATIVE_ENV, "model", problem)

    target_config = _target_config(target)
    if target_config is not None:
        problem = drafter_rules.hidden_size_problem(config, target_config, path, target.source)
        if problem:
            raise PreflightError(SPECULATIVE_ENV, "model", problem)
    else:
        result.notes.append(
            f"target model {target.value!r} has no local config.json; hidden size not compared"
        )
    return config


def _target_config(target: ModelChoice) -> dict[str, Any] | None:
    config_path = os.path.join(target.value, "config.json")
    if not os.path.isfile(config_path):
        return None
    return _load_json(config_path, target.source, "config.json")


def _check_trained_tokens(
    cfg: Mapping[str, Any],
    drafter_config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    result: PreflightResult,
) -> None:
    """Rule 11 (a warning): K above the number of tokens the drafter was trained for."""
    k = max_k(cfg)
    trained: tuple[str, int] | None = None
    try:
        override = numeric_value(env, TRAINED_TOKENS_ENV)
    except NumericEnvError as e:
        problem = f"{e.problem} (allowed: {e.allowed})"
        raise PreflightError(TRAINED_TOKENS_ENV, None, problem) from None
    if override is not None:
        trained = (TRAINED_TOKENS_ENV, int(override))
    elif drafter_config is not None:
        trained = trained_tokens(drafter_config)
    if k is None or trained is None:
        if cfg.get("parallel_drafting") and trained is None:
            result.notes.append(
                "drafter's trained token count unknown (no "
                f"{' / '.join(TRAINED_TOKENS_KEYS)} in config.json, {TRAINED_TOKENS_ENV} "
                "unset); K not compared"
            )
        return
    warning = drafter_rules.trained_tokens_warning(k, trained)
    if warning:
        result.warnings.append(f"{SPECULATIVE_ENV}.num_speculative_tokens: {warning}")
