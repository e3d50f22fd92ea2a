"""spec -> Deployment: fill every default once, recording where each value came from.

The order of precedence, for every value: the spec (which the CLI flags and SDK keywords
set), then the model's source (catalog entry or JumpStart), then the project's default.
Resolve refuses only what it cannot fill: an unknown model reference, a region that is
not a region name or has no default image (it keys every lookup), a custom model without
an instance type. Every other rule is a check (peagle_deploy.plan.check) on the
Deployment this returns, including "no default image can serve this", which resolve
records (`Deployment.unserved`) for the engine check to report in its turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from peagle_serve.contract import (
    DRAFTER_TRAINED_TOKENS_ENV,
    ENDPOINT_NAME_ENV,
    K_SCHEDULE_FIELD,
    MODEL_DIR,
    MODEL_ENV,
    SPECULATIVE_CONFIG_ENV,
    drafter_mount_path,
)

from peagle_deploy.catalog.engines import CUDA13_AMI, default_image, identify
from peagle_deploy.catalog.instances import INSTANCE_TYPES, get_instance
from peagle_deploy.catalog.resolve import region_of, resolve_model
from peagle_deploy.catalog.source import ModelSource
from peagle_deploy.deployment import (
    MAX_MODEL_LEN_ENV,
    TENSOR_PARALLEL_ENV,
    DataSource,
    Deployment,
    Drafter,
    Origin,
    Speculation,
    engine_needs,
)
from peagle_deploy.errors import InputError
from peagle_deploy.naming import default_endpoint_name
from peagle_deploy.secret_refs import parse_secret_refs
from peagle_deploy.spec.models import (
    DeploymentSpec,
    DrafterKind,
    RolloutSpec,
    SpeculativeDecodingSpec,
    SpeculativeMode,
)
from peagle_deploy.validation.aws_shapes import check_region

DEFAULT_TIMEOUT_S = 1800
"""Model download and health-check timeout when neither the spec nor the model's source
(catalog, JumpStart config) gives one."""

PLACEHOLDER_ROLE_ARN = "arn:aws:iam::000000000000:role/peagle-placeholder-set-execution-role-arn"
"""Shown by `peagle plan` when no role is given; deploy refuses it (`has_placeholder_role`)."""

T = TypeVar("T")


class _Origins(dict[str, Origin]):
    """The origin of each resolved value, filled as the values are picked."""

    def pick(self, field: str, *options: tuple[Origin, T | None]) -> T | None:
        """The first option that is set; records its origin under `field`."""
        for origin, value in options:
            if value is not None:
                self[field] = origin
                return value
        return None


def resolve(spec: DeploymentSpec, *, source: ModelSource | None = None) -> Deployment:
    """The Deployment of `spec`; InputError when a value cannot be resolved.

    `source` reuses a model reference already resolved for the same model, region and
    instance type (a JumpStart id is read once): see `with_speculative`.
    """
    origins = _Origins()
    region, region_field = region_of(spec)
    origins["region"] = (
        "spec" if spec.region else "environment" if region_field != "region" else "default"
    )
    check_region(region, region_field)
    if source is None:
        source = resolve_model(spec, region)
    own = _own(source)
    custom = spec.custom
    model, endpoint_name = _names(spec, source, origins)
    speculation = _speculation(spec, source, origins)
    image_uri, image_field, unserved = _image(spec, source, region, speculation, origins)
    engine = identify(image_uri, spec.vllm_version)
    instance_type, tp, max_model_len = _capacity(spec, source, origins)
    role = origins.pick(
        "execution_role_arn", ("spec", spec.execution_role_arn), ("default", PLACEHOLDER_ROLE_ARN)
    )
    assert role is not None
    return Deployment(
        spec=spec,
        source=source,
        region=region,
        region_field=region_field,
        model=model,
        endpoint_name=endpoint_name,
        image_uri=image_uri,
        image_field=image_field,
        engine=engine,
        unserved=unserved,
        model_data=_model_data(spec, source, origins),
        speculative=speculation,
        instance_type=instance_type,
        instance=get_instance(instance_type),
        tensor_parallel_size=tp,
        max_model_len=max_model_len,
        weights_gb=origins.pick(
            "custom.weights_gb",
            ("spec", custom.weights_gb if custom else None),
            (own, source.weights_gb),
        ),
        kv_cache_gb_per_1k_tokens=origins.pick(
            "custom.kv_cache_gb_per_1k_tokens",
            ("spec", custom.kv_cache_gb_per_1k_tokens if custom else None),
            (own, source.kv_cache_gb_per_1k_tokens),
        ),
        environment=container_environment(
            spec,
            source,
            speculation,
            tensor_parallel_size=tp,
            max_model_len=max_model_len,
            endpoint_name=endpoint_name,
        ),
        secret_refs=parse_secret_refs(spec.secrets, spec.env, region=region),
        execution_role_arn=role,
        model_data_download_timeout_s=_timeout(spec, source, origins, "model_data_download"),
        container_startup_health_check_timeout_s=_timeout(
            spec, source, origins, "container_startup_health_check"
        ),
        inference_ami_version=origins.pick(
            "inference_ami_version",
            ("spec", spec.inference_ami_version),
            ("default", CUDA13_AMI if engine.cuda13 else None),
        ),
        rollout=_rollout(spec, origins),
        origins=dict(origins),
    )


def _own(source: ModelSource) -> Origin:
    """The origin of a model source's own values (a custom model's are defaults)."""
    return "default" if source.kind == "custom" else source.kind


def _capacity(
    spec: DeploymentSpec, source: ModelSource, origins: _Origins
) -> tuple[str, int, int | None]:
    """Instance type, tensor parallel size and max_model_len."""
    own = _own(source)
    instance_type = origins.pick(
        "instance_type", ("spec", spec.instance_type), (own, source.default_instance_type)
    )
    if instance_type is None:
        raise InputError("instance_type", "is required for this model", list(INSTANCE_TYPES))
    tp = origins.pick(
        "tensor_parallel_size",
        ("spec", spec.tensor_parallel_size),
        (own, source.default_tensor_parallel_size),
    )
    assert tp is not None
    max_model_len = origins.pick(
        "max_model_len", ("spec", spec.max_model_len), (own, source.default_max_model_len)
    )
    return instance_type, tp, max_model_len


def endpoint_name_for(spec: DeploymentSpec) -> str:
    """The endpoint name `resolve(spec)` gives, resolving only the model reference."""
    if spec.endpoint_name is not None:
        return spec.endpoint_name
    return _names(spec, resolve_model(spec, region_of(spec)[0]), _Origins())[1]


def _names(spec: DeploymentSpec, source: ModelSource, origins: _Origins) -> tuple[str, str]:
    """The short model name (`custom.name`, else the source's) and the endpoint name."""
    own = _own(source)
    custom_name = spec.custom.name if spec.custom is not None else None
    model = origins.pick("custom.name", ("spec", custom_name), (own, source.name))
    assert model is not None
    endpoint_name = origins.pick(
        "endpoint_name",
        ("spec", spec.endpoint_name),
        ("default", default_endpoint_name(model, spec.stage)),
    )
    assert endpoint_name is not None
    return model, endpoint_name


def with_speculative(deployment: Deployment, speculative: SpeculativeDecodingSpec) -> Deployment:
    """The same deployment with other speculative settings (K, mode, drafter), resolved
    by the same rules from the same model source: a candidate to compare with it.

    The result's endpoint name is the incumbent's unless the spec names one; run
    `check` on it like on any Deployment.
    """
    spec = deployment.spec.model_copy(update={"speculative": speculative})
    return resolve(spec, source=deployment.source)


def _rollout(spec: DeploymentSpec, origins: _Origins) -> RolloutSpec:
    origins["rollout.strategy"] = "spec" if spec.rollout.strategy is not None else "default"
    return spec.rollout.resolved(spec.initial_instance_count)


def _timeout(spec: DeploymentSpec, source: ModelSource, origins: _Origins, name: str) -> int:
    field = f"{name}_timeout_s"
    own = _own(source)
    value = origins.pick(
        field,
        ("spec", getattr(spec, field)),
        (own, getattr(source, field)),
        ("default", DEFAULT_TIMEOUT_S),
    )
    assert value is not None
    return int(value)


def _model_data(spec: DeploymentSpec, source: ModelSource, origins: _Origins) -> DataSource:
    """The target's S3 source: `custom.model_data_uri`, else the model source's."""
    uri = spec.custom.model_data_uri if spec.custom is not None else None
    field = "custom.model_data_uri"
    if uri is not None:
        origins[field] = "spec"
        return DataSource(uri, field, s3_data_source(uri, accept_eula=source.gated))
    origins[field] = _own(source)
    if source.model_data_source is not None:
        ready = source.model_data_source
        return DataSource(str(ready["S3Uri"]), field, ready)
    uri = source.model_data_uri
    return DataSource(uri, field, s3_data_source(uri, accept_eula=source.gated) if uri else None)


def _speculation(spec: DeploymentSpec, source: ModelSource, origins: _Origins) -> Speculation:
    """Mode, K, K schedule and drafter; the `--speculative-config` object is built here."""
    s = spec.speculative
    own = _own(source)
    k = origins.pick(
        "speculative.num_speculative_tokens",
        ("spec", s.num_speculative_tokens),
        (own, source.default_num_speculative_tokens),
    )
    assert k is not None
    given = s.num_speculative_tokens_per_batch_size
    schedule = None if given is None else tuple(given)
    enabled = s.mode != "none"
    return Speculation(
        mode=s.mode,
        num_speculative_tokens=k,
        k_schedule=schedule,
        drafter_channel=s.drafter_channel,
        drafter=_drafter(spec, source, origins) if enabled else None,
        config=speculative_config(s.mode, s.drafter_channel, k, schedule),
    )


def _drafter(spec: DeploymentSpec, source: ModelSource, origins: _Origins) -> Drafter:
    """`speculative.drafter_uri` wins over `custom.drafter_uri`, which wins over the
    model's own drafter; a drafter the model source does not describe has an unknown
    mask-token key (and, unless `custom` says, an unknown trained token count)."""
    s, c = spec.speculative, spec.custom
    own = _own(source)
    c_uri = c.drafter_uri if c is not None else None
    c_tokens = c.drafter_parallel_tokens if c is not None else None
    field = "speculative.drafter_uri" if s.drafter_uri else "custom.drafter_uri"
    uri = origins.pick(field, ("spec", s.drafter_uri), ("spec", c_uri))
    eula = source.gated and spec.accept_eula
    if uri is not None:
        data = DataSource(uri, field, s3_data_source(uri, accept_eula=eula))
    elif source.drafter_data_source is not None:
        origins[field] = own
        ready = source.drafter_data_source
        data = DataSource(str(ready["S3Uri"]), field, ready)
    else:
        uri = origins.pick(field, (own, source.drafter_uri))
        data = DataSource(uri, field, s3_data_source(uri, accept_eula=eula) if uri else None)
    if s.drafter_uri:
        tokens = origins.pick("custom.drafter_parallel_tokens", ("spec", c_tokens))
    else:
        tokens = origins.pick(
            "custom.drafter_parallel_tokens",
            ("spec", c_tokens),
            (own, source.drafter_parallel_tokens),
        )
    assumed: DrafterKind | None = "p-eagle" if source.kind == "custom" and data.uri else None
    kind: DrafterKind | None = origins.pick(
        "speculative.drafter_kind",
        ("spec", s.drafter_kind),
        ("spec", c.drafter_kind if c is not None else None),
        (own, source.drafter_kind),
        ("default", assumed),
    )
    return Drafter(
        data=data,
        kind=kind,
        kind_field="speculative.drafter_kind" if s.drafter_kind else "custom.drafter_kind",
        trained_tokens=tokens,
        weights_gb=source.drafter_weights_gb,
        mask_token_key=None if s.drafter_uri or c_uri else source.drafter_mask_token_key,
    )


def _image(
    spec: DeploymentSpec,
    source: ModelSource,
    region: str,
    speculation: Speculation,
    origins: _Origins,
) -> tuple[str, str, InputError | None]:
    """The serving image and the field that named it: the spec's, the source's, else
    the first default image whose engine accepts the deployment (else the most preferred
    one, with the refusal the engine check reports)."""
    c_image = spec.custom.image_uri if spec.custom is not None else None
    given = origins.pick(
        "image_uri",
        ("spec", spec.image_uri),
        ("spec", c_image),
        ("jumpstart", source.image_uri),
    )
    if given is not None:
        field = "image_uri" if spec.image_uri else "custom.image_uri" if c_image else "model"
        return given, field, None
    origins["image_uri"] = "default"
    record, unserved = default_image(region, engine_needs(speculation, source))
    return record.uri(region), "image_uri", unserved


def s3_data_source(uri: str, *, accept_eula: bool = False) -> dict[str, Any]:
    """S3DataSource for a prefix (`.../`, uncompressed) or a `.tar.gz` object."""
    if uri.endswith(".tar.gz"):
        source: dict[str, Any] = {"S3Uri": uri, "S3DataType": "S3Object", "CompressionType": "Gzip"}
    else:
        source = {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
    if accept_eula:
        source["ModelAccessConfig"] = {"AcceptEula": True}
    return source


def speculative_config(
    mode: SpeculativeMode,
    drafter_channel: str,
    num_speculative_tokens: int,
    k_schedule: tuple[tuple[int, int, int], ...] | None,
) -> dict[str, Any] | None:
    """vLLM's `--speculative-config` object, or None for mode `none`.

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


def speculative_config_json(config: Mapping[str, Any]) -> str:
    """Compact, key-sorted JSON: the same config always gives the same string (and name)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def container_environment(
    spec: DeploymentSpec,
    source: ModelSource,
    speculation: Speculation,
    *,
    tensor_parallel_size: int,
    max_model_len: int | None,
    endpoint_name: str,
) -> dict[str, str]:
    """The source's env (plus what it needs offline), then the keys peagle-deploy
    renders, then the spec's `env`."""
    env = dict(source.base_env)
    if spec.network_isolation:
        env.update(source.isolated_env)
    env[MODEL_ENV] = MODEL_DIR
    env[TENSOR_PARALLEL_ENV] = str(tensor_parallel_size)
    if max_model_len is not None:
        env[MAX_MODEL_LEN_ENV] = str(max_model_len)
    if speculation.config is None:
        env.pop(SPECULATIVE_CONFIG_ENV, None)
    else:
        env[SPECULATIVE_CONFIG_ENV] = speculative_config_json(speculation.config)
        drafter = speculation.drafter
        if speculation.mode == "p-eagle" and drafter and drafter.trained_tokens is not None:
            # read only by the peagle-serve image's preflight; AWS's images ignore it
            env[DRAFTER_TRAINED_TOKENS_ENV] = str(drafter.trained_tokens)
        # read only by peagle-serve's metric lines; AWS's images ignore it
        env[ENDPOINT_NAME_ENV] = endpoint_name
    env.update(spec.env)
    return env
