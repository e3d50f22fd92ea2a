"""Deployment -> the SageMaker (and Application Auto Scaling) requests, with their names.

Pure functions of a checked `Deployment`: both the boto3 path (SDK) and the CDK path
(custom resource) send exactly these dictionaries, so the two cannot drift. Nothing here
fills a default or validates: resolve and check did that.

Names come from content, by one rule (`model_request`, `endpoint_config_request`): a
model is named after its request body (without name, tags and execution role) plus the
endpoint name (so two stages never share, and delete, one model); an endpoint config
likewise. Re-deploying an unchanged spec is a no-op; a changed spec is a new model/config
the endpoint rolls to.

One render step serves one variant (a deployment: `render`) or two (an experiment:
`render_variants` with the incumbent and the candidate, `plan.experiment_requests`):
each `Variant` is a Deployment served under a name, with a weight and a fleet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from peagle_serve.contract import VARIANT_NAME_ENV

from peagle_deploy.deployment import Deployment
from peagle_deploy.naming import (
    DIGEST_LEN,
    MANAGED_TAG,
    MODEL_TAG,
    SPEC_HASH_TAG,
    STAGE_TAG,
    DerivedKind,
    derived_name,
)
from peagle_deploy.spec.models import RolloutSpec, ScalingSpec

VARIANT_NAME = "AllTraffic"
"""The one production variant of a peagle endpoint (an experiment's incumbent)."""

RETAIN_COUNTS: dict[str, Any] = {
    "RetainAllVariantProperties": True,
    "ExcludeRetainedVariantProperties": [{"VariantPropertyType": "DesiredWeight"}],
}
"""UpdateEndpoint keeping each variant's current instance count (a variant of the same
name keeps its latest DesiredInstanceCount whatever the new config's
InitialInstanceCount) while the new config's weights apply (botocore's UpdateEndpoint
and VariantProperty; docs/platform-facts.md, "Deploying onto an autoscaled endpoint")."""


@dataclass(frozen=True)
class Variant:
    """One variant of an endpoint config: a Deployment served under a name.

    A variant other than `VARIANT_NAME` carries its name in its container's environment
    (`PEAGLE_VARIANT_NAME`), so the metric lines of its containers say which it is.
    """

    deployment: Deployment
    name: str = VARIANT_NAME
    weight: float = 1.0
    instances: int | None = None
    """None: the spec's initial_instance_count."""
    shadow: bool = False
    """In `ShadowProductionVariants` (a copy of the production variant's requests)."""

    @property
    def named(self) -> Deployment:
        """The Deployment with the variant's name in its environment (when not the default)."""
        dep = self.deployment
        if self.name == VARIANT_NAME:
            return dep
        return replace(dep, environment={**dep.environment, VARIANT_NAME_ENV: self.name})

    @property
    def instance_count(self) -> int:
        return self.instances or self.deployment.spec.initial_instance_count


@dataclass(frozen=True)
class VariantRequests:
    """An endpoint config over one or two variants, and each variant's CreateModel."""

    model_names: tuple[str, ...]
    """One per variant, in the variants' order."""
    create_models: tuple[dict[str, Any], ...]
    config_name: str
    create_endpoint_config: dict[str, Any]
    model_bodies: tuple[dict[str, Any], ...]
    """Each CreateModel without name and tags (what the content hash covers)."""
    config_body: dict[str, Any]


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
    secret_refs = {name: ref.text for name, ref in sorted(dep.secret_refs.items())}
    refs = [secret_refs] if secret_refs else []
    rollout = deployment_config(dep.rollout)
    draft = render_variants([Variant(dep)], [])
    content_hash = _digest(
        [endpoint_name, draft.model_bodies[0], draft.config_body, rollout, *refs], 12
    )
    tags = [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": STAGE_TAG, "Value": dep.spec.stage},
        {"Key": SPEC_HASH_TAG, "Value": content_hash},
        {"Key": MODEL_TAG, "Value": dep.model},
        *({"Key": k, "Value": v} for k, v in sorted(dep.spec.tags.items())),
    ]
    one = render_variants([Variant(dep)], tags)
    return Requests(
        model_name=one.model_names[0],
        endpoint_config_name=one.config_name,
        content_hash=content_hash,
        tags=tags,
        create_model=one.create_models[0],
        create_endpoint_config=one.create_endpoint_config,
        create_endpoint=create_endpoint(endpoint_name, one.config_name, tags),
        update_endpoint=update_endpoint(endpoint_name, one.config_name, rollout, dep.spec.scaling),
        secret_refs=secret_refs,
        autoscaling=autoscaling(endpoint_name, dep.spec.scaling, dep.spec.stage),
    )


def render_variants(
    variants: Sequence[Variant], tags: list[dict[str, str]], **config_fields: Any
) -> VariantRequests:
    """Each variant's CreateModel and one CreateEndpointConfig over all of them, named by
    content. The first variant's Deployment gives the endpoint, the secrets and the KMS
    key; `config_fields` are further CreateEndpointConfig fields (e.g. MetricsConfig)."""
    first = variants[0].deployment
    endpoint_name = first.endpoint_name
    refs = {name: ref.text for name, ref in sorted(first.secret_refs.items())}
    models = [model_request(v.named, endpoint_name, tags, refs) for v in variants]
    production = [
        production_variant(v.deployment, name, name=v.name, weight=v.weight, instances=v.instances)
        for v, (name, _) in zip(variants, models, strict=True)
        if not v.shadow
    ]
    shadows = [
        production_variant(v.deployment, name, name=v.name, weight=v.weight, instances=v.instances)
        for v, (name, _) in zip(variants, models, strict=True)
        if v.shadow
    ]
    config: dict[str, Any] = {"ProductionVariants": production}
    if shadows:
        config["ShadowProductionVariants"] = shadows
    if first.spec.kms_key_id is not None:
        config["KmsKeyId"] = first.spec.kms_key_id
    metrics = metrics_config(first)
    if metrics is not None:
        config["MetricsConfig"] = metrics
    config.update(config_fields)
    config_name, request = endpoint_config_request(endpoint_name, config, tags)
    return VariantRequests(
        model_names=tuple(name for name, _ in models),
        create_models=tuple(request for _, request in models),
        config_name=config_name,
        create_endpoint_config=request,
        model_bodies=tuple(_without(r, "ModelName", "Tags") for _, r in models),
        config_body=config,
    )


def model_request(
    dep: Deployment, endpoint_name: str, tags: list[dict[str, str]], secret_refs: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """A model's name and CreateModel: the naming rule of every model the planner makes.

    The execution role is left out of the name: a CDK stack creates its own role,
    unknown at synth, and the same spec must name the same model through `cdk deploy`
    and the SDK (which refuses to reuse a model created with another role: sdk.deploy).
    A changed secret reference is a new model; without secrets the digest is as before.
    """
    body = _without(create_model(dep, "", []), "ModelName", "Tags", "ExecutionRoleArn")
    name = named_by_content(endpoint_name, "m", body, *([secret_refs] if secret_refs else []))
    return name, create_model(dep, name, tags)


def endpoint_config_request(
    endpoint_name: str, body: dict[str, Any], tags: list[dict[str, str]]
) -> tuple[str, dict[str, Any]]:
    """An endpoint config's name and CreateEndpointConfig: named after its body (without
    name and tags) and the endpoint."""
    name = named_by_content(endpoint_name, "c", body)
    return name, {"EndpointConfigName": name, **body, "Tags": list(tags)}


def named_by_content(endpoint_name: str, kind: DerivedKind, *content: Any) -> str:
    """The naming rule: `<endpoint head>-<kind><digest of the endpoint name and content>`."""
    return derived_name(endpoint_name, kind, _digest([endpoint_name, *content]))


def metrics_config(dep: Deployment) -> dict[str, Any] | None:
    """CreateEndpointConfig's MetricsConfig when the spec states detailed observability
    (None leaves SageMaker's default: on for configs created after 2026-06-17)."""
    enabled = dep.spec.detailed_observability
    return None if enabled is None else {"EnableDetailedObservability": enabled}


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
    dep: Deployment,
    model_name: str,
    *,
    name: str = VARIANT_NAME,
    weight: float = 1.0,
    instances: int | None = None,
) -> dict[str, Any]:
    """One production variant; VolumeSizeInGB only where the family allows it."""
    spec = dep.spec
    variant: dict[str, Any] = {
        "VariantName": name,
        "ModelName": model_name,
        "InstanceType": dep.instance_type,
        "InitialInstanceCount": instances or spec.initial_instance_count,
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


def create_endpoint(
    endpoint_name: str, config_name: str, tags: list[dict[str, str]]
) -> dict[str, Any]:
    """CreateEndpoint kwargs."""
    return {"EndpointName": endpoint_name, "EndpointConfigName": config_name, "Tags": list(tags)}


def update_endpoint(
    endpoint_name: str,
    config_name: str,
    rollout: dict[str, Any],
    scaling: ScalingSpec | None,
) -> dict[str, Any]:
    """UpdateEndpoint kwargs: blue/green onto the new config. On a stage that scales, the
    variant keeps the instances its scaling gave it (`RETAIN_COUNTS`): the config's
    InitialInstanceCount is where a new endpoint starts, not what a running one should
    drop to on every deploy. Without `scaling`, the spec's count is the count."""
    request = {
        "EndpointName": endpoint_name,
        "EndpointConfigName": config_name,
        "DeploymentConfig": rollout,
    }
    if scaling is not None:
        request.update(json.loads(json.dumps(RETAIN_COUNTS)))  # a copy: requests are edited
    return request


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
            "PolicyName": scaling_policy_name(endpoint_name),
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


def scaling_policy_name(endpoint_name: str) -> str:
    """The name of the target-tracking policy a stage with `scaling:` puts on its variant."""
    return f"{endpoint_name}-invocations"
