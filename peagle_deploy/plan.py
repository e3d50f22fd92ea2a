"""spec -> Plan: the validated, named, exact SageMaker requests of one deployment.

`build_plan` makes no AWS call and needs no credentials. The same spec always gives the
same names: model and endpoint-config names end in a hash of their request content, so
re-deploying an unchanged spec is a no-op and a changed spec is a new model/config the
endpoint rolls to.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy import render
from peagle_deploy.catalog.engines import EngineNeeds
from peagle_deploy.catalog.instances import INSTANCE_TYPES
from peagle_deploy.catalog.resolve import region_field, resolve_model, resolve_region
from peagle_deploy.catalog.resolved import ResolvedModel
from peagle_deploy.errors import InputError
from peagle_deploy.findings import CdkIncompatibility, PlanWarning
from peagle_deploy.naming import DIGEST_LEN, default_endpoint_name, derived_name
from peagle_deploy.spec.models import DeploymentSpec, RolloutSpec
from peagle_deploy.validation import (
    aws_shapes,
    cloudformation,
    engine,
    fit,
    network,
    secrets,
    speculative,
    variant,
)
from peagle_deploy.validation import rollout as rollout_rules

DEFAULT_TIMEOUT_S = 1800
"""Model download and health-check timeout when neither the spec nor the model's source
(catalog, JumpStart config) gives one."""

PLACEHOLDER_ROLE_ARN = "arn:aws:iam::000000000000:role/peagle-placeholder-set-execution-role-arn"
"""Shown by `peagle plan` when no role is given; deploy refuses it (`has_placeholder_role`)."""

MANAGED_TAG = "peagle:managed"
STAGE_TAG = "peagle:stage"
SPEC_HASH_TAG = "peagle:spec-hash"
MODEL_TAG = "peagle:model"
MANAGED_TAG_COUNT = 4


@dataclass(frozen=True)
class Plan:
    """Everything `deploy` (SDK or CDK) sends to SageMaker, and what it was derived from."""

    spec: DeploymentSpec
    region: str
    model_name: str
    endpoint_config_name: str
    endpoint_name: str
    content_hash: str
    create_model: dict[str, Any]
    create_endpoint_config: dict[str, Any]
    create_endpoint: dict[str, Any]
    update_endpoint: dict[str, Any]
    tags: list[dict[str, str]]
    rollout: RolloutSpec
    """The spec's rollout with its default strategy resolved for the instance count."""
    warnings: list[PlanWarning]
    image_uri: str
    vllm_version: str | None
    """The vLLM the image carries, when the plan knows it (tag, own image, or the spec)."""
    engine_known_by: str
    """How the plan knows the image's vLLM (`unknown` when it does not)."""
    model_data_uri: str
    drafter_uri: str | None
    instance_type: str
    tensor_parallel_size: int
    max_model_len: int | None
    num_speculative_tokens: int | None
    speculative_config: dict[str, Any] | None
    execution_role_arn: str
    has_placeholder_role: bool
    model_source: str
    model_data_download_timeout_s: int
    container_startup_health_check_timeout_s: int
    inference_ami_version: str | None
    autoscaling: dict[str, Any] | None = None
    cdk_incompatibilities: list[CdkIncompatibility] = field(default_factory=list)
    secret_env_keys: list[str] = field(default_factory=list)
    """Environment keys whose values look like credentials (shown redacted by `to_json`)."""

    @property
    def names(self) -> dict[str, str]:
        """The three resource names."""
        return {
            "model": self.model_name,
            "endpoint_config": self.endpoint_config_name,
            "endpoint": self.endpoint_name,
        }

    def to_json(self, *, redact_secrets: bool = True) -> dict[str, Any]:
        """The machine-readable plan (`peagle plan --json` prints exactly this).

        Environment values that look like credentials are replaced by `<redacted>` unless
        `redact_secrets=False`: a plan is for showing and logging; the SDK sends
        `create_model` itself, which is never redacted.
        """
        create_model = (
            secrets.redact_environment(self.create_model) if redact_secrets else self.create_model
        )
        return {
            "create_model": create_model,
            "create_endpoint_config": self.create_endpoint_config,
            "create_endpoint": self.create_endpoint,
            "update_endpoint": self.update_endpoint,
            "autoscaling": self.autoscaling,
            "warnings": list(self.warnings),
            "engine": {
                "image": self.image_uri,
                "vllm": self.vllm_version,
                "known_by": self.engine_known_by,
            },
            "names": self.names,
            "content_hash": self.content_hash,
        }


def _digest(obj: Any, length: int = DIGEST_LEN) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _without(request: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in keys}


