"""Resolve a spec's model reference into the model's own sources and defaults.

Three kinds of reference: a catalog key (plain data, no AWS SDK), `custom` (everything
from the spec), or a JumpStart model id (catalog.jumpstart, which imports the sagemaker
SDK only when it runs). The spec's overrides are applied by the planner
(peagle_deploy.plan.resolve), which records where each value came from.
"""

from __future__ import annotations

import os

from peagle_deploy.catalog.jumpstart import is_jumpstart_candidate, resolve_jumpstart
from peagle_deploy.catalog.models import MODELS, ModelEntry, get_model
from peagle_deploy.catalog.near_miss import CUSTOM, near_misses
from peagle_deploy.catalog.source import ModelSource
from peagle_deploy.errors import InputError
from peagle_deploy.extras import require
from peagle_deploy.spec.empty import check_not_empty
from peagle_deploy.spec.models import DeploymentSpec

DEFAULT_REGION = "us-east-1"


REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
"""Where the region comes from when the spec names none (botocore's order)."""


def environment_region() -> tuple[str, str] | None:
    """(variable, value) of the first region variable that is set, or None.

    Set but empty is an error naming the variable (`spec.empty`): a CI variable that
    was never defined must not quietly mean us-east-1.
    """
    for variable in REGION_VARIABLES:
        value = os.environ.get(variable)
        if value is not None:
            check_not_empty(variable, value.strip())
            return variable, value
    return None


def region_of(spec: DeploymentSpec) -> tuple[str, str]:
    """(region, what named it): the spec's `region`, else AWS_REGION / AWS_DEFAULT_REGION
    (named by the variable, for errors), else us-east-1 (named `region`)."""
    if spec.region:
        return spec.region, "region"
    found = environment_region()
    if found is not None:
        return found[1], found[0]
    return DEFAULT_REGION, "region"


def resolve_region(spec: DeploymentSpec) -> str:
    """Spec region, else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1."""
    return region_of(spec)[0]


def _from_catalog(entry: ModelEntry, region: str) -> ModelSource:
    return ModelSource(
        name=entry.key,
        kind="catalog",
        image_uri=None,
        model_data_uri=entry.model_data_uri_for(region),
        drafter_uri=entry.drafter_uri_for(region),
        drafter_kind=entry.drafter_kind,
        drafter_parallel_tokens=entry.drafter_parallel_tokens.value,
        default_num_speculative_tokens=entry.default_num_speculative_tokens.value,
        default_instance_type=entry.default_instance_type.value,
        default_tensor_parallel_size=entry.default_tensor_parallel_size.value,
        default_max_model_len=entry.default_max_model_len.value,
        weights_gb=entry.weights_gb.value,
        drafter_weights_gb=entry.drafter_weights_gb.value,
        kv_cache_gb_per_1k_tokens=entry.kv_cache_gb_per_1k_tokens.value,
        gated=entry.gated.value,
        architecture=entry.architecture.value,
        drafter_mask_token_key=entry.drafter_mask_token_key.value,
        model_data_download_timeout_s=entry.model_data_download_timeout_s.value,
        container_startup_health_check_timeout_s=(
            entry.container_startup_health_check_timeout_s.value
        ),
        isolated_env=dict(entry.isolated_env.value),
        catalog=entry,
    )


CUSTOM_SOURCE = ModelSource(
    name=CUSTOM,
    kind="custom",
    image_uri=None,
    model_data_uri=None,
    drafter_uri=None,
    drafter_kind=None,
    drafter_parallel_tokens=None,
    default_num_speculative_tokens=3,
    default_instance_type=None,
    default_tensor_parallel_size=1,
    default_max_model_len=None,
    weights_gb=None,
    drafter_weights_gb=0.0,
    kv_cache_gb_per_1k_tokens=None,
    gated=False,
)
"""`model: custom`: every source comes from the spec."""


def _jumpstart(spec: DeploymentSpec, region: str) -> ModelSource:
    """A JumpStart id. Refused offline, before the sagemaker SDK is needed: a near miss
    of a known name (catalog.near_miss), a reference no JumpStart id looks like, and,
    without the `jumpstart` extra, any id (one line naming the extra)."""
    meant = near_misses(spec.model)
    if meant:
        raise InputError(
            "model",
            f"unknown model {spec.model!r}; did you mean {' or '.join(meant)}?",
            [*MODELS, CUSTOM],
        )
    if not is_jumpstart_candidate(spec.model):
        raise InputError(
            "model", f"unknown model {spec.model!r}", [*MODELS, CUSTOM, "a JumpStart model id"]
        )
    require(
        "sagemaker.core",
        f"model {spec.model!r} is not a catalog key ({', '.join(MODELS)}); "
        "resolving it as a JumpStart model id",
    )
    return resolve_jumpstart(
        spec.model, region, accept_eula=spec.accept_eula, instance_type=spec.instance_type
    )


def resolve_model(spec: DeploymentSpec, region: str) -> ModelSource:
    """The sources of the spec's model reference; InputError for an unknown reference.

    The spec's `accept_eula` and `instance_type` matter to JumpStart only (its EULA
    refusals, and the image it publishes for the instance type).
    """
    entry = get_model(spec.model)
    if entry is not None:
        return _from_catalog(entry, region)
    if spec.model == CUSTOM:
        return CUSTOM_SOURCE
    return _jumpstart(spec, region)
