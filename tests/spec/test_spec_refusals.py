"""Bad specs are refused before any AWS call, with the field name and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.redaction import safe_message
from peagle_deploy.spec import load_spec

CUSTOM = {
    "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:1",
    "model_data_uri": "s3://bucket/target/",
    "drafter_uri": "s3://bucket/drafter/",
    "weights_gb": 20,
}


def _refuse(**overrides: Any) -> InputError:
    with pytest.raises(InputError) as info:
        build_plan(load_spec(**overrides))
    return info.value


# (id, overrides, field named in the error, whether an "allowed" hint is expected)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown-top-level-field", {"model": "gpt-oss-20b", "modle": "x"}, "modle"),
    ("unknown-nested-field", {"model": "gpt-oss-20b", "speculative": {"k": 3}}, "speculative.k"),
    (
        "wrong-type",
        {"model": "gpt-oss-20b", "initial_instance_count": "two"},
        "initial_instance_count",
    ),
    (
        "zero-instances",
        {"model": "gpt-oss-20b", "initial_instance_count": 0},
        "initial_instance_count",
    ),
    ("missing-model", {"stage": "dev"}, "model"),
    ("bad-mode", {"model": "gpt-oss-20b", "speculative": {"mode": "medusa"}}, "speculative.mode"),
    (
        "k-zero",
        {"model": "gpt-oss-20b", "speculative": {"num_speculative_tokens": 0}},
        "speculative.num_speculative_tokens",
    ),
    ("unknown-model", {"model": "llama 9000"}, "model"),
    ("unknown-instance", {"model": "gpt-oss-20b", "instance_type": "ml.g9.huge"}, "instance_type"),
    (
        "gpu-less-instance",
        {"model": "gpt-oss-20b", "instance_type": "ml.m5.xlarge"},
        "instance_type",
    ),
    ("tp-above-gpus", {"model": "gpt-oss-20b", "tensor_parallel_size": 2}, "tensor_parallel_size"),
    (
        "tp-not-divisor",
        {"model": "gpt-oss-20b", "instance_type": "ml.g7e.48xlarge", "tensor_parallel_size": 3},
        "tensor_parallel_size",
    ),
    (
        "weights-do-not-fit",
        {"model": "gpt-oss-120b", "instance_type": "ml.g6e.xlarge"},
        "instance_type",
    ),
    (
        "kv-floor-does-not-fit",
        {"model": "gemma-4-31b-it", "accept_eula": True, "max_model_len": 131072},
        "instance_type",
    ),
    ("too-many-env", {"model": "gpt-oss-20b", "env": {f"V{i}": "x" for i in range(99)}}, "env"),
    ("env-value-too-long", {"model": "gpt-oss-20b", "env": {"BIG": "x" * 1025}}, "env.BIG"),
    (
        "env-total-too-big",
        {"model": "gpt-oss-20b", "env": {f"V{i}": "x" * 1000 for i in range(40)}},
        "env",
    ),
    (
        "env-owned-key",
        {"model": "gpt-oss-20b", "env": {"SM_VLLM_SPECULATIVE_CONFIG": "{}"}},
        "env.SM_VLLM_SPECULATIVE_CONFIG",
    ),
    (
        "env-tp-key",
        {"model": "gpt-oss-20b", "env": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"}},
        "env.SM_VLLM_TENSOR_PARALLEL_SIZE",
    ),
    ("env-bad-key", {"model": "gpt-oss-20b", "env": {"1BAD": "x"}}, "env.1BAD"),
    (
        "bad-channel",
        {"model": "gpt-oss-20b", "speculative": {"drafter_channel": "my channel!"}},
        "speculative.drafter_channel",
    ),
    (
        "model-uri-not-s3",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {**CUSTOM, "model_data_uri": "https://example.com/m"},
        },
        "custom.model_data_uri",
    ),
    (
        "model-uri-plain-object",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {**CUSTOM, "model_data_uri": "s3://bucket/model.bin"},
        },
        "custom.model_data_uri",
    ),
    (
        "drafter-uri-not-prefix",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {**CUSTOM, "drafter_uri": "s3://bucket/drafter.tar.gz"},
        },
        "custom.drafter_uri",
    ),
    (
        "custom-without-model-data",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {"drafter_uri": "s3://bucket/d/"},
        },
        "custom.model_data_uri",
    ),
    (
        "custom-without-drafter",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {"model_data_uri": "s3://bucket/m/"},
        },
        "custom.drafter_uri",
    ),
    ("custom-without-instance", {"model": "custom", "custom": CUSTOM}, "instance_type"),
    (
        "download-timeout-low",
        {"model": "gpt-oss-20b", "model_data_download_timeout_s": 30},
        "model_data_download_timeout_s",
    ),
    (
        "startup-timeout-high",
        {"model": "gpt-oss-20b", "container_startup_health_check_timeout_s": 4000},
        "container_startup_health_check_timeout_s",
    ),
    ("volume-on-nvme-family", {"model": "gpt-oss-20b", "volume_size_gb": 100}, "volume_size_gb"),
    ("volume-too-big", {"model": "gpt-oss-20b", "volume_size_gb": 600}, "volume_size_gb"),
    ("bad-region", {"model": "gpt-oss-20b", "region": "mars-north"}, "region"),
    (
        "bad-routing",
        {"model": "gpt-oss-20b", "routing_strategy": "ROUND_ROBIN"},
        "routing_strategy",
    ),
    (
        "bad-ami",
        {"model": "gpt-oss-20b", "inference_ami_version": "al2-ami-sagemaker-inference-neuron-2"},
        "inference_ami_version",
    ),
    (
        "bad-role",
        {"model": "gpt-oss-20b", "execution_role_arn": "arn:aws:iam::123:user/me"},
        "execution_role_arn",
    ),
    (
        "parallel-with-plain-eagle3",
        {
            "model": "custom",
            "instance_type": "ml.g7e.2xlarge",
            "custom": {**CUSTOM, "drafter_kind": "eagle3"},
        },
        "custom.drafter_kind",
    ),
    (
        "eagle3-with-other-drafter",
        {
            "model": "gpt-oss-20b",
            "speculative": {
                "mode": "eagle3",
                "drafter_uri": "s3://bucket/d/",
                "drafter_kind": "other",
            },
        },
        "speculative.drafter_kind",
    ),
    (
        "schedule-overlap",
        {
            "model": "gpt-oss-20b",
            "speculative": {
                "num_speculative_tokens": 5,
                "num_speculative_tokens_per_batch_size": [[1, 8, 5], [4, 16, 3]],
            },
        },
        "speculative.num_speculative_tokens_per_batch_size[1]",
    ),
    (
        "schedule-k-above-max",
        {
            "model": "gpt-oss-20b",
            "speculative": {
                "num_speculative_tokens": 5,
                "num_speculative_tokens_per_batch_size": [[1, 8, 7]],
            },
        },
        "speculative.num_speculative_tokens_per_batch_size[0]",
    ),
    (
        "schedule-not-from-1",
        {
            "model": "gpt-oss-20b",
            "speculative": {"num_speculative_tokens_per_batch_size": [[2, 8, 3]]},
        },
        "speculative.num_speculative_tokens_per_batch_size[0]",
    ),
    (
        "schedule-empty",
        {"model": "gpt-oss-20b", "speculative": {"num_speculative_tokens_per_batch_size": []}},
        "speculative.num_speculative_tokens_per_batch_size",
    ),
    (
        "schedule-not-triples",
        {
            "model": "gpt-oss-20b",
            "speculative": {"num_speculative_tokens_per_batch_size": [[1, 8]]},
        },
        "speculative.num_speculative_tokens_per_batch_size[0][2]",
    ),
    (
        "image-not-ecr",
        {"model": "gpt-oss-20b", "image_uri": "docker.io/vllm/vllm-openai:latest"},
        "image_uri",
    ),
    ("bad-stage", {"model": "gpt-oss-20b", "stage": "Prod!"}, "stage"),
    (
        "bad-endpoint-name",
        {"model": "gpt-oss-20b", "endpoint_name": "my_endpoint"},
        "endpoint_name",
    ),
    (
        "endpoint-name-too-long",
        {"model": "gpt-oss-20b", "endpoint_name": "e" * 64},
        "endpoint_name",
    ),
    ("bad-kms", {"model": "gpt-oss-20b", "kms_key_id": "my key"}, "kms_key_id"),
    (
        "subnets-without-groups",
        {"model": "gpt-oss-20b", "vpc": {"subnet_ids": ["subnet-0123abcd"]}},
        "vpc.security_group_ids",
    ),
    (
        "bad-subnet-id",
        {
            "model": "gpt-oss-20b",
            "vpc": {"subnet_ids": ["net-1"], "security_group_ids": ["sg-0123abcd"]},
        },
        "vpc.subnet_ids[0]",
    ),
    ("reserved-tag", {"model": "gpt-oss-20b", "tags": {"peagle:stage": "x"}}, "tags.peagle:stage"),
    ("aws-tag", {"model": "gpt-oss-20b", "tags": {"aws:owner": "x"}}, "tags.aws:owner"),
    (
        "linear-step-too-small",
        {
            "model": "gpt-oss-20b",
            "initial_instance_count": 4,
            "rollout": {"strategy": "linear", "linear_step_percent": 5},
        },
        "rollout.linear_step_percent",
    ),
    (
        "v2-runner-with-p-eagle",
        {"model": "gpt-oss-20b", "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}},
        "env.VLLM_USE_V2_MODEL_RUNNER",
    ),
    (
        "too-many-alarms",
        {
            "model": "gpt-oss-20b",
            "initial_instance_count": 2,
            "rollout": {"alarms": [f"a{i}" for i in range(11)]},
        },
        "rollout.alarms",
    ),
    (
        "bad-rollout-strategy",
        {"model": "gpt-oss-20b", "rollout": {"strategy": "big-bang"}},
        "rollout.strategy",
    ),
    (
        "canary-too-big",
        {"model": "gpt-oss-20b", "rollout": {"canary_percent": 80}},
        "rollout.canary_percent",
    ),
    (
        "scaling-min-above-max",
        {"model": "gpt-oss-20b", "scaling": {"min_instances": 3, "max_instances": 2}},
        "scaling.max_instances",
    ),
    (
        "count-outside-scaling",
        {"model": "gpt-oss-20b", "initial_instance_count": 5, "scaling": {"max_instances": 2}},
        "initial_instance_count",
    ),
    # TagValue is [\p{L}\p{Z}\p{N}_.:/=+\-@]*: a newline or tab is not a separator (\p{Z})
    ("tag-value-newline", {"model": "gpt-oss-20b", "tags": {"team": "ml\nops"}}, "tags.team"),
    ("tag-key-tab", {"model": "gpt-oss-20b", "tags": {"cost\tcenter": "1"}}, "tags.cost\tcenter"),
    # AlarmName is (?!\s*$).+ : one line
    (
        "alarm-name-two-lines",
        {"model": "gpt-oss-20b", "rollout": {"alarms": ["p99\nlatency"]}},
        "rollout.alarms[0]",
    ),
    # MaximumExecutionTimeoutInSeconds must exceed TerminationWait + WaitInterval
    (
        "rollout-timeout-below-waits",
        {
            "model": "gpt-oss-20b",
            "rollout": {
                "wait_interval_s": 3600,
                "termination_wait_s": 600,
                "max_execution_timeout_s": 3600,
            },
        },
        "rollout.max_execution_timeout_s",
    ),
    # the rendered SM_VLLM_SPECULATIVE_CONFIG must fit SageMaker's 1024-byte env values
    (
        "k-schedule-too-long-for-env",
        {
            "model": "gpt-oss-20b",
            "speculative": {
                "num_speculative_tokens_per_batch_size": [
                    [i * 10 + 1, i * 10 + 10, 3] for i in range(100)
                ]
            },
        },
        "speculative.num_speculative_tokens_per_batch_size",
    ),
    (
        "kms-key-in-another-region",
        {
            "model": "gpt-oss-20b",
            "region": "us-east-1",
            "kms_key_id": "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd",
        },
        "kms_key_id",
    ),
    # custom.name is the peagle:model tag value on every resource
    (
        "custom-name-not-a-tag-value",
        {"model": "gpt-oss-20b", "custom": {"name": "my model! (v2)"}},
        "custom.name",
    ),
    (
        "custom-name-too-long",
        {"model": "gpt-oss-20b", "custom": {"name": "m" * 64}},
        "custom.name",
    ),
    (
        "model-data-kms-alias",
        {"model": "gpt-oss-20b", "model_data_kms_key_arns": ["alias/weights"]},
        "model_data_kms_key_arns[0]",
    ),
    (
        "model-data-kms-too-many",
        {
            "model": "gpt-oss-20b",
            "model_data_kms_key_arns": [
                f"arn:aws:kms:us-east-1:123456789012:key/k{i}" for i in range(6)
            ],
        },
        "model_data_kms_key_arns",
    ),
]


@pytest.mark.parametrize(("overrides", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_spec_is_refused_naming_the_field(overrides: dict[str, Any], field: str) -> None:
    error = _refuse(**overrides)
    assert error.field == field
    # the printed line shows control characters escaped (one line, no terminal escapes)
    assert str(error).startswith(f"{safe_message(field, 120)}: ")


def test_unicode_tags_and_limits_that_sagemaker_accepts_pass() -> None:
    """The tag check follows botocore's pattern (any script, spaces), not ASCII only."""
    plan = build_plan(
        load_spec(
            model="gpt-oss-20b",
            tags={"équipe": "ml plateforme", "チーム": "推論", "cost:center": "a/b=c+d@e_1.2"},
            rollout={"wait_interval_s": 600, "termination_wait_s": 600},
            model_data_kms_key_arns=["arn:aws:kms:us-east-1:123456789012:key/0b1c2d3e"],
        )
    )
    assert {"Key": "チーム", "Value": "推論"} in plan.tags


