"""The pure P-EAGLE drafter rules shared by the container's preflight and `peagle doctor`."""

from __future__ import annotations

import json
import struct

import pytest
from container_helpers import HIDDEN, drafter_config, target_config
from peagle_serve import drafter_rules as rules
from peagle_serve.safetensors_header import (
    SafetensorsError,
    TensorInfo,
    header_length,
    index_shards,
    parse_header,
)

# What vLLM 0.16/0.18 read (FACTS: only pard_token / ptd_token_id): an engine-aware
# caller passes such a tuple instead of the default.
OLD_ENGINE_KEYS = (rules.MaskTokenKey("pard_token"), rules.MaskTokenKey("ptd_token_id"))


def tensors(**shapes: tuple[int, ...]) -> dict[str, TensorInfo]:
    return {
        n: TensorInfo(n, "BF16", s, "s3://b/drafter/model.safetensors") for n, s in shapes.items()
    }


def test_default_keys_follow_vllms_order() -> None:
    assert rules.find_mask_token({"mask_token_id": 6, "pard_token": 4}) == ("mask_token_id", 6)
    assert rules.find_mask_token({"mask_token_id": None, "pard_token": 4}) == ("pard_token", 4)
    assert rules.find_mask_token({"mask_token_id": 6, "dflash_config": {"mask_token_id": 7}}) == (
        "dflash_config.mask_token_id",
        7,
    )
    assert rules.find_mask_token({"mask_token_id": None}) is None


def test_accepted_keys_can_be_passed_in() -> None:
    config = {"mask_token_id": 255}
    assert rules.mask_token_problem(config, "config.json") is None
    problem = rules.mask_token_problem(config, "s3://b/d/config.json", OLD_ENGINE_KEYS)
    assert problem is not None
    assert problem.startswith(
        "s3://b/d/config.json has no mask-token id (pard_token, ptd_token_id)"
    )
    assert rules.mask_token_problem({"ptd_token_id": 201020}, "c", OLD_ENGINE_KEYS) is None


def test_mask_token_must_be_an_integer() -> None:
    problem = rules.mask_token_problem({"ptd_token_id": "<mask>"}, "c.json")
    assert problem == "c.json: ptd_token_id must be an integer token id, got '<mask>'"


def test_mrope_rule() -> None:
    assert rules.mrope_problem(drafter_config(), "c") is None
    assert "M-RoPE" in str(rules.mrope_problem({"rope_scaling": {"mrope_section": [1]}}, "c"))


def test_mask_hidden_rule() -> None:
    cfg = drafter_config()
    assert rules.mask_hidden_problem(tensors(mask_hidden=(1, 3 * HIDDEN)), cfg, "w") is None
    missing = rules.mask_hidden_problem(tensors(fc=(HIDDEN, 3 * HIDDEN)), cfg, "s3://b/d/")
    assert missing is not None and "s3://b/d/ have no mask_hidden" in missing
    wrong = rules.mask_hidden_problem(tensors(mask_hidden=(1, HIDDEN)), cfg, "w")
    assert wrong == (
        f"mask_hidden in model.safetensors has shape [1, {HIDDEN}], expected {3 * HIDDEN} "
        f"values ([1, 3 x {HIDDEN}])"
    )


def test_hidden_size_rule() -> None:
    assert rules.hidden_size_problem(drafter_config(), target_config(), "d", "t") is None
    problem = rules.hidden_size_problem(drafter_config(), target_config(2 * HIDDEN), "d", "t")
    assert problem is not None and "wrong drafter for this model" in problem
    # unknown on either side: nothing to compare
    assert rules.hidden_size_problem({}, target_config(), "d", "t") is None


def test_trained_tokens_warning() -> None:
    assert rules.trained_tokens_warning(7, ("n_predict", 10)) is None
    assert rules.trained_tokens_warning(None, ("n_predict", 10)) is None
    warning = rules.trained_tokens_warning(11, ("n_predict", 10))
    assert warning is not None and warning.startswith("K=11 is above the 10 tokens")


def test_header_parsed_from_bytes_alone() -> None:
    header = json.dumps(
        {"mask_hidden": {"dtype": "BF16", "shape": [1, 12], "data_offsets": [0, 24]}}
    )
    raw = struct.pack("<Q", len(header)) + header.encode()
    n = header_length(raw[:8], "s3://b/k")
    parsed = parse_header(raw[8 : 8 + n], n, "s3://b/k")
    assert parsed["mask_hidden"].shape == (1, 12) and parsed["mask_hidden"].file == "s3://b/k"
    with pytest.raises(SafetensorsError, match="truncated"):
        parse_header(raw[8:12], n, "s3://b/k")
    with pytest.raises(SafetensorsError, match="implausible"):
        header_length(struct.pack("<Q", 0), "s3://b/k")


def test_index_shards() -> None:
    index = {"weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors", "c": "m-1.safetensors"}}
    assert index_shards(index, "i") == ["m-1.safetensors", "m-2.safetensors"]
    with pytest.raises(SafetensorsError, match="no weight_map"):
        index_shards({"metadata": {}}, "i")
