"""Render SageMaker request dictionaries from a fully resolved deployment.

Pure functions of `RenderInput`: both the boto3 path (SDK) and the CDK path (custom
resource) send exactly these dictionaries, so the two cannot drift. Nothing here
validates; peagle_deploy.validation does that before rendering.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from peagle_serve.contract import (
    DRAFTER_TRAINED_TOKENS_ENV,
    ENDPOINT_NAME_ENV,
    K_SCHEDULE_FIELD,
    MODEL_DIR,
    MODEL_ENV,
    SPECULATIVE_CONFIG_ENV,
    drafter_mount_path,
)

from peagle_deploy.spec.models import RolloutSpec, ScalingSpec, SpeculativeMode

VARIANT_NAME = "AllTraffic"
"""The one production variant of a peagle endpoint."""

TENSOR_PARALLEL_ENV = "SM_VLLM_TENSOR_PARALLEL_SIZE"
MAX_MODEL_LEN_ENV = "SM_VLLM_MAX_MODEL_LEN"
RENDERED_ENV_KEYS = (MODEL_ENV, TENSOR_PARALLEL_ENV, MAX_MODEL_LEN_ENV, SPECULATIVE_CONFIG_ENV)
"""Environment keys the renderer owns; specs set them through their own fields."""


@dataclass(frozen=True)
class RenderInput:
    """Everything the requests depend on, with every default already filled in."""

    image_uri: str
    model_data_source: dict[str, Any]
    drafter_data_source: dict[str, Any] | None
    drafter_channel: str
    mode: SpeculativeMode
    num_speculative_tokens: int
    k_schedule: list[tuple[int, int, int]] | None
    tensor_parallel_size: int
    max_model_len: int | None
    base_env: dict[str, str]
    user_env: dict[str, str]
    execution_role_arn: str
    network_isolation: bool
    subnet_ids: list[str]
    security_group_ids: list[str]
    instance_type: str
    initial_instance_count: int
    model_data_download_timeout_s: int
    container_startup_health_check_timeout_s: int
    volume_size_gb: int | None
    kms_key_id: str | None
    routing_strategy: str | None
    inference_ami_version: str | None
    rollout: RolloutSpec
    scaling: ScalingSpec | None = None
    drafter_trained_tokens: int | None = None
    """Parallel tokens the drafter was trained for; the container's preflight warns above it."""
    endpoint_name: str | None = None
    """Dimension of the container's acceptance metric lines (peagle-serve image)."""


