"""A trained P-EAGLE head, written in the format the chosen serving image loads.

Input: the checkpoint speculators' `save_pretrained` writes (config.json with
`speculators_model_type: "peagle"`, model.safetensors named as its `PEagleDraftModel`
names its parameters). Output, by `serving_format` (contract.SERVING_FORMATS):

- `speculators`: the same layout with a portable config (no container-local path). vLLM
  (0.30.0: transformers_utils/configs/speculators/{base,algos}.py) reads it as
  {"method": "eagle3", "parallel_drafting": true}: `mask_token_id` becomes `pard_token`,
  `proposal_methods[0].speculative_tokens` the default K, and
  `eagle_aux_hidden_state_layer_ids` the target layers it taps; its loader
  (model_executor/models/llama_eagle3.py) renames `d2t` to `draft_id_to_target_id`, skips
  `t2d`, and refuses a parallel-drafting head without `mask_hidden`.
- `eagle3-native`: the EAGLE-3 layout AWS's P-EAGLE heads use and vLLM 0.18.0 loads: a
  Llama config with `architectures: ["LlamaForCausalLMEagle3"]`, `ptd_token_id` (the mask
  token), `eagle_config.eagle_aux_hidden_state_layer_ids`; a single decoder layer named
  `midlayer.*`, `mask_hidden` as [1, aux x hidden].

Standard library only (the safetensors container is a JSON header plus raw bytes), so the
driver, the SDK and the tests share it without torch.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Final

from peagle_train.contract import (
    METADATA_FILE,
    METADATA_SCHEMA_VERSION,
    SERVING_FORMATS,
    DrafterMetadata,
    metadata_to_json,
    parse_metadata,
)

CONFIG_FILE: Final = "config.json"
WEIGHTS_FILE: Final = "model.safetensors"
# Tensors a P-EAGLE head must carry for vLLM to serve it with parallel drafting.
REQUIRED_TENSORS: Final = ("fc.weight", "lm_head.weight", "norm.weight", "d2t", "mask_hidden")
# Training-only tensors (the verifier's own head); speculators does not save them either.
TRAINING_ONLY: Final = ("verifier_lm_head.", "verifier_norm.")
PATH_KEYS: Final = ("name_or_path", "_name_or_path")
_DTYPE_BYTES: Final = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "BOOL": 1, "U8": 1}


class ExportError(ValueError):
    """The checkpoint cannot be written in the asked format; str() says why, in one line."""


Tensors = dict[str, tuple[str, list[int], bytes]]


def read_safetensors(path: Path) -> Tensors:
    """name -> (dtype, shape, raw bytes), in file order."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ExportError(f"{path.name}: not a safetensors file (shorter than its header size)")
    (size,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8 : 8 + size])
    except ValueError:
        raise ExportError(f"{path.name}: its safetensors header is not JSON") from None
    base = 8 + size
    out: Tensors = {}
    items = [(k, v) for k, v in header.items() if k != "__metadata__"]
    for name, info in sorted(items, key=lambda kv: kv[1]["data_offsets"][0]):
        start, end = info["data_offsets"]
        out[name] = (info["dtype"], list(info["shape"]), raw[base + start : base + end])
    return out


def write_safetensors(path: Path, tensors: Tensors) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _dtype, _shape, data in tensors.values():
            f.write(data)


def _local_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or "/opt/ml/" in value


