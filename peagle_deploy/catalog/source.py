"""What a spec's model reference gives: the model's own sources and defaults.

A catalog key, a JumpStart id or `custom` each resolve to one `ModelSource`; the spec's
overrides (`custom.*`, `speculative.drafter_*`, `image_uri`) are applied later, by the
planner's resolve step, which records for every value where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from peagle_deploy.catalog.models import ModelEntry
from peagle_deploy.spec.models import DrafterKind

SourceKind = Literal["catalog", "jumpstart", "custom"]


@dataclass(frozen=True)
class ModelSource:
    """Concrete sources and defaults of one model reference, before the spec's overrides."""

    name: str
    """Short name used in resource names and tags."""
    kind: SourceKind
    image_uri: str | None
    """The source's image (JumpStart); None: the planner picks a default image whose
    engine accepts the deployment."""
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
    base_env: Mapping[str, str] = field(default_factory=dict)
    """Environment the model's source prescribes (JumpStart); rendered keys override it."""
    model_data_source: Mapping[str, Any] | None = None
    """A ready S3DataSource (JumpStart); else one is built from `model_data_uri`."""
    drafter_data_source: Mapping[str, Any] | None = None
    """A ready drafter S3DataSource (JumpStart); else built from `drafter_uri`."""
    architecture: str | None = None
    """The target's model class (the engine must register it); None when unknown."""
    drafter_mask_token_key: str | None = None
    """config.json key holding the P-EAGLE head's mask-token id; None when unknown."""
    model_data_download_timeout_s: int | None = None
    """The source's ModelDataDownloadTimeoutInSeconds (the spec's value wins)."""
    container_startup_health_check_timeout_s: int | None = None
    """The source's ContainerStartupHealthCheckTimeoutInSeconds (the spec's value wins)."""
    isolated_env: Mapping[str, str] = field(default_factory=dict)
    """Environment the model needs when the container has no network access."""
    catalog: ModelEntry | None = None
    """The catalog entry the values come from (also a JumpStart id's matching entry)."""
