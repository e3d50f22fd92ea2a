"""Deployment -> the SageMaker (and Application Auto Scaling) requests, with their names.

Pure functions of a checked `Deployment`: both the boto3 path (SDK) and the CDK path
(custom resource) send exactly these dictionaries, so the two cannot drift. Nothing here
fills a default or validates: resolve and check did that.

Names come from content: the model is named after its request body (without name and
tags) plus the endpoint name (so two stages never share, and delete, one model); the
endpoint config likewise. Re-deploying an unchanged spec is a no-op; a changed spec is a
new model/config the endpoint rolls to.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from peagle_deploy.deployment import Deployment
from peagle_deploy.naming import (
    DIGEST_LEN,
    MANAGED_TAG,
    MODEL_TAG,
    SPEC_HASH_TAG,
    STAGE_TAG,
    derived_name,
)
from peagle_deploy.spec.models import RolloutSpec, ScalingSpec

VARIANT_NAME = "AllTraffic"
"""The one production variant of a peagle endpoint."""


@dataclass(frozen=True)
class Requests:
    """What deploy sends, named."""

    model_name: str
    endpoint_config_name: str
    content_hash: str
    tags: list[dict[str, str]]
    create_model: dict[str, Any]
    create_endpoint_config: dict[str, Any]
    create_endpoint: dict[str, Any]
    update_endpoint: dict[str, Any]
    autoscaling: dict[str, Any] | None
    secret_refs: dict[str, str]
    """Environment variables given by reference: NAME -> `<secret ARN>[:<json-key>]`.
    Not in `create_model`: whoever calls CreateModel reads the values first
    (`with_secret_values`)."""


def render(dep: Deployment) -> Requests:
    """The requests of a checked deployment, named by their content."""
    endpoint_name = dep.endpoint_name
    model_body = _without(create_model(dep, "", []), "ModelName", "Tags")
    secret_refs = {name: ref.text for name, ref in sorted(dep.secret_refs.items())}
    # The execution role is left out of the name: a CDK stack creates its own role,
    # unknown at synth, and the same spec must name the same model through `cdk deploy`
    # and the SDK (which refuses to reuse a model created with another role: sdk.deploy).
    # A changed secret reference is a new model; without secrets the digest is as before.
    named = [endpoint_name, _without(model_body, "ExecutionRoleArn")]
    model_name = derived_name(
        endpoint_name, "m", _digest([*named, *([secret_refs] if secret_refs else [])])
    )
    config_body = _without(
        create_endpoint_config(dep, "", model_name, []), "EndpointConfigName", "Tags"
    )
    config_name = derived_name(endpoint_name, "c", _digest([endpoint_name, config_body]))
    rollout = deployment_config(dep.rollout)
    content_hash = _digest(
        [endpoint_name, model_body, config_body, rollout, *([secret_refs] if secret_refs else [])],
        12,
    )
    tags = [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": STAGE_TAG, "Value": dep.spec.stage},
        {"Key": SPEC_HASH_TAG, "Value": content_hash},
        {"Key": MODEL_TAG, "Value": dep.model},
        *({"Key": k, "Value": v} for k, v in sorted(dep.spec.tags.items())),
    ]
    return Requests(
        model_name=model_name,
        endpoint_config_name=config_name,
        content_hash=content_hash,
        tags=tags,
        create_model=create_model(dep, model_name, tags),
        create_endpoint_config=create_endpoint_config(dep, config_name, model_name, tags),
        create_endpoint=create_endpoint(endpoint_name, config_name, tags),
        update_endpoint={
            "EndpointName": endpoint_name,
            "EndpointConfigName": config_name,
            "DeploymentConfig": rollout,
        },
        secret_refs=secret_refs,
        autoscaling=autoscaling(endpoint_name, dep.spec.scaling, dep.spec.stage),
    )


def with_secret_values(create_model: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """The CreateModel request with the values of its `secrets` in the container's
    Environment: what SageMaker receives (and DescribeModel then shows)."""
    if not values:
        return create_model
    container = dict(create_model["PrimaryContainer"])
    container["Environment"] = {**container.get("Environment", {}), **values}
    return {**create_model, "PrimaryContainer": container}


def _digest(obj: Any, length: int = DIGEST_LEN) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _without(request: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in keys}


def create_model(dep: Deployment, model_name: str, tags: list[dict[str, str]]) -> dict[str, Any]:
    """CreateModel kwargs; the drafter is an additional model data source."""
    assert dep.model_data.s3_data_source is not None  # check refuses a missing model
    container: dict[str, Any] = {
        "Image": dep.image_uri,
        "ModelDataSource": {"S3DataSource": dict(dep.model_data.s3_data_source)},
    }
    drafter = dep.speculative.drafter
    if drafter is not None and drafter.data.s3_data_source is not None:
        container["AdditionalModelDataSources"] = [
            {
                "ChannelName": dep.speculative.drafter_channel,
                "S3DataSource": dict(drafter.data.s3_data_source),
            }
        ]
    container["Environment"] = dict(dep.environment)
    spec = dep.spec
    request: dict[str, Any] = {
        "ModelName": model_name,
        "PrimaryContainer": container,
        "ExecutionRoleArn": dep.execution_role_arn,
        "EnableNetworkIsolation": spec.network_isolation,
    }
    if spec.vpc is not None and (spec.vpc.subnet_ids or spec.vpc.security_group_ids):
        request["VpcConfig"] = {
            "SecurityGroupIds": list(spec.vpc.security_group_ids),
            "Subnets": list(spec.vpc.subnet_ids),
        }
    request["Tags"] = list(tags)
    return request


def production_variant(
    dep: Deployment, model_name: str, *, name: str = VARIANT_NAME, weight: float = 1.0
) -> dict[str, Any]:
    """One production variant; VolumeSizeInGB only where the family allows it."""
    spec = dep.spec
    variant: dict[str, Any] = {
        "VariantName": name,
        "ModelName": model_name,
        "InstanceType": dep.instance_type,
        "InitialInstanceCount": spec.initial_instance_count,
        "InitialVariantWeight": weight,
        "ModelDataDownloadTimeoutInSeconds": dep.model_data_download_timeout_s,
        "ContainerStartupHealthCheckTimeoutInSeconds": (
            dep.container_startup_health_check_timeout_s
        ),
    }
    if spec.volume_size_gb is not None:
        variant["VolumeSizeInGB"] = spec.volume_size_gb
    if spec.routing_strategy is not None:
        variant["RoutingConfig"] = {"RoutingStrategy": spec.routing_strategy}
    if dep.inference_ami_version is not None:
        variant["InferenceAmiVersion"] = dep.inference_ami_version
    return variant


def create_endpoint_config(
    dep: Deployment, config_name: str, model_name: str, tags: list[dict[str, str]]
) -> dict[str, Any]:
    """CreateEndpointConfig kwargs."""
    request: dict[str, Any] = {
        "EndpointConfigName": config_name,
        "ProductionVariants": [production_variant(dep, model_name)],
    }
    if dep.spec.kms_key_id is not None:
        request["KmsKeyId"] = dep.spec.kms_key_id
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


def autoscaling(
    endpoint_name: str, scaling: ScalingSpec | None, stage: str
) -> dict[str, Any] | None:
    """Application Auto Scaling requests (RegisterScalableTarget, PutScalingPolicy).

    The target is tagged with its stage when it is registered: a stage's CI role may
    change only targets of its own stage (`aws:ResourceTag`, infra/deploy_policy.py).
    """
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
            "Tags": {STAGE_TAG: stage},
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
