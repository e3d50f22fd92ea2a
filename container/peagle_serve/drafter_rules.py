"""The P-EAGLE drafter rules, as pure functions over what a checkpoint declares.

Inputs are a drafter's `config.json` (a dict), its tensors (name -> TensorInfo: dtype
and shape, from the safetensors headers) and, for the hidden-size rule, the target's
`config.json`. No file, network or vLLM access: the container's preflight feeds them
from the local disk, and `peagle doctor` (peagle_deploy.doctor) from ranged S3 reads,
so both apply exactly the same rules. Each rule returns None when satisfied, else one
line naming what is wrong; the caller decides whether it stops or is listed.

Standard library only (the container installs peagle_serve without dependencies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from peagle_serve.safetensors_header import TensorInfo


@dataclass(frozen=True)
class MaskTokenKey:
    """One place in config.json an engine takes the parallel-drafting mask token from.

    `path` is dotted (`dflash_config.mask_token_id`). vLLM takes most keys when they are
    present at all (`hasattr`), but the top-level `mask_token_id` only when it is not
    null (many configs carry `mask_token_id: null`): `none_is_absent` says which.
    """

    path: str
    none_is_absent: bool = False


# The keys vLLM 0.30.0 reads, in its order of precedence (LLMBaseProposer.
# _init_parallel_drafting_params), minus `dspark_noise_token_id`, which no P-EAGLE head
# uses. Older engines read fewer keys: callers that know the engine pass their own
# tuple (see `find_mask_token`).
MASK_TOKEN_KEYS: Final[tuple[MaskTokenKey, ...]] = (
    MaskTokenKey("dflash_config.mask_token_id"),
    MaskTokenKey("mask_token_id", none_is_absent=True),
    MaskTokenKey("pard_token"),
    MaskTokenKey("ptd_token_id"),
)
# Where a drafter's config.json may record how many tokens it was trained to draft.
# There is no P-EAGLE-specific standard key; these are the two that vLLM itself reads
# as a drafter's native token count: the `speculators` format's proposal method
# (vLLM's default K for such checkpoints) and `n_predict` (MTP/Medusa-style heads).
TRAINED_TOKENS_KEYS: Final = (
    "speculators_config.proposal_methods[0].speculative_tokens",
    "n_predict",
)
# Weight files vLLM can load but whose tensors cannot be listed without reading them.
NON_SAFETENSORS_WEIGHT_SUFFIXES: Final = (".bin", ".pt", ".pth")
MASK_HIDDEN: Final = "mask_hidden"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _lookup(config: Mapping[str, Any], path: str) -> tuple[bool, object]:
    node: object = config
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def key_names(keys: Sequence[MaskTokenKey] = MASK_TOKEN_KEYS) -> str:
    """The keys as a comma-separated list, for messages."""
    return ", ".join(k.path for k in keys)


def find_mask_token(
    config: Mapping[str, Any], keys: Sequence[MaskTokenKey] = MASK_TOKEN_KEYS
) -> tuple[str, object] | None:
    """The key and value the engine takes the mask token from, if any (first of `keys`)."""
    for key in keys:
        present, value = _lookup(config, key.path)
        if present and not (key.none_is_absent and value is None):
            return key.path, value
    return None


def mask_token_problem(
    config: Mapping[str, Any],
    config_label: str,
    keys: Sequence[MaskTokenKey] = MASK_TOKEN_KEYS,
) -> str | None:
    """Parallel drafting needs an integer mask-token id under a key the engine reads."""
    found = find_mask_token(config, keys)
    if found is None:
        return (
            f"{config_label} has no mask-token id ({key_names(keys)}); "
            "parallel drafting needs a P-EAGLE head, not a plain EAGLE-3 head"
        )
    key, value = found
    if not _is_int(value) and not (isinstance(value, str) and value.isdigit()):
        return f"{config_label}: {key} must be an integer token id, got {value!r}"
    return None


def has_mrope(config: Mapping[str, Any]) -> bool:
    """An M-RoPE section anywhere vLLM looks (rope params of the config or its text config)."""
    holders: list[Mapping[str, Any]] = [config]
    if isinstance(config.get("text_config"), dict):
        holders.append(config["text_config"])
    for holder in holders:
        if holder.get("mrope_section") is not None:
            return True
        for key in ("rope_scaling", "rope_parameters"):
            rope = holder.get(key)
            if isinstance(rope, dict) and (
                rope.get("mrope_section") is not None or rope.get("xdrope_section") is not None
            ):
                return True
    return False


def mrope_problem(config: Mapping[str, Any], config_label: str) -> str | None:
    """vLLM's parallel drafting refuses M-RoPE drafters."""
    if has_mrope(config):
        return (
            f"{config_label} declares M-RoPE (mrope_section); vLLM's parallel drafting "
            "does not support M-RoPE"
        )
    return None


