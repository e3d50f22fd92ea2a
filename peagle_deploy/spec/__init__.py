"""The deployment spec (pydantic v2) and its loader.

Names are imported on first use: the CLI imports `peagle_deploy.spec.flags` at
start-up (and reads `flag_table.json`) without paying for the pydantic models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peagle_deploy.spec.loader import deep_merge, load_spec, spec_from_dict, spec_with
    from peagle_deploy.spec.models import (
        CustomModel,
        DeploymentSpec,
        RolloutSpec,
        ScalingSpec,
        SpeculativeDecodingSpec,
        VpcSpec,
    )

_LAZY = {
    "CustomModel": "peagle_deploy.spec.models",
    "DeploymentSpec": "peagle_deploy.spec.models",
    "RolloutSpec": "peagle_deploy.spec.models",
    "ScalingSpec": "peagle_deploy.spec.models",
    "SpeculativeDecodingSpec": "peagle_deploy.spec.models",
    "VpcSpec": "peagle_deploy.spec.models",
    "deep_merge": "peagle_deploy.spec.loader",
    "load_spec": "peagle_deploy.spec.loader",
    "spec_from_dict": "peagle_deploy.spec.loader",
    "spec_with": "peagle_deploy.spec.loader",
}

__all__ = [
    "CustomModel",
    "DeploymentSpec",
    "RolloutSpec",
    "ScalingSpec",
    "SpeculativeDecodingSpec",
    "VpcSpec",
    "deep_merge",
    "load_spec",
    "spec_from_dict",
    "spec_with",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'peagle_deploy.spec' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
