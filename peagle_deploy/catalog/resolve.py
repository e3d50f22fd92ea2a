"""Resolve a spec's model reference into concrete sources and defaults.

Three kinds of reference: a catalog key (plain data, no AWS SDK), `custom` (everything
from the spec), or a JumpStart model id (resolved through the sagemaker SDK, imported
only on that path: see peagle_deploy.jumpstart).
"""

from __future__ import annotations

import difflib
import os

from peagle_deploy.catalog.models import MODELS, ModelEntry, get_model
from peagle_deploy.catalog.resolved import ResolvedModel
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.spec.empty import check_not_empty
from peagle_deploy.spec.models import DeploymentSpec

DEFAULT_REGION = "us-east-1"
CUSTOM = "custom"


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


def resolve_region(spec: DeploymentSpec) -> str:
    """Spec region, else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1."""
    if spec.region:
        return spec.region
    found = environment_region()
    return found[1] if found else DEFAULT_REGION


def region_field(spec: DeploymentSpec) -> str:
    """What named the region `resolve_region` returns, for errors: the spec field or the
    environment variable."""
    found = None if spec.region else environment_region()
    return found[0] if found else "region"


def _from_catalog(entry: ModelEntry, region: str) -> ResolvedModel:
    return ResolvedModel(
        name=entry.key,
        source="catalog",
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


def _catalog_notes(
    entry: ModelEntry, resolved: ResolvedModel, region: str, uses_drafter: bool
) -> list[PlanWarning]:
    """Warn about unverified catalog locations the spec did not override."""
    notes = []
    if not entry.model_data_uri.verified and resolved.model_data_uri == entry.model_data_uri_for(
        region
    ):
        notes.append(
            PlanWarning(
                "custom.model_data_uri",
                f"model data for {entry.key} is an unverified default "
                f"({resolved.model_data_uri}); set custom.model_data_uri to your copy "
                f"of {entry.hf_model_id.value}",
            )
        )
    if (
        uses_drafter
        and not entry.drafter_uri.verified
        and resolved.drafter_uri == entry.drafter_uri_for(region)
        and resolved.drafter_data_source is None
    ):
        notes.append(
            PlanWarning(
                "custom.drafter_uri",
                f"drafter location for {entry.key} is an unverified default "
                f"({resolved.drafter_uri}); set custom.drafter_uri to be sure",
            )
        )
    return notes


def _custom() -> ResolvedModel:
    return ResolvedModel(
        name=CUSTOM,
        source="custom",
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


def _apply_custom(spec: DeploymentSpec, resolved: ResolvedModel) -> None:
    """`custom.*` and top-level overrides win over the catalog / JumpStart values."""
    c = spec.custom
    if c is not None:
        if c.image_uri:
            resolved.image_uri = c.image_uri
        if c.model_data_uri:
            resolved.model_data_uri = c.model_data_uri
            resolved.model_data_source = None
        if c.drafter_uri:
            resolved.drafter_uri = c.drafter_uri
            resolved.drafter_data_source = None
        if c.drafter_kind:
            resolved.drafter_kind = c.drafter_kind
        if c.drafter_parallel_tokens is not None:
            resolved.drafter_parallel_tokens = c.drafter_parallel_tokens
        if c.weights_gb is not None:
            resolved.weights_gb = c.weights_gb
        if c.kv_cache_gb_per_1k_tokens is not None:
            resolved.kv_cache_gb_per_1k_tokens = c.kv_cache_gb_per_1k_tokens
        if c.name:
            resolved.name = c.name
    s = spec.speculative
    if s.drafter_uri:
        resolved.drafter_uri = s.drafter_uri
        resolved.drafter_data_source = None
        # an overriding drafter is a different head: its trained token count is unknown
        resolved.drafter_parallel_tokens = c.drafter_parallel_tokens if c is not None else None
    if s.drafter_kind:
        resolved.drafter_kind = s.drafter_kind
    if spec.image_uri:
        resolved.image_uri = spec.image_uri
    if s.drafter_uri or (c is not None and c.drafter_uri):
        # a drafter the catalog does not describe: its mask-token key is unknown
        resolved.drafter_mask_token_key = None
    if resolved.source == "custom" and resolved.drafter_uri and resolved.drafter_kind is None:
        resolved.drafter_kind = "p-eagle"


def _jumpstart(spec: DeploymentSpec, region: str) -> ResolvedModel:
    """A JumpStart id (the sagemaker SDK is imported only on this path)."""
    close = difflib.get_close_matches(spec.model, [*MODELS, CUSTOM], n=1, cutoff=0.85)
    if close:
        raise InputError(
            "model", f"unknown model {spec.model!r}; did you mean {close[0]}?", [*MODELS, CUSTOM]
        )
    from peagle_deploy.jumpstart import is_jumpstart_candidate, resolve_jumpstart

    if not is_jumpstart_candidate(spec.model):
        raise InputError(
            "model", f"unknown model {spec.model!r}", [*MODELS, CUSTOM, "a JumpStart model id"]
        )
    return resolve_jumpstart(
        spec.model, region, accept_eula=spec.accept_eula, instance_type=spec.instance_type
    )


def resolve_model(spec: DeploymentSpec, region: str) -> ResolvedModel:
    """Concrete sources for the spec's model; InputError for an unknown reference."""
    entry = get_model(spec.model)
    if entry is not None:
        resolved = _from_catalog(entry, region)
    elif spec.model == CUSTOM:
        resolved = _custom()
    else:
        resolved = _jumpstart(spec, region)
    _apply_custom(spec, resolved)
    if entry is not None:
        uses_drafter = spec.speculative.mode != "none"
        resolved.notes.extend(_catalog_notes(entry, resolved, region, uses_drafter))
    return resolved
