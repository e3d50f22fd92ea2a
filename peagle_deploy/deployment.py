"""The resolved deployment: every value the checks and the requests use, filled in once.

`peagle_deploy.plan.resolve` turns a `DeploymentSpec` into a `Deployment`: each default
is taken once, from the spec, the environment, the catalog, JumpStart, or the project's
default, and `origins` says which. Nothing after that fills a default again: the checks
(`peagle_deploy.validation`, listed in `peagle_deploy.plan.check`) and the renderer
(`peagle_deploy.plan.render`) take the Deployment and read what they need from it.

Values the spec states outright and nothing resolves (instance count, tags, VPC, KMS
key, scaling, ...) are read from `deployment.spec`: they are not copied here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from peagle_deploy.catalog.engines import Engine, EngineNeeds
from peagle_deploy.catalog.instances import InstanceType
from peagle_deploy.catalog.source import ModelSource
from peagle_deploy.errors import InputError
from peagle_deploy.secret_refs import SecretRef
from peagle_deploy.spec.models import DeploymentSpec, DrafterKind, RolloutSpec, SpeculativeMode

Origin = Literal["spec", "environment", "catalog", "jumpstart", "default"]
"""Where a resolved value came from: the spec (or a CLI flag / SDK keyword, which set
spec fields), a region variable, the catalog, JumpStart, or the project's default."""

TENSOR_PARALLEL_ENV = "SM_VLLM_TENSOR_PARALLEL_SIZE"
MAX_MODEL_LEN_ENV = "SM_VLLM_MAX_MODEL_LEN"


@dataclass(frozen=True)
class DataSource:
    """Where SageMaker downloads weights from (the target's or the drafter's)."""

    uri: str | None
    """S3 location; None when nothing names one (the checks refuse that)."""
    field: str
    """The spec field that names (or would name) it, for errors."""
    s3_data_source: Mapping[str, Any] | None
    """The request's S3DataSource (a ready one from JumpStart, or built from `uri`);
    None when `uri` is None."""


@dataclass(frozen=True)
class Drafter:
    """The speculator head and what is known about it."""

    data: DataSource
    kind: DrafterKind | None
    kind_field: str
    """The spec field to blame for a wrong kind."""
    trained_tokens: int | None
    """How many parallel tokens a P-EAGLE head was trained for; None when unknown."""
    weights_gb: float
    mask_token_key: str | None
    """config.json key holding a P-EAGLE head's mask-token id; None when unknown."""


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as vLLM will run it."""

    mode: SpeculativeMode
    num_speculative_tokens: int
    """K: the spec's, else the model's default (unused with mode `none`)."""
    k_schedule: tuple[tuple[int, int, int], ...] | None
    drafter_channel: str
    drafter: Drafter | None
    """None with mode `none`."""
    config: Mapping[str, Any] | None
    """vLLM's `--speculative-config` object (built once, here); None with mode `none`."""

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


@dataclass(frozen=True)
class Deployment:
    """One deployment with every default filled in, and where each value came from."""

    spec: DeploymentSpec
    source: ModelSource
    """What the spec's model reference gave, before the spec's overrides."""
    region: str
    region_field: str
    """What named the region (`region` or the environment variable), for errors."""
    model: str
    """Short model name used in resource names and the `peagle:model` tag."""
    endpoint_name: str
    image_uri: str
    image_field: str
    """The spec field that named the image (`image_uri`, `custom.image_uri`, or `model`
    for JumpStart's); `image_uri` for a default image."""
    engine: Engine
    unserved: InputError | None
    """Why no default image can serve the deployment (the engine check refuses with it,
    in its turn); `image_uri` is then the most preferred default image. None otherwise."""
    model_data: DataSource
    speculative: Speculation
    instance_type: str
    instance: InstanceType | None
    """The catalog's record of `instance_type`; None when unknown (the checks refuse it)."""
    tensor_parallel_size: int
    max_model_len: int | None
    weights_gb: float | None
    kv_cache_gb_per_1k_tokens: float | None
    environment: Mapping[str, str]
    """The container environment exactly as CreateModel sends it (without `secrets`)."""
    secret_refs: Mapping[str, SecretRef]
    """Environment variables given by reference (`secrets`), read at CreateModel time."""
    execution_role_arn: str
    model_data_download_timeout_s: int
    container_startup_health_check_timeout_s: int
    inference_ami_version: str | None
    rollout: RolloutSpec
    """The spec's rollout with its strategy filled in for the instance count."""
    origins: Mapping[str, Origin]
    """Where each resolved value came from, by its dotted spec field name."""

    @property
    def gated(self) -> bool:
        return self.source.gated

    def origin(self, field: str) -> Origin:
        return self.origins[field]


def engine_needs(speculation: Speculation, source: ModelSource) -> EngineNeeds:
    """What the deployment asks of its engine (to choose a default image, and to check
    a given one)."""
    drafter = speculation.drafter
    return EngineNeeds(
        speculative_config=speculation.config,
        architecture=source.architecture,
        mask_token_key=drafter.mask_token_key
        if drafter and speculation.mode == "p-eagle"
        else None,
    )
