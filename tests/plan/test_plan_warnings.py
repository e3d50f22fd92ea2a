"""Specs that deploy but deserve a warning, and the CDK incompatibility hook."""

from __future__ import annotations

import json
from typing import Any

from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec
from peagle_deploy.validation.cloudformation import cdk_incompatibilities


def _warnings(**overrides: Any) -> str:
    return "\n".join(build_plan(load_spec(**overrides)).warnings)


def test_k_above_trained_parallel_tokens_warns() -> None:
    assert "trained for" not in _warnings(
        model="gpt-oss-20b", speculative={"num_speculative_tokens": 10}
    )
    text = _warnings(model="gpt-oss-20b", speculative={"num_speculative_tokens": 11})
    assert "speculative.num_speculative_tokens=11" in text and "10 parallel tokens" in text


def test_kv_aware_routing_is_flagged_for_cdk() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b", routing_strategy="KV_AWARE"))
    assert any("KV_AWARE" in w for w in plan.warnings)
    assert [p.field for p in plan.cdk_incompatibilities] == ["routing_strategy"]
    assert "KV_AWARE" in plan.cdk_incompatibilities[0].message
    assert any(w.field == "routing_strategy" for w in plan.warnings)
    assert (
        cdk_incompatibilities(plan)
        == cdk_incompatibilities(plan.spec)
        == plan.cdk_incompatibilities
    )
    fine = build_plan(load_spec(model="gpt-oss-20b", routing_strategy="PREFIX_AWARE"))
    assert fine.cdk_incompatibilities == []


def test_idle_gpus_and_local_storage_kms_warn() -> None:
    text = _warnings(model="gpt-oss-20b", instance_type="ml.g7e.12xlarge", kms_key_id="alias/k")
    assert "tensor_parallel_size=1 uses 1 of ml.g7e.12xlarge's 2 GPUs" in text
    assert "kms_key_id" in text


def test_eagle3_mode_with_p_eagle_head_warns() -> None:
    assert "drafts sequentially" in _warnings(model="gpt-oss-20b", speculative={"mode": "eagle3"})


def test_catalog_unverified_sources_warn_and_custom_override_silences() -> None:
    text = _warnings(model="qwen3-coder-30b-a3b-instruct")
    assert "unverified default" in text
    quiet = _warnings(
        model="qwen3-coder-30b-a3b-instruct",
        execution_role_arn="arn:aws:iam::123456789012:role/r",
        rollout={"strategy": "all-at-once"},
        custom={"model_data_uri": "s3://mine/qwen/", "drafter_uri": "s3://mine/qwen-peagle/"},
    )
    assert quiet == ""


def test_canary_with_one_instance_warns() -> None:
    assert "rollout.strategy=canary" in _warnings(
        model="gpt-oss-20b", rollout={"strategy": "canary"}
    )
    assert "rollout.strategy" not in _warnings(model="gpt-oss-20b")
    assert "rollout.strategy" not in _warnings(model="gpt-oss-20b", initial_instance_count=2)
    quiet = _warnings(model="gpt-oss-20b", rollout={"strategy": "all-at-once"})
    assert "rollout.strategy" not in quiet


def test_v2_runner_switch_is_fine_without_parallel_drafting() -> None:
    env = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert build_plan(load_spec(model="gpt-oss-20b", env=env, speculative={"mode": "eagle3"}))
    assert build_plan(load_spec(model="gpt-oss-20b", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}))


def test_default_rollout_follows_instance_count() -> None:
    one = build_plan(load_spec(model="gpt-oss-20b"))
    two = build_plan(load_spec(model="gpt-oss-20b", initial_instance_count=2))
    routing = "BlueGreenUpdatePolicy", "TrafficRoutingConfiguration"
    assert one.rollout.strategy == "all-at-once"
    assert one.update_endpoint["DeploymentConfig"][routing[0]][routing[1]]["Type"] == "ALL_AT_ONCE"
    assert two.rollout.strategy == "canary"
    assert two.update_endpoint["DeploymentConfig"][routing[0]][routing[1]]["Type"] == "CANARY"
    assert one.spec.rollout.strategy is None  # the user's spec keeps what was written


def test_secret_looking_env_warns_naming_the_key_never_the_value() -> None:
    token = "hf_" + "a1B2c3D4e5" * 4
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            env={
                "HF_TOKEN": token,
                "SM_VLLM_API_KEY": "s3cr3t-value",
                "MY_SETTING": "sk-" + "x" * 24,
                "SM_VLLM_TOKENIZER": "/opt/ml/model",
                "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "8192",
            },
        )
    )
    text = "\n".join(plan.warnings)
    for key in ("env.HF_TOKEN", "env.SM_VLLM_API_KEY", "env.MY_SETTING"):
        assert f"{key} looks like a secret" in text
    assert "TOKENIZER" not in text and "BATCHED_TOKENS" not in text
    assert token not in text and "s3cr3t-value" not in text
    assert plan.secret_env_keys == ["HF_TOKEN", "MY_SETTING", "SM_VLLM_API_KEY"]
    # The request SageMaker gets is exact; the printable plan is redacted.
    assert plan.create_model["PrimaryContainer"]["Environment"]["HF_TOKEN"] == token
    shown = plan.to_json()
    env = shown["create_model"]["PrimaryContainer"]["Environment"]
    assert env["HF_TOKEN"] == env["SM_VLLM_API_KEY"] == env["MY_SETTING"] == "<redacted>"
    assert env["SM_VLLM_TOKENIZER"] == "/opt/ml/model"
    assert token not in json.dumps(shown)
    exact = plan.to_json(redact_secrets=False)
    assert exact["create_model"] == plan.create_model


