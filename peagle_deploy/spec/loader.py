"""Load a DeploymentSpec from a YAML/JSON file and keyword overrides (overrides win).

Overrides can be nested (`speculative={"num_speculative_tokens": 7}` merges into the
file's `speculative` section instead of replacing it) or dotted
(`**{"speculative.num_speculative_tokens": 7}`); both forms deep-merge, and a dotted key
wins over a whole section given in the same call. Overrides whose value is None are
ignored, so unset CLI flags never clobber the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from peagle_deploy.errors import InputError
from peagle_deploy.spec.errors import input_error_from
from peagle_deploy.spec.models import DeploymentSpec


def _read_file(path: Path, field: str) -> dict[str, Any]:
    """Parse a spec file through the one loading path (size, depth, encoding, duplicates)."""
    from peagle_deploy.documents import load_mapping

    return load_mapping(path, field)


def _expand(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys become nested dicts (shallow keys first, so deeper ones win); pydantic
    models become plain dicts; None values are dropped. Each value gets the size and
    depth limits of a spec file (NaN is left to the model, which names the field)."""
    from peagle_deploy.documents import check_tree

    out: dict[str, Any] = {}
    for key in sorted(overrides, key=lambda k: k.count(".")):
        value = overrides[key]
        if value is None:
            continue
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        else:
            check_tree(value, key, f"the value of {key}", finite=False)
        if isinstance(value, Mapping):
            value = deep_merge({}, value)  # a copy: dotted keys below must not edit the caller's
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise InputError(key, f"cannot set inside {part!r}, which is not a section")
            node = child
        leaf = parts[-1]
        if isinstance(value, Mapping) and isinstance(node.get(leaf), Mapping):
            node[leaf] = deep_merge(node[leaf], value)
        else:
            node[leaf] = value
    return out


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` wins; mappings on both sides merge key by key."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        elif isinstance(value, Mapping):
            merged[key] = deep_merge({}, value)
        else:
            merged[key] = value
    return merged


def load_spec(
    path: str | Path | None = None, *, file_field: str = "spec_file", **overrides: Any
) -> DeploymentSpec:
    """Read the spec file (if any), apply `overrides`, and validate the field shapes.

    `file_field` names the file in errors: the flag or key it came from (`--file`,
    `--stage-file`, `peagle:stages.dev.spec`); the SDK's keyword by default.

    Cross-field rules (instance fit, K against the drafter, ...) are checked by
    `peagle_deploy.plan.build_plan`, which knows the catalog.
    """
    data: dict[str, Any] = _read_file(Path(path), file_field) if path is not None else {}
    data = deep_merge(data, _expand(overrides))
    return spec_from_dict(data)


def spec_with(spec: DeploymentSpec, **overrides: Any) -> DeploymentSpec:
    """`spec` with `overrides` applied exactly as `load_spec` applies them to a file."""
    base = spec.model_dump(mode="json", exclude_none=True)
    return spec_from_dict(deep_merge(base, _expand(overrides)))


def spec_from_dict(data: Mapping[str, Any]) -> DeploymentSpec:
    """Validate a plain mapping into a DeploymentSpec, raising InputError on the first problem."""
    try:
        return DeploymentSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise input_error_from(exc, DeploymentSpec) from None
