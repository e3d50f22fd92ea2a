"""Every number the spec sends to AWS has the upper bound AWS imposes (botocore's service
models are the truth), and K's bound is the one vLLM enforces."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from peagle_deploy.spec.models import AWS_INT_MAX, DeploymentSpec, RolloutSpec, ScalingSpec
from peagle_deploy.validation.speculative import (
    TOKENS_BESIDE_DRAFTS,
    VLLM_MAX_DRAFT_TOKENS,
    max_draft_tokens,
)

# spec field -> (service, operation, member path in the request)
AWS_NUMBERS: dict[tuple[type[BaseModel], str], tuple[str, str, tuple[str, ...]]] = {
    (DeploymentSpec, "initial_instance_count"): (
        "sagemaker",
        "CreateEndpointConfig",
        ("ProductionVariants", "*", "InitialInstanceCount"),
    ),
    (DeploymentSpec, "volume_size_gb"): (
        "sagemaker",
        "CreateEndpointConfig",
        ("ProductionVariants", "*", "VolumeSizeInGB"),
    ),
    (DeploymentSpec, "model_data_download_timeout_s"): (
        "sagemaker",
        "CreateEndpointConfig",
        ("ProductionVariants", "*", "ModelDataDownloadTimeoutInSeconds"),
    ),
    (DeploymentSpec, "container_startup_health_check_timeout_s"): (
        "sagemaker",
        "CreateEndpointConfig",
        ("ProductionVariants", "*", "ContainerStartupHealthCheckTimeoutInSeconds"),
    ),
    (RolloutSpec, "wait_interval_s"): (
        "sagemaker",
        "UpdateEndpoint",
        (
            "DeploymentConfig",
            "BlueGreenUpdatePolicy",
            "TrafficRoutingConfiguration",
            "WaitIntervalInSeconds",
        ),
    ),
    (RolloutSpec, "termination_wait_s"): (
        "sagemaker",
        "UpdateEndpoint",
        ("DeploymentConfig", "BlueGreenUpdatePolicy", "TerminationWaitInSeconds"),
    ),
    (RolloutSpec, "max_execution_timeout_s"): (
        "sagemaker",
        "UpdateEndpoint",
        ("DeploymentConfig", "BlueGreenUpdatePolicy", "MaximumExecutionTimeoutInSeconds"),
    ),
    (ScalingSpec, "min_instances"): (
        "application-autoscaling",
        "RegisterScalableTarget",
        ("MinCapacity",),
    ),
    (ScalingSpec, "max_instances"): (
        "application-autoscaling",
        "RegisterScalableTarget",
        ("MaxCapacity",),
    ),
}


def _shape(service: str, operation: str, path: tuple[str, ...]) -> Any:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    shape: Any = model.operation_model(operation).input_shape
    for part in path:
        shape = shape.member if part == "*" else shape.members[part]
    return shape


def _le(model: type[BaseModel], name: str) -> int | None:
    return next(
        (m.le for m in model.model_fields[name].metadata if getattr(m, "le", None) is not None),
        None,
    )


@pytest.mark.parametrize(
    ("key", "where"), list(AWS_NUMBERS.items()), ids=[k[1] for k in AWS_NUMBERS]
)
def test_spec_number_has_the_aws_upper_bound(
    key: tuple[type[BaseModel], str], where: tuple[str, str, tuple[str, ...]]
) -> None:
    shape = _shape(*where)
    assert shape.type_name == "integer"
    # An AWS `integer` is 32-bit signed; where the model sets no maximum, that is it.
    expected = shape.metadata.get("max", AWS_INT_MAX)
    assert _le(*key) == expected


def test_every_int_field_of_the_spec_is_bounded() -> None:
    """No integer knob is left without an upper bound (K is bounded by the plan)."""
    unbounded = []
    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            from peagle_deploy.spec.errors import models_in

            for nested in models_in(info.annotation):
                walk(nested, f"{prefix}{name}.")
            kind = str(info.annotation)
            if "int" in kind and "list" not in kind and _le(model, name) is None:
                unbounded.append(prefix + name)

    walk(DeploymentSpec, "")
    # Both K are bounded by the plan (the candidate's through its own plan).
    assert unbounded == [
        "speculative.num_speculative_tokens",
        "experiment.candidate.num_speculative_tokens",
    ]


def test_k_bound_follows_max_model_len() -> None:
    assert max_draft_tokens(None) == VLLM_MAX_DRAFT_TOKENS == 128
    assert max_draft_tokens(8192) == 128
    assert max_draft_tokens(100) == 100 - TOKENS_BESIDE_DRAFTS


def _vllm_site_packages() -> Path | None:
    venv = Path(
        os.environ.get("PEAGLE_VLLM_VENV")
        or Path.home() / ".cache" / "peagle-deploy" / "vllm-0.30.0"
    )
    found = sorted(venv.glob("lib/python*/site-packages/vllm"))
    return found[0] if found else None


@pytest.mark.contract
def test_vllm_caps_draft_tokens_per_step_at_the_bound() -> None:
    """The source of VLLM_MAX_DRAFT_TOKENS: vLLM 0.30.0's rejection sampler."""
    vllm = _vllm_site_packages()
    if vllm is None:
        reason = "no CPU-only vLLM venv: run scripts/vllm-env.sh to build it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI must run the vLLM contract tests: " + reason)
        pytest.skip(reason)
    source = (vllm / "v1" / "sample" / "rejection_sampler.py").read_text()
    assert f"MAX_SPEC_LEN = {VLLM_MAX_DRAFT_TOKENS}\n" in source
    assert "assert metadata.max_spec_len <= MAX_SPEC_LEN" in source
    scheduler = (vllm / "v1" / "core" / "sched" / "scheduler.py").read_text()
    assert "- request.num_computed_tokens\n                - self.num_sampled_tokens_per_step" in (
        scheduler
    )