def test_case_ids_are_distinct_and_many() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 30


@pytest.mark.parametrize(
    ("overrides", "allowed_part"),
    [
        (
            {"model": "gpt-oss-20b", "speculative": {"mode": "medusa"}},
            "'p-eagle', 'eagle3' or 'none'",
        ),
        ({"model": "gpt-oss-20b", "modle": "x"}, "did you mean model?"),
        ({"model": "llama 9000"}, "gpt-oss-20b"),
        ({"model": "gpt-oss-20b", "instance_type": "ml.g9.huge"}, "ml.g7e.2xlarge"),
        ({"model": "gpt-oss-20b", "model_data_download_timeout_s": 30}, "60-3600"),
        ({"model": "gpt-oss-120b", "instance_type": "ml.g6e.xlarge"}, "ml.g7e.2xlarge"),
        ({"model": "gpt-oss-20b", "tensor_parallel_size": 2}, "allowed: 1"),
        ({"model": "gpt-oss-20b", "routing_strategy": "ROUND_ROBIN"}, "KV_AWARE"),
        (
            {"model": "gpt-oss-20b", "inference_ami_version": "x"},
            "al2023-ami-sagemaker-inference-gpu-4-1",
        ),
    ],
)
def test_errors_say_what_is_allowed(overrides: dict[str, Any], allowed_part: str) -> None:
    message = str(_refuse(**overrides))
    assert "(allowed: " in message
    assert allowed_part in message


