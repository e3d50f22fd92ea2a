"""The deployment spec's flag table: every knob of `peagle plan` / `peagle deploy` /
`peagle doctor` and of `deploy_peagle()`.

Derived (peagle_deploy.spec.flag_table) from the `Flag(...)` annotations on the spec
models, when first asked for. The SDK turns the table into keyword shortcuts
(`keyword_overrides`), the CLI into options (peagle_deploy.cli.flags) of the commands
that read a spec: only those load the pydantic models.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from peagle_deploy.spec.flag_table import FlagRow, derive

SpecFlag = FlagRow
"""A row of the spec's table."""


@cache
def spec_flags() -> tuple[FlagRow, ...]:
    """Every knob of DeploymentSpec, in field order (derived from the models)."""
    from peagle_deploy.spec.models import PANEL_MODEL, DeploymentSpec

    return derive(DeploymentSpec, key="spec", panel=PANEL_MODEL)


@cache
def _by_keyword() -> dict[str, FlagRow]:
    return {f.keyword: f for f in spec_flags()}


def spec_flag(keyword: str) -> FlagRow:
    """The table row of one keyword (KeyError for an unknown one)."""
    return _by_keyword()[keyword]


def keyword_overrides(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """SDK keywords -> `load_spec` overrides.

    A flag-table keyword (`role_arn`, `num_speculative_tokens`, `alarms`, ...) becomes
    its spec path; any other key is taken as a spec path itself (`speculative.mode`,
    `rollout={...}`), so the whole spec stays reachable. None values are dropped.
    """
    table = _by_keyword()
    out: dict[str, Any] = {}
    for key, value in knobs.items():
        if value is None:
            continue
        flag = table.get(key)
        if flag is None:
            out[key] = value
        else:
            out[flag.path] = flag.from_keyword(value)
    return out
