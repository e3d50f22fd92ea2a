"""Resolve a spec's model reference into concrete sources and defaults.

Three kinds of reference: a catalog key (plain data, no AWS SDK), `custom` (everything
from the spec), or a JumpStart model id (resolved through the sagemaker SDK, imported
only on that path: see peagle_deploy.jumpstart).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from peagle_deploy.catalog.images import vllm_image_uri
from peagle_deploy.catalog.models import MODELS, ModelEntry, get_model
from peagle_deploy.errors import SpecError
from peagle_deploy.spec.models import DeploymentSpec, DrafterKind

DEFAULT_REGION = "us-east-1"
CUSTOM = "custom"


@dataclass
class ResolvedModel:
    """Concrete sources and defaults for one spec, before spec overrides are applied."""

    name: str
    """Short name used in resource names and tags."""
    source: Literal["catalog", "jumpstart", "custom"]
    image_uri: str
    model_data_uri: str | None
    drafter_uri: str | None
    drafter_kind: DrafterKind | None
    drafter_parallel_tokens: int | None
    default_num_speculative_tokens: int
    default_instance_type: str | None
    default_tensor_parallel_size: int
    default_max_model_len: int | None
    weights_gb: float | None
    drafter_weights_gb: float
    kv_cache_gb_per_1k_tokens: float | None
    gated: bool
    base_env: dict[str, str] = field(default_factory=dict)
    """Environment the model's source prescribes (JumpStart); rendered keys override it."""
    model_data_source: dict[str, Any] | None = None
    """A ready S3DataSource (JumpStart); else one is built from `model_data_uri`."""
    drafter_data_source: dict[str, Any] | None = None
    """A ready drafter S3DataSource (JumpStart); else built from `drafter_uri`."""
    catalog: ModelEntry | None = None
    notes: list[str] = field(default_factory=list)
    """Warnings about what was resolved (unverified values, assumptions)."""


def resolve_region(spec: DeploymentSpec) -> str:
    """Spec region, else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1."""
    return (
        spec.region
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or DEFAULT_REGION
    )


def _from_catalog(entry: ModelEntry, region: str) -> ResolvedModel:
    return ResolvedModel(
        name=entry.key,
        source="catalog",
        image_uri=vllm_image_uri(region),
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
        catalog=entry,
    )


def _catalog_notes(
    entry: ModelEntry, resolved: ResolvedModel, region: str, uses_drafter: bool
) -> list[str]:
    """Warn about unverified catalog locations the spec did not override."""
    notes = []
    if not entry.model_data_uri.verified and resolved.model_data_uri == entry.model_data_uri_for(
        region
    ):
        notes.append(
            f"model data for {entry.key} is an unverified default "
            f"({resolved.model_data_uri}); set custom.model_data_uri to your copy "
            f"of {entry.hf_model_id.value}"
        )
    if (
        uses_drafter
        and not entry.drafter_uri.verified
        and resolved.drafter_uri == entry.drafter_uri_for(region)
        and resolved.drafter_data_source is None
    ):
        notes.append(
            f"drafter location for {entry.key} is an unverified default "
            f"({resolved.drafter_uri}); set custom.drafter_uri to be sure"
        )
    return notes


def _custom(region: str) -> ResolvedModel:
    return ResolvedModel(
        name=CUSTOM,
        source="custom",
        image_uri=vllm_image_uri(region),
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
    if resolved.source == "custom" and resolved.drafter_uri and resolved.drafter_kind is None:
        resolved.drafter_kind = "p-eagle"


def _jumpstart(spec: DeploymentSpec, region: str) -> ResolvedModel:
    """A JumpStart id (the sagemaker SDK is imported only on this path)."""
    close = difflib.get_close_matches(spec.model, [*MODELS, CUSTOM], n=1, cutoff=0.85)
    if close:
        raise SpecError(
            "model", f"unknown model {spec.model!r}; did you mean {close[0]}?", [*MODELS, CUSTOM]
        )
    from peagle_deploy.jumpstart import is_jumpstart_candidate, resolve_jumpstart

    if not is_jumpstart_candidate(spec.model):
        raise SpecError(
            "model", f"unknown model {spec.model!r}", [*MODELS, CUSTOM, "a JumpStart model id"]
        )
    return resolve_jumpstart(
        spec.model, region, accept_eula=spec.accept_eula, instance_type=spec.instance_type
    )


def resolve_model(spec: DeploymentSpec, region: str) -> ResolvedModel:
    """Concrete sources for the spec's model; SpecError for an unknown reference."""
    entry = get_model(spec.model)
    if entry is not None:
        resolved = _from_catalog(entry, region)
    elif spec.model == CUSTOM:
        resolved = _custom(region)
    else:
        resolved = _jumpstart(spec, region)
    _apply_custom(spec, resolved)
    if entry is not None:
        uses_drafter = spec.speculative.mode != "none"
        resolved.notes.extend(_catalog_notes(entry, resolved, region, uses_drafter))
    return resolved
