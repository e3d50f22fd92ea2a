"""The sourced platform facts in catalog/data/*.json, loaded once and on first use.

scripts/platform_facts.py writes these files from public sources (vLLM and
sagemaker-core wheels on PyPI; recorded excerpts of aws/deep-learning-containers and
aws/sagemaker-python-sdk) and tests/catalog/test_platform_facts.py fails when they
drift. docs/platform-facts.md explains every value and where it was read.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).parent / "data"


@cache
def load(name: str) -> dict[str, Any]:
    """One data file (`engines.json`, `images.json`, `jumpstart.json`), parsed."""
    data: dict[str, Any] = json.loads((DATA_DIR / name).read_text(encoding="utf-8"))
    return data


def cite(source: dict[str, Any]) -> str:
    """A one-line citation of a recorded source (PyPI wheel + path, or repo + commit + path)."""
    if "pypi" in source:
        return f"PyPI {source['pypi']} ({source['wheel']}) {source.get('path', '')}".strip()
    if "repository" in source:
        return f"{source['repository']}@{source['commit'][:12]}:{source['path']}"
    return str(source.get("path", "unknown source"))
