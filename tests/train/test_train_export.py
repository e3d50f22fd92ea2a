"""peagle_train.export and the drafter metadata file (contract.DrafterMetadata): the
formats a trained P-EAGLE head is written in, a portable config, strict parsing."""

from __future__ import annotations

import array
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from peagle_train import contract
from peagle_train.contract import DrafterMetadata, metadata_to_json, parse_metadata
from peagle_train.export import (
    ExportError,
    metadata_for,
    portable_config,
    read_safetensors,
    write_drafter,
    write_metadata,
    write_safetensors,
)

HIDDEN = 8
AUX = (1, 2, 3)
MASK = 30


def _f32(*shape: int) -> tuple[str, list[int], bytes]:
    n = 1
    for d in shape:
        n *= d
    return "F32", list(shape), array.array("f", [0.5] * n).tobytes()


def speculators_checkpoint(root: Path, *, layers: int = 1, **overrides: Any) -> Path:
    """A checkpoint shaped as speculators 0.9.0's PEagleDraftModel.save_pretrained
    writes it (config keys and tensor names as in a real save, tiny sizes)."""
    root.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "architectures": ["PEagleDraftModel"],
        "draft_vocab_size": 16,
        "eagle_aux_hidden_state_layer_ids": list(AUX),
        "mask_token_id": MASK,
        "norm_before_residual": False,
        "speculators_config": {
            "algorithm": "peagle",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "verifier": {
                "architectures": ["LlamaForCausalLM"],
                "name_or_path": "/opt/ml/input/data/target",
            },
        },
        "speculators_model_type": "peagle",
        "speculators_version": "0.9.0",
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": HIDDEN,
            "num_hidden_layers": layers,
            "vocab_size": 32,
            "_name_or_path": "/tmp/work/target",
        },
    }
    config.update(overrides)
    (root / "config.json").write_text(json.dumps(config))
    tensors = {
        "d2t": ("I64", [16], array.array("q", [0] * 16).tobytes()),
        "embed_tokens.weight": _f32(32, HIDDEN),
        "fc.weight": _f32(HIDDEN, 3 * HIDDEN),
        "layers.0.self_attn.q_proj.weight": _f32(HIDDEN, 2 * HIDDEN),
        "lm_head.weight": _f32(16, HIDDEN),
        "mask_hidden": _f32(1, 1, 3 * HIDDEN),
        "norm.weight": _f32(HIDDEN),
        "t2d": ("BOOL", [32], bytes([1] * 16 + [0] * 16)),
        "verifier_lm_head.weight": _f32(32, HIDDEN),
    }
    write_safetensors(root / "model.safetensors", tensors)
    return root


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_speculators_format_keeps_what_vllm_reads_and_no_local_path(tmp_path: Path) -> None:
    written = write_drafter(
        speculators_checkpoint(tmp_path / "ckpt"), tmp_path / "out", serving_format="speculators"
    )
    on_disk = json.loads((tmp_path / "out" / "config.json").read_text())
    assert on_disk == written
    assert written["speculators_model_type"] == "peagle"
    assert written["mask_token_id"] == MASK
    assert written["eagle_aux_hidden_state_layer_ids"] == list(AUX)
    assert written["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 3
    # vLLM's validator needs the key; a container path must not survive
    assert "name_or_path" in written["speculators_config"]["verifier"]
    assert written["speculators_config"]["verifier"]["name_or_path"] is None
    assert not [s for s in _strings(written) if s.startswith("/")]
    tensors = read_safetensors(tmp_path / "out" / "model.safetensors")
    assert {"d2t", "t2d", "mask_hidden", "fc.weight", "layers.0.self_attn.q_proj.weight"} <= set(
        tensors
    )
    assert "verifier_lm_head.weight" not in tensors  # training only
    assert (
        tensors["fc.weight"]
        == read_safetensors(tmp_path / "ckpt" / "model.safetensors")["fc.weight"]
    )


def test_eagle3_native_layout(tmp_path: Path) -> None:
    written = write_drafter(
        speculators_checkpoint(tmp_path / "ckpt"), tmp_path / "out", serving_format="eagle3-native"
    )
    assert written["architectures"] == ["LlamaForCausalLMEagle3"]
    assert written["ptd_token_id"] == MASK
    assert written["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == list(AUX)
    assert written["draft_vocab_size"] == 16
    assert "speculators_model_type" not in written
    tensors = read_safetensors(tmp_path / "out" / "model.safetensors")
    assert "midlayer.self_attn.q_proj.weight" in tensors
    assert not [n for n in tensors if n.startswith("layers.")]
    assert tensors["mask_hidden"][1] == [1, 3 * HIDDEN]


def test_eagle3_native_refuses_more_than_one_layer(tmp_path: Path) -> None:
    ckpt = speculators_checkpoint(tmp_path / "ckpt", layers=4)
    with pytest.raises(ExportError, match=r"^num_layers: "):
        write_drafter(ckpt, tmp_path / "out", serving_format="eagle3-native")


@pytest.mark.parametrize(
    ("overrides", "drop", "says"),
    [
        ({"speculators_model_type": "eagle3"}, None, "speculators_model_type"),
        ({"mask_token_id": None}, None, "mask_token_id"),
        ({"eagle_aux_hidden_state_layer_ids": []}, None, "eagle_aux_hidden_state_layer_ids"),
        ({"speculators_config": {"proposal_methods": []}}, None, "speculative_tokens"),
        ({}, "mask_hidden", "mask_hidden"),
        ({}, "d2t", "d2t"),
    ],
)
def test_write_drafter_refuses_an_incomplete_checkpoint(
    tmp_path: Path, overrides: dict[str, Any], drop: str | None, says: str
) -> None:
    ckpt = speculators_checkpoint(tmp_path / "ckpt", **overrides)
    if drop:
        tensors = read_safetensors(ckpt / "model.safetensors")
        del tensors[drop]
        write_safetensors(ckpt / "model.safetensors", tensors)
    with pytest.raises(ExportError, match=says) as info:
        write_drafter(ckpt, tmp_path / "out", serving_format="speculators")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_write_drafter_refuses_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"^serving_format: one of speculators, eagle3-native"):
        write_drafter(speculators_checkpoint(tmp_path / "c"), tmp_path / "o", serving_format="gguf")


def test_portable_config_nulls_local_names_keeps_hub_ids_refuses_other_paths() -> None:
    config = {
        "speculators_config": {"verifier": {"name_or_path": "Qwen/Qwen3-8B"}},
        "transformer_layer_config": {"_name_or_path": "./target"},
    }
    out = portable_config(config)
    assert out["speculators_config"]["verifier"]["name_or_path"] == "Qwen/Qwen3-8B"
    assert out["transformer_layer_config"]["_name_or_path"] is None
    assert config["transformer_layer_config"]["_name_or_path"] == "./target"  # not mutated
    with pytest.raises(ExportError, match=r"^tokenizer\.path: holds a local path"):
        portable_config({"tokenizer": {"path": "/opt/ml/input/data/target/tok.json"}})


def metadata(**changes: Any) -> DrafterMetadata:
    base = DrafterMetadata(
        schema_version=contract.METADATA_SCHEMA_VERSION,
        serving_format="speculators",
        num_depths=3,
        num_layers=1,
        mask_token_id=MASK,
        draft_vocab_size=512,
        target_model_type="llama",
        target_hidden_size=128,
        aux_layer_ids=AUX,
        acceptance_per_position=(0.9, 0.8, 0.7),
        mean_accepted_per_step=2.4,
        held_out_prompts=8,
        data_sha256="a" * 64,
        versions={"speculators": "0.9.0", "vllm": "0.30.0"},
    )
    return replace(base, **changes)


def test_metadata_round_trips_through_the_file(tmp_path: Path) -> None:
    m = metadata()
    write_metadata(tmp_path, m)
    assert parse_metadata((tmp_path / contract.METADATA_FILE).read_text()) == m
    assert parse_metadata(metadata_to_json(m)) == m


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"num_depths": 0}, "num_depths"),
        ({"num_depths": "3"}, "num_depths"),
        ({"num_depths": True}, "num_depths"),
        ({"schema_version": 2}, "schema_version"),
        ({"serving_format": "gguf"}, "serving_format"),
        ({"acceptance_per_position": [0.9, 0.8]}, "acceptance_per_position"),
        ({"acceptance_per_position": [0.9, 0.8, 1.5]}, "acceptance_per_position"),
        ({"mean_accepted_per_step": 3.5}, "mean_accepted_per_step"),
        ({"mean_accepted_per_step": None}, "mean_accepted_per_step"),
        ({"aux_layer_ids": []}, "aux_layer_ids"),
        ({"aux_layer_ids": [1, -2]}, "aux_layer_ids"),
        ({"data_sha256": "xyz"}, "data_sha256"),
        ({"versions": {"vllm": 30}}, "versions"),
        ({"target_model_type": ""}, "target_model_type"),
        ({"mask_token_id": -1}, "mask_token_id"),
        ({"extra": 1}, "extra"),
    ],
)
def test_parse_metadata_refuses_bad_input_naming_the_field(
    edit: dict[str, Any], field: str
) -> None:
    doc = json.loads(metadata_to_json(metadata()))
    doc.update(edit)
    with pytest.raises(ValueError, match=f"^{field}: ") as info:
        parse_metadata(json.dumps(doc))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["", "[]", "{", "null"])