def test_bad_file_contents(tmp_path: Path) -> None:
    cases = {
        # load_spec names the file by the SDK's keyword; the CLI passes `--file`
        "malformed.yaml": ("model: gpt-oss-20b\nspeculative: [unclosed\n", "spec_file"),
        "malformed.json": ('{"model": "gpt-oss-20b",}', "spec_file"),
        "list.yaml": ("- gpt-oss-20b\n", "spec_file"),
        "unknown.yaml": ("model: gpt-oss-20b\ninstance: ml.g7e.2xlarge\n", "instance"),
        "nested.json": (
            '{"model": "gpt-oss-20b", "vpc": {"subnets": ["subnet-1"]}}',
            "vpc.subnets",
        ),
        "badk.yml": (
            "model: gpt-oss-20b\nspeculative:\n  num_speculative_tokens: -1\n",
            "speculative.num_speculative_tokens",
        ),
    }
    for name, (text, field) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InputError) as info:
            build_plan(load_spec(path))
        assert info.value.field == field, name
        assert field in str(info.value)
    with pytest.raises(InputError) as info:
        load_spec(tmp_path / "missing.yaml")
    assert info.value.field == "spec_file" and "missing.yaml" in str(info.value)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("model: gpt-oss-20b\nstage: dev\nspeculative: [unclosed\n")
    with pytest.raises(InputError) as info:
        load_spec(path)
    message = str(info.value)
    assert "line" in message and "spec.yaml" in message