def build_plan(spec: DeploymentSpec) -> Plan:
    """Validate `spec` against the catalog and render the requests; InputError on refusal."""
    warnings: list[PlanWarning] = []
    region = resolve_region(spec)
    aws_shapes.check_region(region, region_field(spec))
    resolved = resolve_model(spec, region)
    warnings.extend(resolved.notes)

    endpoint_name = spec.endpoint_name or default_endpoint_name(resolved.name, spec.stage)
    aws_shapes.check_names(spec, endpoint_name)
    image_field = (
        "image_uri"
        if spec.image_uri
        else "custom.image_uri"
        if spec.custom is not None and spec.custom.image_uri
        else "model"
    )
    if resolved.image_uri is not None:
        warnings += aws_shapes.check_image(image_field, resolved.image_uri, region)
    model_data_source = _model_data_source(spec, resolved)

    instance_type = spec.instance_type or resolved.default_instance_type
    if instance_type is None:
        raise InputError("instance_type", "is required for this model", list(INSTANCE_TYPES))
    instance = fit.check_instance(instance_type)
    tp = spec.tensor_parallel_size or resolved.default_tensor_parallel_size
    warnings += fit.check_tensor_parallel(tp, instance)
    max_model_len = spec.max_model_len or resolved.default_max_model_len

    mode = spec.speculative.mode
    k = spec.speculative.num_speculative_tokens or resolved.default_num_speculative_tokens

    drafter_data_source: dict[str, Any] | None = None
    if mode != "none":
        drafter_field = (
            "speculative.drafter_uri" if spec.speculative.drafter_uri else "custom.drafter_uri"
        )
        if resolved.drafter_data_source is None:
            aws_shapes.check_drafter_uri(drafter_field, resolved.drafter_uri)
            assert resolved.drafter_uri is not None
            drafter_data_source = render.s3_data_source(
                resolved.drafter_uri, accept_eula=resolved.gated and spec.accept_eula
            )
        else:
            drafter_data_source = resolved.drafter_data_source
    warnings += speculative.check_speculative(
        spec,
        k=k,
        drafter_kind=resolved.drafter_kind,
        drafter_parallel_tokens=resolved.drafter_parallel_tokens,
        drafter_field="custom.drafter_kind",
        max_model_len=max_model_len,
    )
    k_schedule = spec.speculative.num_speculative_tokens_per_batch_size
    channel = spec.speculative.drafter_channel
    choice = engine.choose_engine(
        spec,
        image_uri=resolved.image_uri,
        image_field=image_field,
        region=region,
        needs=EngineNeeds(
            speculative_config=render.speculative_config_for(mode, channel, k, k_schedule),
            architecture=resolved.architecture,
            mask_token_key=resolved.drafter_mask_token_key if mode == "p-eagle" else None,
        ),
    )
    warnings += choice.warnings
    ami, ami_warnings = engine.choose_ami(spec, choice.engine)
    warnings += ami_warnings
    warnings += fit.check_fit(
        weights_gb=resolved.weights_gb,
        drafter_gb=resolved.drafter_weights_gb if mode != "none" else 0.0,
        kv_gb_per_1k=resolved.kv_cache_gb_per_1k_tokens,
        max_model_len=max_model_len,
        tp=tp,
        instance=instance,
    )
    warnings += variant.check_variant(spec, instance)
    warnings += cloudformation.cdk_warnings(spec)
    aws_shapes.check_kms_key_id(spec.kms_key_id, region)
    aws_shapes.check_vpc_ids(spec)
    warnings += network.check_network(spec)
    warnings += rollout_rules.check_rollout(spec)
    aws_shapes.check_role(spec.execution_role_arn)
    role = spec.execution_role_arn or PLACEHOLDER_ROLE_ARN
    if spec.execution_role_arn is None:
        warnings.append(
            PlanWarning(
                "execution_role_arn",
                "no execution_role_arn given: the plan shows a placeholder role; "
                "deploy needs --role-arn (or execution_role_arn in the spec)",
            )
        )
    aws_shapes.check_tags(spec.tags, MANAGED_TAG_COUNT)
    aws_shapes.check_model_data_kms_keys(spec.model_data_kms_key_arns)
    warnings += secrets.check_secrets(spec)
    warnings += secrets.check_logged_args(spec.env, choice.engine)
    download_timeout = (
        spec.model_data_download_timeout_s
        or resolved.model_data_download_timeout_s
        or DEFAULT_TIMEOUT_S
    )
    health_timeout = (
        spec.container_startup_health_check_timeout_s
        or resolved.container_startup_health_check_timeout_s
        or DEFAULT_TIMEOUT_S
    )
    base_env = dict(resolved.base_env)
    if spec.network_isolation:
        base_env.update(resolved.isolated_env)

    rollout = spec.rollout.resolved(spec.initial_instance_count)
    vpc = spec.vpc
    ri = render.RenderInput(
        image_uri=choice.image_uri,
        model_data_source=model_data_source,
        drafter_data_source=drafter_data_source,
        drafter_channel=spec.speculative.drafter_channel,
        mode=mode,
        num_speculative_tokens=k,
        k_schedule=spec.speculative.num_speculative_tokens_per_batch_size,
        tensor_parallel_size=tp,
        max_model_len=max_model_len,
        base_env=base_env,
        user_env=dict(spec.env),
        execution_role_arn=role,
        network_isolation=spec.network_isolation,
        subnet_ids=list(vpc.subnet_ids) if vpc else [],
        security_group_ids=list(vpc.security_group_ids) if vpc else [],
        instance_type=instance_type,
        initial_instance_count=spec.initial_instance_count,
        model_data_download_timeout_s=download_timeout,
        container_startup_health_check_timeout_s=health_timeout,
        volume_size_gb=spec.volume_size_gb,
        kms_key_id=spec.kms_key_id,
        routing_strategy=spec.routing_strategy,
        inference_ami_version=ami,
        rollout=rollout,
        scaling=spec.scaling,
        endpoint_name=endpoint_name,
        drafter_trained_tokens=resolved.drafter_parallel_tokens,
    )
    aws_shapes.check_env(spec.env, render.environment(ri))

    # Names from content: the model's request body (without name and tags) plus the
    # endpoint name (so two stages never share, and delete, one model).
    model_body = _without(render.create_model(ri, "", []), "ModelName", "Tags")
    model_name = derived_name(endpoint_name, "m", _digest([endpoint_name, model_body]))
    config_body = _without(
        render.create_endpoint_config(ri, "", model_name, []), "EndpointConfigName", "Tags"
    )
    config_name = derived_name(endpoint_name, "c", _digest([endpoint_name, config_body]))
    content_hash = _digest(
        [
            endpoint_name,
            model_body,
            config_body,
            render.deployment_config(rollout),
        ],
        12,
    )
    tags = [
        {"Key": MANAGED_TAG, "Value": "true"},
        {"Key": STAGE_TAG, "Value": spec.stage},
        {"Key": SPEC_HASH_TAG, "Value": content_hash},
        {"Key": MODEL_TAG, "Value": resolved.name},
        *({"Key": k_, "Value": v} for k_, v in sorted(spec.tags.items())),
    ]
    cdk_problems = cloudformation.cdk_incompatibilities(spec)
    return Plan(
        spec=spec,
        region=region,
        model_name=model_name,
        endpoint_config_name=config_name,
        endpoint_name=endpoint_name,
        content_hash=content_hash,
        create_model=render.create_model(ri, model_name, tags),
        create_endpoint_config=render.create_endpoint_config(ri, config_name, model_name, tags),
        create_endpoint=render.create_endpoint(endpoint_name, config_name, tags),
        update_endpoint=render.update_endpoint(endpoint_name, config_name, rollout),
        tags=tags,
        rollout=rollout,
        warnings=warnings,
        image_uri=choice.image_uri,
        vllm_version=choice.engine.vllm,
        engine_known_by=choice.engine.known_by,
        model_data_uri=str(model_data_source["S3Uri"]),
        drafter_uri=str(drafter_data_source["S3Uri"]) if drafter_data_source else None,
        instance_type=instance_type,
        tensor_parallel_size=tp,
        max_model_len=max_model_len,
        num_speculative_tokens=k if mode != "none" else None,
        speculative_config=render.speculative_config(ri),
        execution_role_arn=role,
        has_placeholder_role=spec.execution_role_arn is None,
        model_source=resolved.source,
        model_data_download_timeout_s=download_timeout,
        container_startup_health_check_timeout_s=health_timeout,
        inference_ami_version=ami,
        autoscaling=render.autoscaling(endpoint_name, spec.scaling),
        cdk_incompatibilities=cdk_problems,
        secret_env_keys=secrets.secret_env_keys(spec.env),
    )


def _model_data_source(spec: DeploymentSpec, resolved: ResolvedModel) -> dict[str, Any]:
    """The target's S3DataSource; gated models need accept_eula."""
    if resolved.gated and not spec.accept_eula:
        raise InputError(
            "accept_eula",
            f"{spec.model} is a gated model: its license must be accepted explicitly",
            "true (after reading the model's license)",
        )
    if resolved.model_data_source is not None:
        return resolved.model_data_source
    aws_shapes.check_model_data_uri("custom.model_data_uri", resolved.model_data_uri)
    assert resolved.model_data_uri is not None
    return render.s3_data_source(resolved.model_data_uri, accept_eula=resolved.gated)