def portable_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with every local path gone: a verifier or model `name_or_path` that is a
    path becomes null (vLLM only needs the key: the target is served beside the drafter);
    a Hub id stays. Any other string holding a local path is refused (ExportError)."""

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                here = f"{where}.{key}" if where else str(key)
                if key in PATH_KEYS and isinstance(item, str) and _local_path(item):
                    out[key] = None
                else:
                    out[key] = walk(item, here)
            return out
        if isinstance(value, list):
            return [walk(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, str) and _local_path(value):
            raise ExportError(f"{where}: holds a local path ({value!r}); not portable")
        return value

    result = walk(config, "")
    assert isinstance(result, dict)
    return result


def _checkpoint(checkpoint_dir: Path) -> tuple[dict[str, Any], Tensors]:
    config_path, weights_path = checkpoint_dir / CONFIG_FILE, checkpoint_dir / WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise ExportError(f"{path}: missing from the checkpoint")
    try:
        config = json.loads(config_path.read_text())
    except ValueError:
        raise ExportError(f"{config_path}: not JSON") from None
    if not isinstance(config, dict) or config.get("speculators_model_type") != "peagle":
        raise ExportError(f"{config_path}: speculators_model_type must be 'peagle'")
    if not isinstance(config.get("mask_token_id"), int):
        raise ExportError(f"{config_path}: mask_token_id is required (the parallel-drafting mask)")
    if not config.get("eagle_aux_hidden_state_layer_ids"):
        raise ExportError(f"{config_path}: eagle_aux_hidden_state_layer_ids is required")
    if not isinstance(config.get("transformer_layer_config"), dict):
        raise ExportError(f"{config_path}: transformer_layer_config is required")
    try:
        k = config["speculators_config"]["proposal_methods"][0]["speculative_tokens"]
    except (KeyError, IndexError, TypeError):
        k = None
    if not isinstance(k, int) or k < 1:
        raise ExportError(
            f"{config_path}: speculators_config.proposal_methods[0].speculative_tokens is required"
        )
    tensors = {
        name: t
        for name, t in read_safetensors(weights_path).items()
        if not name.startswith(TRAINING_ONLY)
    }
    missing = [name for name in REQUIRED_TENSORS if name not in tensors]
    if missing:
        raise ExportError(f"{weights_path}: missing tensor {missing[0]}")
    return config, tensors


def num_depths(config: dict[str, Any]) -> int:
    """K a speculators P-EAGLE config was trained for."""
    return int(config["speculators_config"]["proposal_methods"][0]["speculative_tokens"])


def _native(config: dict[str, Any], tensors: Tensors) -> tuple[dict[str, Any], Tensors]:
    """The eagle3-native layout of a speculators P-EAGLE checkpoint."""
    layer = dict(config["transformer_layer_config"])
    if layer.get("num_hidden_layers", 1) != 1:
        raise ExportError(
            "num_layers: the eagle3-native layout holds one decoder layer (midlayer); "
            f"this head has {layer.get('num_hidden_layers')}"
        )
    for key in ("_attn_implementation", "architectures", "transformers_version"):
        layer.pop(key, None)
    native = {
        **layer,
        "architectures": ["LlamaForCausalLMEagle3"],
        "draft_vocab_size": config.get("draft_vocab_size"),
        "target_hidden_size": config.get("target_hidden_size") or layer.get("hidden_size"),
        "norm_before_residual": config.get("norm_before_residual", False),
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": list(config["eagle_aux_hidden_state_layer_ids"]),
            "use_aux_hidden_state": True,
        },
        "ptd_token_id": config["mask_token_id"],
    }
    out: Tensors = {}
    for name, (dtype, shape, data) in tensors.items():
        renamed = (
            "midlayer." + name.removeprefix("layers.0.") if name.startswith("layers.0.") else name
        )
        out[renamed] = (dtype, [1, shape[-1]] if name == "mask_hidden" else shape, data)
    return native, out


def write_drafter(checkpoint_dir: Path, out_dir: Path, *, serving_format: str) -> dict[str, Any]:
    """config.json + model.safetensors of the head in `serving_format`; the written config."""
    if serving_format not in SERVING_FORMATS:
        raise ExportError(
            f"serving_format: one of {', '.join(SERVING_FORMATS)} is required, "
            f"got {serving_format!r}"
        )
    config, tensors = _checkpoint(checkpoint_dir)
    if serving_format == "eagle3-native":
        config, tensors = _native(config, tensors)
    config = portable_config(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_safetensors(out_dir / WEIGHTS_FILE, tensors)
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    return config


def write_metadata(out_dir: Path, metadata: DrafterMetadata) -> None:
    """METADATA_FILE beside the weights (checked by parsing it back before writing)."""
    text = metadata_to_json(metadata)
    parse_metadata(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / METADATA_FILE).write_text(text)


def metadata_for(
    checkpoint_dir: Path,
    *,
    serving_format: str,
    acceptance_per_position: tuple[float, ...],
    mean_accepted_per_step: float,
    held_out_prompts: int,
    data_sha256: str,
    versions: dict[str, str],
) -> DrafterMetadata:
    """The metadata of the head in `checkpoint_dir` (speculators' save), from its config
    and the acceptance vLLM measured (validate.measure_acceptance)."""
    config, _tensors = _checkpoint(checkpoint_dir)
    layer = config["transformer_layer_config"]
    return DrafterMetadata(
        schema_version=METADATA_SCHEMA_VERSION,
        serving_format=serving_format,
        num_depths=num_depths(config),
        num_layers=int(layer.get("num_hidden_layers", 1)),
        mask_token_id=int(config["mask_token_id"]),
        draft_vocab_size=int(config.get("draft_vocab_size") or layer["vocab_size"]),
        target_model_type=str(layer.get("model_type", "")),
        target_hidden_size=int(config.get("target_hidden_size") or layer["hidden_size"]),
        aux_layer_ids=tuple(int(i) for i in config["eagle_aux_hidden_state_layer_ids"]),
        acceptance_per_position=tuple(acceptance_per_position),
        mean_accepted_per_step=mean_accepted_per_step,
        held_out_prompts=held_out_prompts,
        data_sha256=data_sha256,
        versions=dict(versions),
    )
