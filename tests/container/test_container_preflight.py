"""Every preflight rule, passing and failing, driven by a synthetic drafter on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from container_helpers import HIDDEN, MakeDrafter, drafter_config, drafter_tensors
from peagle_serve.entrypoint import prepare
from peagle_serve.preflight import (
    KNOWN_SPECULATIVE_FIELDS,
    PreflightError,
    PreflightResult,
    num_aux_hidden_states,
    trained_tokens,
)

SPECULATIVE_ENV = "SM_VLLM_SPECULATIVE_CONFIG"


def run(
    target: Path, speculative: dict[str, Any] | str | None, **extra: str
) -> tuple[list[str], PreflightResult]:
    env = {"SM_VLLM_MODEL": str(target), **extra}
    if speculative is not None:
        env[SPECULATIVE_ENV] = (
            speculative if isinstance(speculative, str) else json.dumps(speculative)
        )
    return prepare(env)


def fails(target: Path, speculative: dict[str, Any] | str | None, **extra: str) -> PreflightError:
    with pytest.raises(PreflightError) as e:
        run(target, speculative, **extra)
    message = str(e.value)
    assert "\n" not in message
    return e.value


def p_eagle(drafter: Path, **fields: Any) -> dict[str, Any]:
    speculative: dict[str, Any] = {
        "model": str(drafter),
        "method": "eagle3",
        "num_speculative_tokens": 7,
        "parallel_drafting": True,
    }
    speculative.update(fields)
    return {k: v for k, v in speculative.items() if v is not None}


def speculative_config_arg(argv: list[str]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(argv[argv.index("--speculative-config") + 1])
    return value


# --- the good path ------------------------------------------------------------------


def test_good_p_eagle_setup_passes(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    argv, result = run(target_dir, p_eagle(drafter))
    assert speculative_config_arg(argv) == p_eagle(drafter)
    assert result.warnings == []
    assert result.env_updates == {"VLLM_USE_V2_MODEL_RUNNER": "0"}


def test_no_speculative_config_passes_without_checks(target_dir: Path) -> None:
    argv, result = run(target_dir, None)
    assert "--speculative-config" not in argv
    assert result.speculative is None and result.env_updates == {}


# --- rule 1: one JSON object ----------------------------------------------------------


@pytest.mark.parametrize("raw", ["{model: x}", "", "true", '["a"]', '{"a": 1} {"b": 2}', "7"])
def test_speculative_config_must_be_one_json_object(target_dir: Path, raw: str) -> None:
    err = fails(target_dir, raw)
    assert err.variable == SPECULATIVE_ENV and err.field_name is None


# --- rule 2: field names ---------------------------------------------------------------


def test_unknown_field_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), num_spec_tokens=3))
    assert err.field_name == "num_spec_tokens"
    assert "unknown field" in err.problem


def test_engine_filled_field_is_unknown(make_drafter: MakeDrafter, target_dir: Path) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), target_model_config={}))
    assert err.field_name == "target_model_config"


def test_tensor_parallel_size_asks_for_draft_tensor_parallel_size(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), tensor_parallel_size=1))
    assert err.field_name == "tensor_parallel_size"
    assert "draft_tensor_parallel_size" in err.problem


def test_every_known_field_name_passes_the_name_check(target_dir: Path) -> None:
    # values are checked separately; here only that no known name is refused as unknown
    for name in sorted(KNOWN_SPECULATIVE_FIELDS):
        try:
            run(target_dir, {"method": "ngram", "num_speculative_tokens": 3, name: None})
        except PreflightError as e:
            assert "unknown field" not in e.problem, name


# --- rule 3: field values -----------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True, None])
def test_bad_k_fails(make_drafter: MakeDrafter, target_dir: Path, k: object) -> None:
    err = fails(target_dir, {**p_eagle(make_drafter()), "num_speculative_tokens": k})
    assert err.field_name == "num_speculative_tokens"


@pytest.mark.parametrize("k", [1, 3, 7, 11])
def test_good_k_passes(make_drafter: MakeDrafter, target_dir: Path, k: int) -> None:
    argv, _ = run(target_dir, p_eagle(make_drafter(), num_speculative_tokens=k))
    assert speculative_config_arg(argv)["num_speculative_tokens"] == k


def test_missing_k_fails_unless_the_drafter_gives_one(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), num_speculative_tokens=None))
    assert err.field_name == "num_speculative_tokens"
    with_default = make_drafter(config=drafter_config(n_predict=5))
    run(target_dir, p_eagle(with_default, num_speculative_tokens=None))


@pytest.mark.parametrize("method", ["p-eagle", "EAGLE3", "eagle-3", ""])
def test_unknown_method_fails(make_drafter: MakeDrafter, target_dir: Path, method: str) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), method=method))
    assert err.field_name == "method"
    assert "eagle3" in err.problem


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("parallel_drafting", "true"),
        ("disable_padded_drafter_batch", 0),
        ("draft_tensor_parallel_size", 0),
        ("max_model_len", -5),
        ("model", ""),
        ("num_speculative_tokens_per_batch_size", [[1, 8]]),
        ("num_speculative_tokens_per_batch_size", [[8, 1, 3]]),
        ("num_speculative_tokens_per_batch_size", [[0, 8, 3]]),
        ("num_speculative_tokens_per_batch_size", [[1, 8, -1]]),
        ("num_speculative_tokens_per_batch_size", [[2, 8, 3]]),
        ("num_speculative_tokens_per_batch_size", [[1, 8, 3], [5, 9, 2]]),
        ("num_speculative_tokens_per_batch_size", []),
    ],
)
def test_bad_field_values_fail(
    make_drafter: MakeDrafter, target_dir: Path, name: str, value: object
) -> None:
    err = fails(target_dir, {**p_eagle(make_drafter()), name: value})
    assert err.field_name == name


def test_good_field_values_pass(make_drafter: MakeDrafter, target_dir: Path) -> None:
    speculative = p_eagle(
        make_drafter(),
        draft_tensor_parallel_size=1,
        max_model_len=8192,
        disable_padded_drafter_batch=False,
        num_speculative_tokens_per_batch_size=[[1, 4, 7], [5, 64, 3], [65, 256, 0]],
    )
    argv, _ = run(target_dir, speculative)
    assert speculative_config_arg(argv) == speculative


# --- rule 4: method with parallel drafting ----------------------------------------------


def test_missing_method_is_set_to_eagle3_and_logged(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    argv, result = run(target_dir, p_eagle(make_drafter(), method=None))
    assert speculative_config_arg(argv)["method"] == "eagle3"
    assert any("method" in n and "eagle3" in n for n in result.notes)


@pytest.mark.parametrize("method", ["eagle", "draft_model", "mtp", "dflash"])
def test_parallel_drafting_with_another_method_fails(
    make_drafter: MakeDrafter, target_dir: Path, method: str
) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), method=method))
    assert err.field_name == "method"


def test_raw_value_kept_verbatim_when_nothing_changes(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    raw = json.dumps(p_eagle(make_drafter()), indent=1)
    argv, _ = run(target_dir, raw)
    assert argv[argv.index("--speculative-config") + 1] == raw


# --- rule 5: padded drafter batch -------------------------------------------------------


def test_disable_padded_drafter_batch_with_parallel_drafting_fails(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    err = fails(target_dir, p_eagle(make_drafter(), disable_padded_drafter_batch=True))
    assert err.field_name == "disable_padded_drafter_batch"


def test_disable_padded_drafter_batch_without_parallel_drafting_passes(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    drafter = make_drafter()
    run(target_dir, p_eagle(drafter, parallel_drafting=False, disable_padded_drafter_batch=True))


# --- rule 6: the V2 model runner ------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "0", "false"])
def test_v2_runner_is_turned_off_for_parallel_drafting(
    make_drafter: MakeDrafter, target_dir: Path, value: str | None
) -> None:
    extra = {} if value is None else {"VLLM_USE_V2_MODEL_RUNNER": value}
    _, result = run(target_dir, p_eagle(make_drafter()), **extra)
    assert result.env_updates["VLLM_USE_V2_MODEL_RUNNER"] == "0"


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_v2_runner_forced_on_fails(make_drafter: MakeDrafter, target_dir: Path, value: str) -> None:
    err = fails(target_dir, p_eagle(make_drafter()), VLLM_USE_V2_MODEL_RUNNER=value)
    assert err.variable == "VLLM_USE_V2_MODEL_RUNNER"


def test_v2_runner_untouched_without_parallel_drafting(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    _, result = run(target_dir, p_eagle(make_drafter(), parallel_drafting=None))
    assert "VLLM_USE_V2_MODEL_RUNNER" not in result.env_updates


# --- rule 7: drafter directory ----------------------------------------------------------------


def test_missing_drafter_directory_fails(tmp_path: Path, target_dir: Path) -> None:
    err = fails(target_dir, p_eagle(tmp_path / "absent"))
    assert err.field_name == "model" and "does not exist" in err.problem


def test_empty_drafter_directory_fails(tmp_path: Path, target_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    err = fails(target_dir, p_eagle(tmp_path / "empty"))
    assert err.field_name == "model" and "empty" in err.problem


def test_drafter_path_that_is_a_file_fails(tmp_path: Path, target_dir: Path) -> None:
    (tmp_path / "f").write_text("x")
    err = fails(target_dir, p_eagle(tmp_path / "f"))
    assert err.field_name == "model"


def test_eagle_method_without_model_fails(target_dir: Path) -> None:
    err = fails(target_dir, {"method": "eagle3", "num_speculative_tokens": 3})
    assert err.field_name == "model"


def test_drafter_without_config_json_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    (drafter / "config.json").unlink()
    err = fails(target_dir, p_eagle(drafter))
    assert err.field_name == "model" and "config.json" in err.problem


def test_drafter_one_level_down_gets_a_hint(
    make_drafter: MakeDrafter, target_dir: Path, tmp_path: Path
) -> None:
    drafter = make_drafter()
    channel = tmp_path / "channel"
    channel.mkdir()
    drafter.rename(channel / "gpt-oss-20b-p-eagle")
    err = fails(target_dir, p_eagle(channel))
    assert "point model at" in err.problem and "gpt-oss-20b-p-eagle" in err.problem
    run(target_dir, p_eagle(channel / "gpt-oss-20b-p-eagle"))


def test_os_errors_become_one_line(
    make_drafter: MakeDrafter, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peagle_serve import preflight

    def boom(path: str) -> dict[str, object]:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(preflight, "checkpoint_tensors", boom)
    err = fails(target_dir, p_eagle(make_drafter()))
    assert err.field_name == "model" and "Permission denied" in err.problem


def test_hub_drafter_skips_file_checks(target_dir: Path) -> None:
    _, result = run(target_dir, p_eagle("amazon/GPT-OSS-20B-P-EAGLE"))  # type: ignore[arg-type]
    assert any("not a local path" in n for n in result.notes)


def test_ngram_needs_no_drafter(target_dir: Path) -> None:
    argv, _ = run(target_dir, {"method": "ngram", "num_speculative_tokens": 3})
    assert speculative_config_arg(argv)["method"] == "ngram"


# --- rule 8: mask-token id ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"mask_token_id": 255},
        {"mask_token_id": None, "ptd_token_id": 200},
        {"mask_token_id": None, "pard_token": 200},
        {"mask_token_id": None, "dflash_config": {"mask_token_id": 3}},
    ],
)
def test_mask_token_id_keys_pass(
    make_drafter: MakeDrafter, target_dir: Path, extra: dict[str, Any]
) -> None:
    run(target_dir, p_eagle(make_drafter(config=drafter_config(**extra))))


def test_missing_mask_token_id_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(config=drafter_config(mask_token_id=None))
    err = fails(target_dir, p_eagle(drafter))
    assert err.field_name == "model"
    assert "mask_token_id" in err.problem and "ptd_token_id" in err.problem


def test_non_integer_mask_token_id_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(config=drafter_config(mask_token_id="<mask>"))
    assert fails(target_dir, p_eagle(drafter)).field_name == "model"


def test_plain_eagle3_head_is_fine_without_parallel_drafting(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    plain = make_drafter(
        config=drafter_config(mask_token_id=None), tensors=drafter_tensors(mask_hidden=False)
    )
    run(target_dir, p_eagle(plain, parallel_drafting=False))


def test_mrope_drafter_with_parallel_drafting_fails(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    drafter = make_drafter(
        config=drafter_config(rope_scaling={"rope_type": "default", "mrope_section": [8, 12, 12]})
    )
    err = fails(target_dir, p_eagle(drafter))
    assert "M-RoPE" in err.problem


# --- rule 9: mask_hidden weight -------------------------------------------------------------------


def test_missing_mask_hidden_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(tensors=drafter_tensors(mask_hidden=False))
    err = fails(target_dir, p_eagle(drafter))
    assert err.field_name == "model" and "mask_hidden" in err.problem


def test_mask_hidden_in_a_shard_passes(make_drafter: MakeDrafter, target_dir: Path) -> None:
    run(target_dir, p_eagle(make_drafter(sharded=True)))


def test_missing_mask_hidden_in_sharded_checkpoint_fails(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    drafter = make_drafter(tensors=drafter_tensors(mask_hidden=False), sharded=True)
    assert "mask_hidden" in fails(target_dir, p_eagle(drafter)).problem


def test_shard_named_by_index_but_missing_fails(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    drafter = make_drafter(sharded=True)
    (drafter / "model-00002-of-00002.safetensors").unlink()
    err = fails(target_dir, p_eagle(drafter))
    assert "missing" in err.problem


def test_prefixed_mask_hidden_name_passes(make_drafter: MakeDrafter, target_dir: Path) -> None:
    tensors = drafter_tensors(mask_hidden=False)
    tensors["model.mask_hidden"] = ("BF16", (1, 3 * HIDDEN))
    run(target_dir, p_eagle(make_drafter(tensors=tensors)))


def test_mask_hidden_of_the_wrong_size_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    tensors = drafter_tensors()
    tensors["mask_hidden"] = ("BF16", (1, HIDDEN))  # an EAGLE-1 sized vector
    err = fails(target_dir, p_eagle(make_drafter(tensors=tensors)))
    assert "mask_hidden" in err.problem and str(3 * HIDDEN) in err.problem


def test_mask_hidden_size_follows_aux_layer_count(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    cfg = drafter_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]})
    assert num_aux_hidden_states(cfg) == 4
    good = make_drafter(config=cfg, tensors=drafter_tensors(aux=4))
    run(target_dir, p_eagle(good))
    bad = make_drafter(config=cfg, tensors=drafter_tensors(aux=3))
    assert "mask_hidden" in fails(target_dir, p_eagle(bad)).problem


def test_corrupt_safetensors_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    (drafter / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    err = fails(target_dir, p_eagle(drafter))
    assert err.field_name == "model" and "weights" in err.problem


def test_drafter_without_weights_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    (drafter / "model.safetensors").unlink()
    assert "no weights" in fails(target_dir, p_eagle(drafter)).problem


def test_pytorch_bin_weights_warn_instead(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter()
    (drafter / "model.safetensors").unlink()
    (drafter / "pytorch_model.bin").write_bytes(b"\0")
    _, result = run(target_dir, p_eagle(drafter))
    assert any("mask_hidden not checked" in w for w in result.warnings)


# --- rule 10: hidden size ---------------------------------------------------------------------


def test_hidden_size_mismatch_fails(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(config=drafter_config(hidden=2880), tensors=drafter_tensors(hidden=2880))
    err = fails(target_dir, p_eagle(drafter))
    assert err.field_name == "model"
    assert "2880" in err.problem and str(HIDDEN) in err.problem


def test_hidden_size_from_text_config_passes(make_drafter: MakeDrafter, tmp_path: Path) -> None:
    vlm = tmp_path / "vlm"
    vlm.mkdir()
    (vlm / "config.json").write_text(json.dumps({"text_config": {"hidden_size": HIDDEN}}))
    run(vlm, p_eagle(make_drafter()))
    (vlm / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 5376}}))
    assert "5376" in fails(vlm, p_eagle(make_drafter())).problem


def test_target_hidden_size_key_wins_over_drafter_hidden_size(
    make_drafter: MakeDrafter, target_dir: Path
) -> None:
    # a drafter narrower than its target: vLLM projects target_hidden_size -> hidden_size
    cfg = drafter_config(hidden=32, target_hidden_size=HIDDEN)
    tensors = drafter_tensors(hidden=32)
    tensors["mask_hidden"] = ("BF16", (1, 3 * HIDDEN))
    run(target_dir, p_eagle(make_drafter(config=cfg, tensors=tensors)))


def test_speculators_format_hidden_size(make_drafter: MakeDrafter, target_dir: Path) -> None:
    cfg = {
        "speculators_model_type": "peagle",
        "mask_token_id": 255,
        "transformer_layer_config": {"model_type": "llama", "hidden_size": 4096},
        "speculators_config": {"proposal_methods": [{"speculative_tokens": 8}]},
    }
    drafter = make_drafter(config=cfg, tensors=drafter_tensors(hidden=4096))
    assert "4096" in fails(target_dir, p_eagle(drafter)).problem


def test_target_from_hub_skips_the_hidden_size_check(make_drafter: MakeDrafter) -> None:
    env = {
        "HF_MODEL_ID": "openai/gpt-oss-20b",
        "PEAGLE_MODEL_DIR": "/nonexistent",
        SPECULATIVE_ENV: json.dumps(p_eagle(make_drafter())),
    }
    _, result = prepare(env)
    assert any("hidden size not compared" in n for n in result.notes)


# --- rule 11: K above the trained count (a warning) --------------------------------------------


def test_k_above_trained_count_warns(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(config=drafter_config(n_predict=5))
    argv, result = run(target_dir, p_eagle(drafter, num_speculative_tokens=7))
    assert argv  # a warning, not an error
    assert len(result.warnings) == 1 and "K=7" in result.warnings[0]
    assert "n_predict" in result.warnings[0]


def test_k_within_trained_count_does_not_warn(make_drafter: MakeDrafter, target_dir: Path) -> None:
    drafter = make_drafter(config=drafter_config(n_predict=10))
    _, result = run(target_dir, p_eagle(drafter, num_speculative_tokens=7))
    assert result.warnings == []


def test_trained_count_from_speculators_config(make_drafter: MakeDrafter, target_dir: Path) -> None:
    cfg = drafter_config(speculators_config={"proposal_methods": [{"speculative_tokens": 3}]})
    assert trained_tokens(cfg) == ("speculators_config.proposal_methods[0].speculative_tokens", 3)
    _, result = run(target_dir, p_eagle(make_drafter(config=cfg), num_speculative_tokens=7))
    assert "speculative_tokens" in result.warnings[0]


def test_trained_count_from_env_and_schedule(make_drafter: MakeDrafter, target_dir: Path) -> None:
    speculative = p_eagle(
        make_drafter(),
        num_speculative_tokens=11,
        num_speculative_tokens_per_batch_size=[[1, 4, 11], [5, 64, 3]],
    )
    _, result = run(target_dir, speculative, PEAGLE_DRAFTER_TRAINED_TOKENS="10")
    assert "K=11" in result.warnings[0] and "PEAGLE_DRAFTER_TRAINED_TOKENS" in result.warnings[0]
    _, ok = run(target_dir, speculative, PEAGLE_DRAFTER_TRAINED_TOKENS="11")
    assert ok.warnings == []
    err = fails(target_dir, speculative, PEAGLE_DRAFTER_TRAINED_TOKENS="ten")
    assert err.variable == "PEAGLE_DRAFTER_TRAINED_TOKENS"


def test_unknown_trained_count_is_noted(make_drafter: MakeDrafter, target_dir: Path) -> None:
    _, result = run(target_dir, p_eagle(make_drafter()))
    assert any("trained token count unknown" in n for n in result.notes)


# --- the preflight reads headers only -------------------------------------------------------


def test_preflight_reads_only_the_header(make_drafter: MakeDrafter, target_dir: Path) -> None:
    """A drafter whose data section is cut off still passes: no tensor bytes are read."""
    drafter = make_drafter(tensors={**drafter_tensors(), "big": ("F32", (4096, 4096))})
    weights = drafter / "model.safetensors"
    size = os.path.getsize(weights)
    with open(weights, "r+b") as f:
        f.truncate(size - 60 * 1024 * 1024)
    run(target_dir, p_eagle(drafter))


# --- hostile JSON: every document is read through strict_json -----------------------

DEEP = '{"a":' * 5000 + "1" + "}" * 5000


def _hostile_header(path: Path, header: bytes) -> None:
    import struct

    path.write_bytes(struct.pack("<Q", len(header)) + header)


@pytest.mark.parametrize(
    ("where", "content", "problem"),
    [
        ("speculative", DEEP, "nested too deeply (more than 64 levels"),
        ("speculative", '{"model": "/d", "model": "/e"}', "duplicate key 'model'"),
        ("speculative", '{"num_speculative_tokens": NaN}', "NaN is not a JSON number"),
        ("speculative", "[" * 100_000, "the limit is 64.0 KiB"),
        ("config", DEEP.encode(), "nested too deeply (more than 64 levels"),
        ("config", b'{"mask_token_id": 1, "mask_token_id": 2}', "duplicate key"),
        ("config", b'{"hidden_size": Infinity}', "Infinity is not a JSON number"),
        ("config", b'{"a": "\xc3\x28"}', "not valid UTF-8 (byte 0xc3 at offset 7)"),
        ("config", b'\xef\xbb\xbf{"a": 1}', "byte-order mark"),
        ("header", DEEP.encode(), "nested too deeply (more than 64 levels"),
        ("header", b'{"w": {"shape": [1]}, "w": {"shape": [2]}}', "duplicate key 'w'"),
        ("header", b'{"w": "\xff"}', "not valid UTF-8"),
        ("index", DEEP.encode(), "nested too deeply (more than 64 levels"),
        ("index", b'{"weight_map": {}, "weight_map": {}}', "duplicate key 'weight_map'"),
        ("target", DEEP.encode(), "nested too deeply (more than 64 levels"),
    ],
)
def test_hostile_json_is_one_line_naming_the_variable(
    make_drafter: MakeDrafter,
    target_dir: Path,
    where: str,
    content: str | bytes,
    problem: str,
) -> None:
    drafter = make_drafter()
    speculative: dict[str, Any] | str = p_eagle(drafter)
    if where == "speculative":
        assert isinstance(content, str)
        speculative = content
    elif where == "config":
        assert isinstance(content, bytes)
        (drafter / "config.json").write_bytes(content)
    elif where == "header":
        assert isinstance(content, bytes)
        _hostile_header(drafter / "model.safetensors", content)
    elif where == "index":
        assert isinstance(content, bytes)
        (drafter / "model.safetensors.index.json").write_bytes(content)
    else:
        assert isinstance(content, bytes)
        (target_dir / "config.json").write_bytes(content)
    error = fails(target_dir, speculative)
    assert problem in str(error)
    expected_variable = "SM_VLLM_MODEL" if where == "target" else SPECULATIVE_ENV
    assert error.variable == expected_variable
