"""Rendered requests against every constraint of botocore's SageMaker service model.

botocore checks required fields, types and minimums before sending, but not enums,
maxima or patterns: SageMaker refuses those server-side, minutes into a deployment.
This walks each rendered request through its input shape and checks all of them, for
specs that use every optional field, so a renderer or validation gap shows up here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

import botocore.session
import pytest
import regex  # cfn-lint's dependency; supports the \p{L} classes of AWS patterns

from peagle_deploy.catalog import MODELS
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec
from peagle_deploy.spec.models import RoutingStrategy
from peagle_deploy.validation.aws_shapes import INFERENCE_AMI_VERSIONS
from peagle_deploy.validation.cloudformation import CFN_ROUTING_STRATEGIES

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")
ROLE = "arn:aws:iam::123456789012:role/sagemaker-exec"

SPECS: dict[str, dict[str, Any]] = {
    **{f"catalog-{key}": {"model": key, "accept_eula": True} for key in MODELS},
    "every-option": {
        "model": "custom",
        "region": "eu-west-1",
        "instance_type": "ml.g6e.12xlarge",
        "initial_instance_count": 3,
        "custom": {
            "image_uri": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/peagle-vllm:1.0",
            "model_data_uri": "s3://acme-models/qwen3/model.tar.gz",
            "drafter_uri": "s3://acme-drafters/qwen3-eagle3/",
            "drafter_kind": "eagle3",
            "weights_gb": 20,
            "name": "qwen3.coder_v2",
        },
        "speculative": {
            "mode": "eagle3",
            "num_speculative_tokens": 5,
            "num_speculative_tokens_per_batch_size": [[1, 8, 5], [9, 256, 2]],
            "drafter_channel": "p-eagle.head_1",
        },
        "tensor_parallel_size": 4,
        "env": {"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9", "A_LONG_VALUE": "x" * 1024},
        "model_data_download_timeout_s": 3600,
        "container_startup_health_check_timeout_s": 60,
        "network_isolation": True,
        "vpc": {
            "subnet_ids": [f"subnet-0123456789abcde{i:x}" for i in range(16)],
            "security_group_ids": [f"sg-0123456789abcde{i:x}" for i in range(5)],
        },
        "kms_key_id": "arn:aws:kms:eu-west-1:123456789012:alias/peagle-volumes",
        "routing_strategy": "PREFIX_AWARE",
        "inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1",
        "tags": {"équipe": "ml plateforme", "cost:center": "a/b=c+d@e_1.2", "empty": ""},
        "execution_role_arn": ROLE,
        "stage": "staging-eu",
        "rollout": {
            "strategy": "linear",
            "linear_step_percent": 50,
            "wait_interval_s": 3600,
            "termination_wait_s": 0,
            "max_execution_timeout_s": 28800,
            "alarms": [f"alarm {i}: p99 > 5s" for i in range(10)],
        },
    },
    "canary-max-name": {
        "model": "gpt-oss-20b",
        "endpoint_name": "e" * 63,
        "initial_instance_count": 2,
        "rollout": {"strategy": "canary", "canary_percent": 50, "alarms": ["a" * 255]},
    },
}


def _violations(value: Any, shape: Any, path: str) -> Iterator[str]:
    """Every constraint of `shape` that `value` breaks (botocore shapes are untyped)."""
    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(value, dict), path
        for key, member in value.items():
            assert key in shape.members, f"{path}.{key}: not in {shape.name}"
            yield from _violations(member, shape.members[key], f"{path}.{key}")
        return
    if kind in ("list", "map"):
        size = len(value)
        if not meta.get("min", 0) <= size <= meta.get("max", size):
            yield f"{path}: {size} entries outside {meta}"
        if kind == "list":
            for i, item in enumerate(value):
                yield from _violations(item, shape.member, f"{path}[{i}]")
        else:
            for key, item in value.items():
                yield from _violations(key, shape.key, f"{path} key {key!r}")
                yield from _violations(item, shape.value, f"{path}.{key}")
        return
    if kind == "string":
        enum = getattr(shape, "enum", None)
        if enum and value not in enum:
            yield f"{path}: {value!r} not in {shape.name} enum"
        if not meta.get("min", 0) <= len(value) <= meta.get("max", len(value)):
            yield f"{path}: length {len(value)} outside {meta.get('min')}-{meta.get('max')}"
        pattern = meta.get("pattern")
        if pattern and not regex.fullmatch(pattern, value):
            yield f"{path}: {value!r} does not match {pattern}"
    elif kind in ("integer", "long", "float", "double") and not (
        meta.get("min", value) <= value <= meta.get("max", value)
    ):
        yield f"{path}: {value} outside {meta.get('min')}-{meta.get('max')}"


def _check(operation: str, request: dict[str, Any]) -> list[str]:
    return list(_violations(request, SAGEMAKER.operation_model(operation).input_shape, operation))


@pytest.mark.parametrize("name", list(SPECS))
def test_rendered_requests_meet_every_service_model_constraint(name: str) -> None:
    plan = build_plan(load_spec(**SPECS[name]))
    problems = [
        *_check("CreateModel", plan.create_model),
        *_check("CreateEndpointConfig", plan.create_endpoint_config),
        *_check("CreateEndpoint", plan.create_endpoint),
        *_check("UpdateEndpoint", plan.update_endpoint),
    ]
    assert problems == []


def test_the_checker_catches_what_botocore_does_not() -> None:
    """The walk above is only worth something if it fails on enum, maxima and patterns."""
    plan = build_plan(load_spec(**SPECS["catalog-gpt-oss-20b"]))
    config = plan.create_endpoint_config
    variant = {**config["ProductionVariants"][0], "InferenceAmiVersion": "al2-gpu-9"}
    variant["ModelDataDownloadTimeoutInSeconds"] = 3601
    bad = {**config, "ProductionVariants": [variant], "Tags": [{"Key": "a\nb", "Value": "v"}]}
    problems = "\n".join(_check("CreateEndpointConfig", bad))
    assert "InferenceAmiVersion" in problems
    assert "ModelDataDownloadTimeoutInSeconds: 3601" in problems
    assert "Tags[0].Key" in problems


def test_enumerations_follow_the_service_model() -> None:
    variant_shape: Any = SAGEMAKER.shape_for("ProductionVariant")
    variant = variant_shape.members
    routing = variant["RoutingConfig"].members["RoutingStrategy"].enum
    assert set(get_args(RoutingStrategy)) == set(routing)
    assert set(CFN_ROUTING_STRATEGIES) < set(routing)
    amis = variant["InferenceAmiVersion"].enum
    gpu_amis = {a for a in amis if "-gpu-" in a}
    assert set(INFERENCE_AMI_VERSIONS) == gpu_amis
