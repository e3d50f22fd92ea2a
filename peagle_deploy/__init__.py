"""peagle-deploy: P-EAGLE parallel speculative decoding endpoints on Amazon SageMaker.

Public names are imported lazily so that `import peagle_deploy` (and the CLI's start-up)
stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "DeploymentSpec": "peagle_deploy.spec",
    "load_spec": "peagle_deploy.spec",
    "build_plan": "peagle_deploy.plan",
    "Plan": "peagle_deploy.plan",
    "deploy_peagle": "peagle_deploy.sdk",
    "PeagleEndpoint": "peagle_deploy.sdk",
    "train_drafter": "peagle_deploy.train.run",
    "PeagleError": "peagle_deploy.errors",
    "InputError": "peagle_deploy.errors",
}

__all__ = [*_LAZY, "__version__"]  # noqa: PLE0604 (the _LAZY keys are strings)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'peagle_deploy' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
