"""What a spec's model reference resolves to, before the spec's overrides are applied.

Its own module so that the catalog path (catalog.resolve) and the JumpStart path
(peagle_deploy.jumpstart) share it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from peagle_deploy.catalog.models import ModelEntry
from peagle_deploy.findings import PlanWarning
from peagle_deploy.spec.models import DrafterKind


@dataclass
class ResolvedModel:
    """Concrete sources and defaults for one spec, before spec overrides are applied."""

    name: str
    """Short name used in resource names and tags."""
    source: Literal["catalog", "jumpstart", "custom"]
    image_uri: str | None
    """The source's image (JumpStart); None: the plan picks a default image whose engine
    accepts the rendered deployment."""
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
    architecture: str | None = None
    """The target's model class (the engine must register it); None when unknown."""
    drafter_mask_token_key: str | None = None
    """config.json key holding the P-EAGLE head's mask-token id; None when unknown."""
    model_data_download_timeout_s: int | None = None
    """The source's ModelDataDownloadTimeoutInSeconds (the spec's value wins)."""
    container_startup_health_check_timeout_s: int | None = None
    """The source's ContainerStartupHealthCheckTimeoutInSeconds (the spec's value wins)."""
    isolated_env: dict[str, str] = field(default_factory=dict)
    """Environment the model needs when the container has no network access."""
    catalog: ModelEntry | None = None
    notes: list[PlanWarning] = field(default_factory=list)
    """Warnings about what was resolved (unverified values, assumptions)."""
