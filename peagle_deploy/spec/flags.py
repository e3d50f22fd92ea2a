"""The deployment spec's flag table: every knob of `peagle plan` / `peagle deploy` /
`peagle doctor` and of `deploy_peagle()`.

Derived (peagle_deploy.spec.flag_table) from the `Flag(...)` annotations on the spec
models. The SDK turns the table into keyword shortcuts (`keyword_overrides`), the CLI
into options (peagle_deploy.cli.flags). The CLI reads the table from `flag_table.json`,
written from the models by `python -m peagle_deploy.spec.flags`: building the pydantic
models costs every command a noticeable part of its start-up, and only the commands
that read a spec need them. A test fails when that file differs from the models.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from peagle_deploy.spec.flag_table import FlagRow, derive, read_table, table_json

SpecFlag = FlagRow
"""A row of the spec's table."""

TABLE_FILE = Path(__file__).with_name("flag_table.json")


@cache
def spec_flags() -> tuple[FlagRow, ...]:
    """Every knob of DeploymentSpec, in field order (derived from the models)."""
    from peagle_deploy.spec.models import PANEL_MODEL, DeploymentSpec

    return derive(DeploymentSpec, key="spec", panel=PANEL_MODEL)


def model_doc() -> str:
    """The `model` field's docstring (the CLI's MODEL argument)."""
    from peagle_deploy.spec.models import DeploymentSpec

    return re.sub(r"\s+", " ", DeploymentSpec.model_fields["model"].description or "").strip()


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


def spec_table_json() -> str:
    """`flag_table.json`: the MODEL argument's doc and the derived rows."""
    return table_json(spec_flags(), model_doc=model_doc())


@cache
def cli_table() -> tuple[str, tuple[FlagRow, ...]]:
    """The MODEL argument's doc and the flag table, read from `flag_table.json`: the same
    data as `model_doc()` and `spec_flags()` without building the pydantic models."""
    extra, rows = read_table(TABLE_FILE)
    return str(extra["model_doc"]), rows


if __name__ == "__main__":
    # The field docs first: the table's help is read from the models, which read them.
    from peagle_deploy.spec.field_docs import DOCS_FILE, docs_json

    DOCS_FILE.write_text(docs_json(), encoding="utf-8")
    TABLE_FILE.write_text(spec_table_json(), encoding="utf-8")
    print(f"wrote {DOCS_FILE} and {TABLE_FILE}", file=sys.stderr)
