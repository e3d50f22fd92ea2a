"""The deployment spec (pydantic v2) and its loader."""

from __future__ import annotations

from peagle_deploy.spec.loader import deep_merge, load_spec, spec_from_dict, spec_with
from peagle_deploy.spec.models import (
    CustomModel,
    DeploymentSpec,
    RolloutSpec,
    ScalingSpec,
    SpeculativeSpec,
    VpcSpec,
)

__all__ = [
    "CustomModel",
    "DeploymentSpec",
    "RolloutSpec",
    "ScalingSpec",
    "SpeculativeSpec",
    "VpcSpec",
    "deep_merge",
    "load_spec",
    "spec_from_dict",
    "spec_with",
]