def test_parse_metadata_refuses_what_is_not_an_object(text: str) -> None:
    with pytest.raises(ValueError, match=contract.METADATA_FILE):
        parse_metadata(text)


def test_missing_field_is_named() -> None:
    doc = json.loads(metadata_to_json(metadata()))
    del doc["held_out_prompts"]
    with pytest.raises(ValueError, match=r"^held_out_prompts: "):
        parse_metadata(json.dumps(doc))


def test_write_metadata_refuses_what_parse_would(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^acceptance_per_position: "):
        write_metadata(tmp_path, metadata(acceptance_per_position=(0.5,)))
    assert not (tmp_path / contract.METADATA_FILE).exists()


def test_metadata_for_reads_the_checkpoint(tmp_path: Path) -> None:
    m = metadata_for(
        speculators_checkpoint(tmp_path / "ckpt"),
        serving_format="eagle3-native",
        acceptance_per_position=(0.9, 0.6, 0.3),
        mean_accepted_per_step=1.8,
        held_out_prompts=8,
        data_sha256="b" * 64,
        versions={"speculators": "0.9.0"},
    )
    assert (m.num_depths, m.num_layers, m.mask_token_id) == (3, 1, MASK)
    assert (m.draft_vocab_size, m.target_hidden_size, m.target_model_type) == (16, HIDDEN, "llama")
    assert m.aux_layer_ids == AUX and m.serving_format == "eagle3-native"
    assert parse_metadata(metadata_to_json(m)) == m
