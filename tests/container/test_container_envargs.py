"""The SM_VLLM_* -> `vllm serve` argv table (docs/container.md: the AWS vLLM images' semantics)."""

from __future__ import annotations

from pathlib import Path

import pytest
from peagle_serve import contract
from peagle_serve.envargs import (
    SINGLE_TOKEN_ARRAY_FLAGS,
    ArgvError,
    build_argv,
    flag_name,
    resolve_model,
    value_tokens,
)

BASE = ["vllm", "serve", "--model", "m", "--port", "8080"]


def argv(**env: str) -> list[str]:
    return build_argv({"SM_VLLM_MODEL": "m", "PEAGLE_MODEL_DIR": "/nonexistent", **env})


def test_flag_names() -> None:
    assert flag_name("SM_VLLM_MAX_MODEL_LEN") == "--max-model-len"
    assert flag_name("SM_VLLM_Tensor_Parallel_Size") == "--tensor-parallel-size"


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE", " true "])
def test_true_in_any_case_is_a_bare_flag(value: str) -> None:
    assert argv(SM_VLLM_ENFORCE_EAGER=value) == [*BASE, "--enforce-eager"]


@pytest.mark.parametrize("value", ["false", "FALSE", "False", " false"])
def test_false_in_any_case_omits_the_flag(value: str) -> None:
    assert argv(SM_VLLM_ENFORCE_EAGER=value) == BASE


def test_empty_value_is_a_bare_flag() -> None:
    assert argv(SM_VLLM_TRUST_REMOTE_CODE="") == [*BASE, "--trust-remote-code"]


@pytest.mark.parametrize(
    ("value", "tokens"),
    [
        ("8192", ["8192"]),
        ("0.92", ["0.92"]),
        ("auto", ["auto"]),
        ("openai/gpt-oss-20b", ["openai/gpt-oss-20b"]),
        ("a b", ["a b"]),  # one token even with a space
        ("[not json", ["[not json"]),
        ("{not json}", ["{not json}"]),
        ('"quoted"', ['"quoted"']),
    ],
)
def test_scalars_pass_as_is(value: str, tokens: list[str]) -> None:
    assert argv(SM_VLLM_MAX_MODEL_LEN=value) == [*BASE, "--max-model-len", *tokens]


def test_json_array_is_one_token_per_element() -> None:
    assert argv(SM_VLLM_API_KEY='["k1", "k2"]') == [*BASE, "--api-key", "k1", "k2"]


def test_json_array_non_string_elements_become_json() -> None:
    assert argv(SM_VLLM_CUDA_GRAPH_SIZES="[1, 2, 4.5, true]") == [
        *BASE,
        "--cuda-graph-sizes",
        "1",
        "2",
        "4.5",
        "true",
    ]


@pytest.mark.parametrize("flag", sorted(SINGLE_TOKEN_ARRAY_FLAGS))
def test_single_token_array_flags_keep_the_array_whole(flag: str) -> None:
    variable = "SM_VLLM_" + flag[2:].upper().replace("-", "_")
    assert argv(**{variable: '["a", "b"]'}) == [*BASE, flag, '["a", "b"]']


def test_the_four_single_token_flags() -> None:
    assert {
        "--allowed-origins",
        "--allowed-methods",
        "--allowed-headers",
        "--middleware",
    } == SINGLE_TOKEN_ARRAY_FLAGS


@pytest.mark.parametrize("value", ["[]", " [ ] "])
def test_empty_array_omits_the_flag(value: str) -> None:
    assert argv(SM_VLLM_API_KEY=value) == BASE
    assert argv(SM_VLLM_ALLOWED_ORIGINS=value) == BASE


def test_one_object_is_passed_verbatim() -> None:
    raw = '{"model": "/d", "num_speculative_tokens": 3}'
    assert argv(SM_VLLM_COMPILATION_CONFIG=raw) == [*BASE, "--compilation-config", raw]


def test_several_objects_are_one_token_each() -> None:
    raw = '{"a": 1}  {"b": {"c": [1, 2]}}\n{"d": "x y"}'
    assert argv(SM_VLLM_KV_TRANSFER_CONFIG=raw) == [
        *BASE,
        "--kv-transfer-config",
        '{"a": 1}',
        '{"b": {"c": [1, 2]}}',
        '{"d": "x y"}',
    ]


def test_objects_followed_by_junk_pass_as_is() -> None:
    raw = '{"a": 1} tail'
    assert value_tokens("--x", raw) == ["--x", raw]


def test_port_is_always_8080_and_first_after_model() -> None:
    assert argv()[4:6] == ["--port", "8080"]


def test_sm_vllm_port_8080_is_not_duplicated_other_port_fails() -> None:
    assert argv(SM_VLLM_PORT="8080") == BASE
    with pytest.raises(ArgvError) as e:
        argv(SM_VLLM_PORT="9000")
    assert e.value.variable == "SM_VLLM_PORT"


def test_variables_are_taken_in_name_order_and_others_ignored() -> None:
    got = argv(
        SM_VLLM_TENSOR_PARALLEL_SIZE="2",
        SM_VLLM_DTYPE="bfloat16",
        OTHER="x",
        SM_VLLM_="ignored",
    )
    assert got == [*BASE, "--dtype", "bfloat16", "--tensor-parallel-size", "2"]


def test_overrides_replace_raw_values() -> None:
    got = build_argv(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_SPECULATIVE_CONFIG": "{}"},
        overrides={"SM_VLLM_SPECULATIVE_CONFIG": '{"method":"eagle3"}'},
    )
    assert got == [*BASE, "--speculative-config", '{"method":"eagle3"}']


# --- model resolution ---------------------------------------------------------------


def test_model_from_sm_vllm_model_wins(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    env = {"SM_VLLM_MODEL": "/x", "PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "/x"
    assert resolve_model(env).source == contract.MODEL_ENV


def test_model_from_non_empty_model_dir(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    env = {"PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == str(tmp_path)
    assert build_argv(env)[2:4] == ["--model", str(tmp_path)]


def test_empty_model_dir_falls_back_to_hf_model_id(tmp_path: Path) -> None:
    env = {"PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m", "SM_VLLM_MODEL": ""}
    assert resolve_model(env).value == "org/m"
    assert resolve_model(env).source == "HF_MODEL_ID"


def test_missing_model_dir_falls_back_to_hf_model_id(tmp_path: Path) -> None:
    env = {"PEAGLE_MODEL_DIR": str(tmp_path / "nope"), "HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "org/m"


def test_model_dir_defaults_to_opt_ml_model() -> None:
    # /opt/ml/model does not exist on a build machine, so HF_MODEL_ID is used.
    env = {"HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "org/m"
    assert contract.MODEL_DIR == "/opt/ml/model"


def test_no_model_anywhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ArgvError) as e:
        resolve_model({"PEAGLE_MODEL_DIR": str(tmp_path)})
    assert e.value.variable == "SM_VLLM_MODEL"
    assert "HF_MODEL_ID" in str(e.value)


def test_sm_vllm_model_is_not_repeated_as_a_flag() -> None:
    assert argv().count("--model") == 1