def s3_data_source(uri: str, *, accept_eula: bool = False) -> dict[str, Any]:
    """S3DataSource for a prefix (`.../`, uncompressed) or a `.tar.gz` object."""
    if uri.endswith(".tar.gz"):
        source: dict[str, Any] = {"S3Uri": uri, "S3DataType": "S3Object", "CompressionType": "Gzip"}
    else:
        source = {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
    if accept_eula:
        source["ModelAccessConfig"] = {"AcceptEula": True}
    return source


def speculative_config(ri: RenderInput) -> dict[str, Any] | None:
    """The vLLM `--speculative-config` object of a deployment, or None without speculation."""
    return speculative_config_for(
        ri.mode, ri.drafter_channel, ri.num_speculative_tokens, ri.k_schedule
    )


def speculative_config_for(
    mode: SpeculativeMode,
    drafter_channel: str,
    num_speculative_tokens: int,
    k_schedule: list[tuple[int, int, int]] | None,
) -> dict[str, Any] | None:
    """The `--speculative-config` object, or None for mode `none`.

    `method` is always `eagle3` (P-EAGLE heads are EAGLE-3 heads; without an explicit
    method vLLM guesses from the drafter's name and gets P-EAGLE heads wrong).
    """
    if mode == "none":
        return None
    config: dict[str, Any] = {
        "method": "eagle3",
        "model": drafter_mount_path(drafter_channel),
        "num_speculative_tokens": num_speculative_tokens,
    }
    if mode == "p-eagle":
        config["parallel_drafting"] = True
    if k_schedule:
        config[K_SCHEDULE_FIELD] = [list(r) for r in k_schedule]
    return config


def speculative_config_json(config: dict[str, Any]) -> str:
    """Compact, key-sorted JSON: the same config always gives the same string (and name)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def environment(ri: RenderInput) -> dict[str, str]:
    """Container environment: the source's env, then the rendered keys, then the user's."""
    env = dict(ri.base_env)
    env[MODEL_ENV] = MODEL_DIR
    env[TENSOR_PARALLEL_ENV] = str(ri.tensor_parallel_size)
    if ri.max_model_len is not None:
        env[MAX_MODEL_LEN_ENV] = str(ri.max_model_len)
    config = speculative_config(ri)
    if config is None:
        env.pop(SPECULATIVE_CONFIG_ENV, None)
    else:
        env[SPECULATIVE_CONFIG_ENV] = speculative_config_json(config)
        if ri.mode == "p-eagle" and ri.drafter_trained_tokens is not None:
            # read only by the peagle-serve image's preflight; AWS's images ignore it
            env[DRAFTER_TRAINED_TOKENS_ENV] = str(ri.drafter_trained_tokens)
        if ri.endpoint_name:
            # read only by peagle-serve's metric lines; AWS's images ignore it
            env[ENDPOINT_NAME_ENV] = ri.endpoint_name
    env.update(ri.user_env)
    return env


def create_model(ri: RenderInput, model_name: str, tags: list[dict[str, str]]) -> dict[str, Any]:
    """CreateModel kwargs; the drafter is an additional model data source."""
    container: dict[str, Any] = {
        "Image": ri.image_uri,
        "ModelDataSource": {"S3DataSource": dict(ri.model_data_source)},
    }
    if ri.mode != "none" and ri.drafter_data_source is not None:
        container["AdditionalModelDataSources"] = [
            {"ChannelName": ri.drafter_channel, "S3DataSource": dict(ri.drafter_data_source)}
        ]
    container["Environment"] = environment(ri)
    request: dict[str, Any] = {
        "ModelName": model_name,
        "PrimaryContainer": container,
        "ExecutionRoleArn": ri.execution_role_arn,
        "EnableNetworkIsolation": ri.network_isolation,
    }
    if ri.subnet_ids or ri.security_group_ids:
        request["VpcConfig"] = {
            "SecurityGroupIds": list(ri.security_group_ids),
            "Subnets": list(ri.subnet_ids),
        }
    request["Tags"] = list(tags)
    return request


def production_variant(ri: RenderInput, model_name: str) -> dict[str, Any]:
    """The single production variant; VolumeSizeInGB only where the family allows it."""
    variant: dict[str, Any] = {
        "VariantName": VARIANT_NAME,
        "ModelName": model_name,
        "InstanceType": ri.instance_type,
        "InitialInstanceCount": ri.initial_instance_count,
        "InitialVariantWeight": 1.0,
        "ModelDataDownloadTimeoutInSeconds": ri.model_data_download_timeout_s,
        "ContainerStartupHealthCheckTimeoutInSeconds": ri.container_startup_health_check_timeout_s,
    }
    if ri.volume_size_gb is not None:
        variant["VolumeSizeInGB"] = ri.volume_size_gb
    if ri.routing_strategy is not None:
        variant["RoutingConfig"] = {"RoutingStrategy": ri.routing_strategy}
    if ri.inference_ami_version is not None:
        variant["InferenceAmiVersion"] = ri.inference_ami_version
    return variant


def create_endpoint_config(
    ri: RenderInput, config_name: str, model_name: str, tags: list[dict[str, str]]
) -> dict[str, Any]:
    """CreateEndpointConfig kwargs."""
    request: dict[str, Any] = {
        "EndpointConfigName": config_name,
        "ProductionVariants": [production_variant(ri, model_name)],
    }
    if ri.kms_key_id is not None:
        request["KmsKeyId"] = ri.kms_key_id
    request["Tags"] = list(tags)
    return request


def create_endpoint(
    endpoint_name: str, config_name: str, tags: list[dict[str, str]]
) -> dict[str, Any]:
    """CreateEndpoint kwargs."""
    return {"EndpointName": endpoint_name, "EndpointConfigName": config_name, "Tags": list(tags)}


def deployment_config(rollout: RolloutSpec) -> dict[str, Any]:
    """Blue/green DeploymentConfig; alarms (if any) roll the update back automatically."""
    strategy = rollout.strategy
    routing: dict[str, Any] = {"WaitIntervalInSeconds": rollout.wait_interval_s}
    if strategy == "canary":
        routing["Type"] = "CANARY"
        routing["CanarySize"] = {"Type": "CAPACITY_PERCENT", "Value": rollout.canary_percent}
    elif strategy == "linear":
        routing["Type"] = "LINEAR"
        routing["LinearStepSize"] = {
            "Type": "CAPACITY_PERCENT",
            "Value": rollout.linear_step_percent,
        }
    else:
        routing["Type"] = "ALL_AT_ONCE"
    config: dict[str, Any] = {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": dict(sorted(routing.items())),
            "TerminationWaitInSeconds": rollout.termination_wait_s,
            "MaximumExecutionTimeoutInSeconds": rollout.max_execution_timeout_s,
        }
    }
    if rollout.alarms:
        config["AutoRollbackConfiguration"] = {
            "Alarms": [{"AlarmName": name} for name in rollout.alarms]
        }
    return config


def update_endpoint(endpoint_name: str, config_name: str, rollout: RolloutSpec) -> dict[str, Any]:
    """UpdateEndpoint kwargs: roll the endpoint to `config_name` blue/green."""
    return {
        "EndpointName": endpoint_name,
        "EndpointConfigName": config_name,
        "DeploymentConfig": deployment_config(rollout),
    }


def autoscaling(endpoint_name: str, scaling: ScalingSpec | None) -> dict[str, Any] | None:
    """Application Auto Scaling requests (RegisterScalableTarget, PutScalingPolicy)."""
    if scaling is None:
        return None
    resource_id = f"endpoint/{endpoint_name}/variant/{VARIANT_NAME}"
    dimension = "sagemaker:variant:DesiredInstanceCount"
    return {
        "register_scalable_target": {
            "ServiceNamespace": "sagemaker",
            "ResourceId": resource_id,
            "ScalableDimension": dimension,
            "MinCapacity": scaling.min_instances,
            "MaxCapacity": scaling.max_instances,
        },
        "put_scaling_policy": {
            "PolicyName": f"{endpoint_name}-invocations",
            "ServiceNamespace": "sagemaker",
            "ResourceId": resource_id,
            "ScalableDimension": dimension,
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": float(scaling.target_invocations_per_instance),
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
            },
        },
    }
