"""Helpers for the container tests: a synthetic P-EAGLE drafter and target model.

The drafter is written with a minimal safetensors writer (no torch): the preflight
reads only the header, so zero-filled data is enough, and the contract test checks
that the real `safetensors` library reads the same file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peagle_local.emulator.world import safetensors_bytes

HIDDEN = 64


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """A valid safetensors file whose tensors (name -> (dtype, shape)) are all zeros."""
    path.write_bytes(safetensors_bytes(tensors))


def drafter_config(hidden: int = HIDDEN, **extra: Any) -> dict[str, Any]:
    """config.json of a tiny EAGLE-3 / P-EAGLE head in vLLM's LlamaForCausalLMEagle3 shape."""
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 256,
        "draft_vocab_size": 128,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "target_hidden_size": hidden,
        "mask_token_id": 255,
        "torch_dtype": "bfloat16",
    }
    cfg.update(extra)
    return {k: v for k, v in cfg.items() if v is not None}


def drafter_tensors(
    hidden: int = HIDDEN, mask_hidden: bool = True, aux: int = 3
) -> dict[str, tuple[str, tuple[int, ...]]]:
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {
        "midlayer.self_attn.q_proj.weight": ("BF16", (hidden, 2 * hidden)),
        "fc.weight": ("BF16", (hidden, aux * hidden)),
        "d2t": ("I64", (128,)),
    }
    if mask_hidden:
        tensors["mask_hidden"] = ("BF16", (1, aux * hidden))
    return tensors


MakeDrafter = Callable[..., Path]


def target_config(hidden: int = HIDDEN) -> dict[str, Any]:
    """config.json of a tiny Llama target that vLLM's ModelConfig accepts offline."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "vocab_size": 256,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }


def write_target(path: Path, hidden: int = HIDDEN) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(target_config(hidden)))
    return path


def write_drafter(
    path: Path,
    config: dict[str, Any] | None = None,
    tensors: dict[str, tuple[str, tuple[int, ...]]] | None = None,
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(
        json.dumps(config if config is not None else drafter_config())
    )
    write_safetensors(
        path / "model.safetensors", tensors if tensors is not None else drafter_tensors()
    )
    return path