def drafter_target_hidden_size(config: Mapping[str, Any]) -> int | None:
    """The target hidden size an EAGLE-3 drafter was built for.

    vLLM uses `target_hidden_size`, else the drafter's `hidden_size`; checkpoints in
    the `speculators` format keep the latter in `transformer_layer_config`.
    """
    layer = config.get("transformer_layer_config")
    for value in (
        config.get("target_hidden_size"),
        config.get("hidden_size"),
        layer.get("hidden_size") if isinstance(layer, dict) else None,
    ):
        if _is_int(value):
            return int(value)
    return None


def num_aux_hidden_states(config: Mapping[str, Any]) -> int:
    """How many target hidden states an EAGLE-3 head concatenates (vLLM's rule)."""
    if _is_int(config.get("num_aux_hidden_states")):
        return int(config["num_aux_hidden_states"])
    eagle_config = config.get("eagle_config")
    for holder in (eagle_config if isinstance(eagle_config, dict) else {}, config):
        layer_ids = holder.get("eagle_aux_hidden_state_layer_ids")
        if isinstance(layer_ids, list) and layer_ids:
            return len(layer_ids)
    return 3


def uses_aux_hidden_states(config: Mapping[str, Any]) -> bool:
    eagle_config = config.get("eagle_config")
    if isinstance(eagle_config, dict) and "use_aux_hidden_state" in eagle_config:
        return bool(eagle_config["use_aux_hidden_state"])
    return True


def target_hidden_size(config: Mapping[str, Any]) -> int | None:
    """`hidden_size`, or `text_config.hidden_size` for multimodal targets."""
    if _is_int(config.get("hidden_size")):
        return int(config["hidden_size"])
    text = config.get("text_config")
    if isinstance(text, dict) and _is_int(text.get("hidden_size")):
        return int(text["hidden_size"])
    return None


def mask_hidden_problem(
    tensors: Mapping[str, TensorInfo], config: Mapping[str, Any], weights_label: str
) -> str | None:
    """Parallel drafting needs a `mask_hidden` weight of target_hidden x aux-states values."""
    matches = [t for name, t in tensors.items() if MASK_HIDDEN in name]
    if not matches:
        return (
            f"drafter weights in {weights_label} have no {MASK_HIDDEN} tensor; parallel "
            "drafting needs a P-EAGLE head"
        )
    hidden = drafter_target_hidden_size(config)
    if hidden is None or not uses_aux_hidden_states(config):
        return None
    aux = num_aux_hidden_states(config)
    expected = hidden * aux
    tensor = matches[0]
    if tensor.numel != expected:
        file_name = tensor.file.replace("\\", "/").rsplit("/", 1)[-1]
        return (
            f"{MASK_HIDDEN} in {file_name} has shape {list(tensor.shape)}, "
            f"expected {expected} values ([1, {aux} x {hidden}])"
        )
    return None


def hidden_size_problem(
    drafter_config: Mapping[str, Any],
    target_config: Mapping[str, Any],
    drafter_label: str,
    target_label: str,
) -> str | None:
    """The drafter must be built for the target's hidden size (else: wrong drafter)."""
    have = drafter_target_hidden_size(drafter_config)
    want = target_hidden_size(target_config)
    if have is None or want is None or have == want:
        return None
    return (
        f"drafter {drafter_label} was built for hidden size {have} but the target "
        f"model ({target_label}) has hidden size {want}: wrong drafter for this model"
    )


def trained_tokens(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """Where (TRAINED_TOKENS_KEYS) and how many tokens the drafter was trained for."""
    speculators = config.get("speculators_config")
    if isinstance(speculators, dict):
        methods = speculators.get("proposal_methods")
        if isinstance(methods, list) and methods and isinstance(methods[0], dict):
            value = methods[0].get("speculative_tokens")
            if _is_int(value) and value > 0:
                return TRAINED_TOKENS_KEYS[0], int(value)
    value = config.get("n_predict")
    if _is_int(value) and value > 0:
        return TRAINED_TOKENS_KEYS[1], int(value)
    return None


def trained_tokens_warning(k: int | None, trained: tuple[str, int] | None) -> str | None:
    """K above the count the drafter was trained for (a warning, not a refusal)."""
    if k is None or trained is None:
        return None
    where, count = trained
    if k <= count:
        return None
    return (
        f"K={k} is above the {count} tokens the drafter was trained for ({where}); "
        f"positions past {count} rarely get accepted"
    )
