"""The SM_VLLM_* -> vLLM argument table: the AWS vLLM images' converter, case by case.

Reference: aws/deep-learning-containers@dceae13291323f0985f5e90923f4b332c387af6a
scripts/docker/vllm/sagemaker_args.py (see peagle_serve.envargs). Each expected token
list below is what that converter produces for the value (read from its source); the
deliberate differences have their own tests at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from peagle_serve import contract, envargs
from peagle_serve.envargs import (
    SINGLE_TOKEN_ARRAY_FLAGS,
    ArgvError,
    build_args,
    flag_name,
    resolve_model,
    value_tokens,
)

BASE = ["--port", "8080"]
M = [*BASE, "--model", "m"]  # SM_VLLM_MODEL=m sorts in among the flags


def args(**env: str) -> list[str]:
    """Arguments for an environment whose model is SM_VLLM_MODEL=m."""
    return build_args({"SM_VLLM_MODEL": "m", "PEAGLE_MODEL_DIR": "/nonexistent", **env})


def test_flag_names() -> None:
    assert flag_name("SM_VLLM_MAX_MODEL_LEN") == "--max-model-len"
    assert flag_name("SM_VLLM_Tensor_Parallel_Size") == "--tensor-parallel-size"


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE", " true "])
def test_true_in_any_case_is_a_bare_flag(value: str) -> None:
    assert args(SM_VLLM_ENFORCE_EAGER=value) == [*BASE, "--enforce-eager", "--model", "m"]


@pytest.mark.parametrize("value", ["false", "FALSE", "False", " false"])
def test_false_in_any_case_omits_the_flag(value: str) -> None:
    assert args(SM_VLLM_ENFORCE_EAGER=value) == M


def test_empty_value_is_a_bare_flag() -> None:
    assert args(SM_VLLM_TRUST_REMOTE_CODE="") == [*M, "--trust-remote-code"]


@pytest.mark.parametrize(
    ("value", "tokens"),
    [
        ("8192", ["8192"]),
        ("0.92", ["0.92"]),
        ("auto", ["auto"]),
        ("openai/gpt-oss-20b", ["openai/gpt-oss-20b"]),
        ("a b", ["a b"]),  # one token even with a space
        ("  ", ["  "]),  # not empty: passed as is
        ("[not json", ["[not json"]),
        ("[not json]", ["[not json]"]),
        ("[1, 2] tail", ["[1, 2] tail"]),
        ("{not json}", ["{not json}"]),
        ('"quoted"', ['"quoted"']),
        ("null", ["null"]),
    ],
)
def test_scalars_pass_as_is(value: str, tokens: list[str]) -> None:
    assert value_tokens("--max-model-len", value) == ["--max-model-len", *tokens]


def test_json_array_is_one_token_per_element() -> None:
    assert value_tokens("--api-key", '["k1", "k2"]') == ["--api-key", "k1", "k2"]
    assert value_tokens("--api-key", ' ["k1"] ') == ["--api-key", "k1"]


def test_json_array_elements_become_tokens_as_the_aws_converter_prints_them() -> None:
    raw = '[1, 2.5, 1e16, true, false, null, "s", {"a": [1, "é"]}, [3, 4]]'
    assert value_tokens("--x", raw) == [
        "--x",
        "1",
        "2.5",
        "1e+16",
        "true",
        "false",
        "",  # null -> an empty token
        "s",
        '{"a":[1,"\\u00e9"]}',
        "[3,4]",
    ]


@pytest.mark.parametrize("flag", sorted(SINGLE_TOKEN_ARRAY_FLAGS))
@pytest.mark.parametrize("value", ['["a", "b"]', "[]", " [ ] ", '["*"]', "plain", '{"a": 1}'])
def test_single_token_flags_keep_the_value_as_written(flag: str, value: str) -> None:
    variable = "SM_VLLM_" + flag[2:].upper().replace("-", "_")
    assert value_tokens(flag, value, variable) == [flag, value]


def test_allowed_origins_empty_array_means_no_origins() -> None:
    """Issue 10: the AWS image passes `--allowed-origins []` (vLLM then allows no origin),
    not "omit the flag" (vLLM's default allows every origin)."""
    assert args(SM_VLLM_ALLOWED_ORIGINS="[]") == [*BASE, "--allowed-origins", "[]", "--model", "m"]


def test_the_four_single_token_flags() -> None:
    assert {
        "--allowed-origins",
        "--allowed-methods",
        "--allowed-headers",
        "--middleware",
    } == SINGLE_TOKEN_ARRAY_FLAGS


@pytest.mark.parametrize("value", ["[]", " [ ] "])
def test_empty_array_omits_other_flags(value: str) -> None:
    assert args(SM_VLLM_API_KEY=value) == M


@pytest.mark.parametrize(
    "raw", ['{"model": "/d", "num_speculative_tokens": 3}', ' {"a": 1} ', '{"a":  [1, 2]}']
)
def test_one_object_is_passed_as_written(raw: str) -> None:
    assert value_tokens("--compilation-config", raw) == ["--compilation-config", raw]


def test_several_objects_are_one_compact_token_each() -> None:
    raw = '{"a": 1}  {"b": {"c": [1, 2]}}\n{"d": "x y"}{"e": "é"}'
    assert value_tokens("--kv-transfer-config", raw) == [
        "--kv-transfer-config",
        '{"a":1}',
        '{"b":{"c":[1,2]}}',
        '{"d":"x y"}',
        '{"e":"\\u00e9"}',
    ]


@pytest.mark.parametrize("raw", ['{"a": 1} tail', '{"a": 1} [2]}', '{"a": 1} {"b"}'])
def test_objects_with_anything_else_pass_as_is(raw: str) -> None:
    assert value_tokens("--x", raw) == ["--x", raw]


def test_port_8080_comes_first() -> None:
    assert args()[:2] == ["--port", "8080"]


def test_variables_are_taken_in_name_order_and_others_ignored() -> None:
    got = args(SM_VLLM_TENSOR_PARALLEL_SIZE="2", SM_VLLM_DTYPE="bfloat16", OTHER="x")
    assert got == [
        *BASE,
        "--dtype",
        "bfloat16",
        "--model",
        "m",
        "--tensor-parallel-size",
        "2",
    ]


def test_overrides_replace_raw_values() -> None:
    got = build_args(
        {"SM_VLLM_MODEL": "m", "SM_VLLM_SPECULATIVE_CONFIG": "{}"},
        overrides={"SM_VLLM_SPECULATIVE_CONFIG": '{"method":"eagle3"}'},
    )
    assert got == [*BASE, "--model", "m", "--speculative-config", '{"method":"eagle3"}']


# --- model resolution ---------------------------------------------------------------


def test_model_from_sm_vllm_model_wins(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    env = {"SM_VLLM_MODEL": "/x", "PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "/x"
    assert resolve_model(env).source == contract.MODEL_ENV
    assert build_args(env) == [*BASE, "--model", "/x"]


def test_model_from_non_empty_model_dir_comes_right_after_the_port(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    env = {"PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m", "SM_VLLM_DTYPE": "auto"}
    assert resolve_model(env).value == str(tmp_path)
    assert build_args(env) == [*BASE, "--model", str(tmp_path), "--dtype", "auto"]


def test_empty_model_dir_falls_back_to_hf_model_id(tmp_path: Path) -> None:
    env = {"PEAGLE_MODEL_DIR": str(tmp_path), "HF_MODEL_ID": "org/m", "SM_VLLM_MODEL": ""}
    assert resolve_model(env).value == "org/m"
    assert resolve_model(env).source == "HF_MODEL_ID"
    # An empty SM_VLLM_MODEL gives no bare --model (see the differences below).
    assert build_args(env) == [*BASE, "--model", "org/m"]


def test_missing_model_dir_falls_back_to_hf_model_id(tmp_path: Path) -> None:
    env = {"PEAGLE_MODEL_DIR": str(tmp_path / "nope"), "HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "org/m"


def test_model_dir_defaults_to_opt_ml_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PEAGLE_MODEL_DIR the directory looked at is SageMaker's /opt/ml/model:
    served when it holds files, else HF_MODEL_ID. The directory's content is the test's,
    not the host's (a machine may have an /opt/ml/model of its own)."""
    asked: list[str] = []
    holds_files = {"/opt/ml/model": False}

    def has_entries(path: str) -> bool:
        asked.append(path)
        return holds_files.get(path, False)

    monkeypatch.setattr(envargs, "_dir_has_entries", has_entries)
    env = {"HF_MODEL_ID": "org/m"}
    assert resolve_model(env).value == "org/m"
    holds_files["/opt/ml/model"] = True
    assert resolve_model(env).value == "/opt/ml/model"
    assert asked == ["/opt/ml/model", "/opt/ml/model"]
    assert contract.MODEL_DIR == "/opt/ml/model"


def test_sm_vllm_model_is_not_repeated_as_a_flag() -> None:
    assert args().count("--model") == 1


# --- deliberate differences from the AWS converter (docs/container.md) ----------------


def test_no_model_anywhere_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ArgvError) as e:
        resolve_model({"PEAGLE_MODEL_DIR": str(tmp_path)})
    assert e.value.variable == "SM_VLLM_MODEL"
    assert "HF_MODEL_ID" in str(e.value)


def test_sm_vllm_port_8080_is_not_duplicated_other_port_fails() -> None:
    assert args(SM_VLLM_PORT="8080") == M
    with pytest.raises(ArgvError) as e:
        args(SM_VLLM_PORT="9000")
    assert e.value.variable == "SM_VLLM_PORT"


def test_a_bare_prefix_names_no_flag() -> None:
    assert args(SM_VLLM_="ignored") == M


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply (more than 64 levels"),
        ('[{"a": 1, "a": 2}]', "duplicate key 'a'"),
        ('{"a": 1} {"b": 1, "b": 2}', "duplicate key 'b'"),
        ("[NaN]", "NaN is not a JSON number"),
        ("[1, -Infinity]", "-Infinity is not a JSON number"),
        ("[" + "1," * 40000 + "1]", "the limit is 64.0 KiB"),
        ('["\udcff"]', "not valid UTF-8 (byte 0xff"),
    ],
)
def test_json_that_breaks_the_limits_is_refused_with_the_variable(value: str, problem: str) -> None:
    with pytest.raises(ArgvError) as e:
        args(SM_VLLM_CUDA_GRAPH_SIZES=value)
    assert e.value.variable == "SM_VLLM_CUDA_GRAPH_SIZES"
    assert problem in str(e.value)
    assert "\n" not in str(e.value)


def test_single_token_flag_values_are_checked_for_limits_too() -> None:
    with pytest.raises(ArgvError) as e:
        args(SM_VLLM_ALLOWED_ORIGINS="[" * 100 + "]" * 100)
    assert e.value.variable == "SM_VLLM_ALLOWED_ORIGINS"
