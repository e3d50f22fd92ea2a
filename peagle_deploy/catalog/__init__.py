"""The P-EAGLE launch models and the GPU instance types peagle-deploy knows.

Plain Python data plus the sourced JSON in catalog/data (no YAML, no AWS SDK) so that
`peagle plan` starts fast. Every value carries where it came from: `verified` values are
confirmed by a public source named in `source` (docs/platform-facts.md lists them all);
everything else is a default that is marked unverified in the data and in
`peagle models`, and that a spec can override.
"""

from __future__ import annotations

from peagle_deploy.catalog.instances import INSTANCE_TYPES, InstanceType, get_instance
from peagle_deploy.catalog.models import MODELS, ModelEntry, get_model
from peagle_deploy.catalog.sourced import Sourced

__all__ = [
    "INSTANCE_TYPES",
    "MODELS",
    "InstanceType",
    "ModelEntry",
    "Sourced",
    "get_instance",
    "get_model",
]