def test_plain_env_gives_no_secret_warning() -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b", env={"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9"}))
    assert plan.secret_env_keys == []
    assert not any("secret" in w for w in plan.warnings)
    assert plan.to_json()["create_model"] == plan.create_model


def test_linear_rollout_timeout_below_its_steps_warns() -> None:
    text = _warnings(
        model="gpt-oss-20b",
        initial_instance_count=4,
        rollout={
            "strategy": "linear",
            "linear_step_percent": 10,
            "wait_interval_s": 600,
            "termination_wait_s": 0,
            "max_execution_timeout_s": 3600,
        },
    )
    assert "rollout.max_execution_timeout_s=3600" in text and "10 steps" in text


def test_giving_up_network_isolation_warns() -> None:
    assert "network_isolation" not in _warnings(model="gpt-oss-20b")
    text = _warnings(model="gpt-oss-20b", network_isolation=False)
    assert "network_isolation is false" in text and "outbound internet" in text
    in_vpc = _warnings(
        model="gpt-oss-20b",
        network_isolation=False,
        vpc={"subnet_ids": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]},
    )
    assert "network_isolation is false" in in_vpc and "VPC's routes" in in_vpc


def test_every_warning_names_its_field() -> None:
    """Readers act on `.field` (the CDK stack skips the role warning), never on the text."""
    import pickle

    from peagle_deploy.findings import PlanWarning

    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            instance_type="ml.g7e.12xlarge",
            kms_key_id="alias/k",
            routing_strategy="KV_AWARE",
            network_isolation=False,
            env={"HF_TOKEN": "x"},
            speculative={"num_speculative_tokens": 11},
        )
    )
    fields = {w.field for w in plan.warnings}
    assert all(isinstance(w, PlanWarning) and w.field and w.message == w for w in plan.warnings)
    assert {
        "execution_role_arn",
        "kms_key_id",
        "routing_strategy",
        "network_isolation",
        "env.HF_TOKEN",
        "tensor_parallel_size",
        "speculative.num_speculative_tokens",
    } <= fields
    again = pickle.loads(pickle.dumps(plan.warnings[0]))
    assert again == plan.warnings[0] and again.field == plan.warnings[0].field


def test_widened_secret_names_and_values() -> None:
    """Credentials under names the first rule missed (HF_AUTH, OPENAI_KEY, camelCase,
    DB_PWD) and values that are credentials whatever their name; no false alarm on
    vLLM's own flags or on plain values under a credential-like name."""
    from peagle_deploy.validation.secrets import looks_like_secret

    secret = {
        "HF_AUTH": "abcdefgh12345678",
        "OPENAI_KEY": "abcdefgh12345678",
        "hfToken": "abcdefgh12345678",
        "DB_PWD": "hunter22",
        "SIGNING_KEY": "abcdefgh12345678",
        "GH_PAT": "abcdefgh12345678",
        "AUTHORIZATION": "Basic dXNlcjpwYXNz",
        "ANY": "github_pat_" + "A1b2" * 10,
        "ANY2": "xoxb-" + "1234567890-abcdefghij",
        "ANY3": "AIza" + "a1B2c3D4e5" * 3 + "12345",
        "ANY4": "glpat-" + "a1B2c3D4e5" * 2,
        "ANY5": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop",
    }
    plain = {
        "SM_VLLM_RETURN_TOKENS_AS_TOKEN_IDS": "true",
        "SM_VLLM_TOKENIZER": "/opt/ml/model",
        "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "8192",
        "PROMPT_CACHE_KEY": "abc123",
        "PWD": "/opt/ml",
        "AUTH_TIMEOUT": "30",
        "PASS_THROUGH_HEADERS": "x-request-id",
        "SM_VLLM_SSL_KEYFILE": "/etc/ssl/key.pem",
    }
    assert [k for k, v in secret.items() if not looks_like_secret(k, v)] == []
    assert [k for k, v in plain.items() if looks_like_secret(k, v)] == []


def test_secret_arguments_given_in_env_are_warned_about_on_every_engine() -> None:
    """`SM_VLLM_API_KEY` / `SM_VLLM_HF_TOKEN` become vLLM arguments, and the argument list
    reaches the endpoint's log in clear on every image: standard-supervisor logs the
    command line (it starts vLLM in the AWS server images and the peagle-vllm image), and
    vLLM 0.18.0 (the default image, JumpStart's tag) and 0.27.1 print them in their
    start-up `non-default args` line, where 0.30.0 masks them (engines.json
    `logged_args_redacted`). The warning names the variable vLLM reads instead."""
    env = {"SM_VLLM_API_KEY": "abcdefgh12345678", "SM_VLLM_HF_TOKEN": "abcdefgh12345678"}
    for version, own_line in (
        ("0.18.0", "prints it"),
        ("0.27.1", "prints it"),
        ("0.30.0", "masks it"),
    ):
        plan = build_plan(load_spec(model="gpt-oss-20b", env=env, vllm_version=version))
        logged = [w for w in plan.warnings if "reaches the endpoint's log in clear" in w]
        assert [w.field for w in logged] == ["env.SM_VLLM_API_KEY", "env.SM_VLLM_HF_TOKEN"]
        assert all("standard-supervisor" in w and own_line in w for w in logged), logged
        assert "VLLM_API_KEY by reference" in logged[0] and "HF_TOKEN by reference" in logged[1]
        assert "abcdefgh12345678" not in " ".join(logged)
    default = build_plan(load_spec(model="gpt-oss-20b", env=env))
    assert default.vllm_version == "0.18.0"
