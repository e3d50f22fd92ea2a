"""The flag table: every spec knob of `peagle plan` / `peagle deploy` and `deploy_peagle()`.

Derived from the `Flag(...)` annotations on the spec models (in the spirit of vLLM's
`EngineArgs`, whose CLI flags and help come from its config classes): the field gives
the type, the allowed values, the default and, from its docstring, the help text; the
marker gives the flag name. The SDK turns the table into keyword shortcuts
(`keyword_overrides`), the CLI into options (`peagle_deploy.cli.spec_options`).

The CLI reads the same table from `flag_table.json`, written from the models by
`python -m peagle_deploy.spec.flags`: building the pydantic models costs `peagle --help`
(and every other command) a noticeable part of its start-up, and only `plan` and
`deploy` need them. A test fails when that file differs from the models. This module
imports neither pydantic (until `derived_flags()` runs) nor a CLI library.
"""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from peagle_deploy.errors import InputError
from peagle_deploy.spec.empty import check_not_empty

if TYPE_CHECKING:
    from pydantic import BaseModel

FlagKind = Literal["value", "switch", "list", "pairs"]
"""`value`: one value; `switch`: a bool flag that sets the opposite of the default;
`list`: repeatable; `pairs`: repeatable KEY=VALUE into a mapping."""


@dataclass(frozen=True)
class SpecFlag:
    """One knob: where it lives in the spec and how the CLI and the SDK spell it."""

    path: str
    """Dotted spec path, e.g. `speculative.num_speculative_tokens`."""
    keyword: str
    """The SDK keyword (and the CLI function parameter), e.g. `num_speculative_tokens`."""
    decls: tuple[str, ...]
    """CLI option names, long first, e.g. `("--num-speculative-tokens", "-k")`."""
    kind: FlagKind
    value_type: type
    """`int`, `float` or `str` (of each element for `list` and `pairs`)."""
    default: Any
    """The field's default (for a switch: the value when the flag is absent)."""
    choices: tuple[str, ...] | None
    doc: str
    """What the knob does: the field's docstring on one line."""
    panel: str

    @property
    def help(self) -> str:
        """CLI help: the docstring, how to give the value, the default, the spec key."""
        text = self.doc
        if self.kind == "switch" and self.flag.startswith("--no-"):
            text = f"Sets {self.path} to false. {text}"
        if self.choices and not all(choice in text for choice in self.choices):
            text += f" One of: {', '.join(self.choices)}."
        if self.kind == "list":
            text += " Repeatable."
        elif self.kind == "pairs":
            text += " KEY=VALUE, repeatable."
        elif self.kind == "value" and self.default is not None:
            text += f" Default: {self.default}."
        return f"{text} (spec: {self.path})"

    @property
    def flag(self) -> str:
        """The long option name (`--tp`)."""
        return self.decls[0]

    def from_cli(self, raw: Any) -> Any:
        """A parsed CLI value -> the spec value; None when the flag was not given."""
        check_not_empty(self.flag, raw)
        if self.kind == "switch":
            return (not self.default) if raw else None
        if self.kind == "list":
            return list(raw) if raw else None
        if self.kind == "pairs":
            return parse_pairs(self.flag, raw) if raw else None
        return raw

    def from_keyword(self, value: Any) -> Any:
        """An SDK keyword value -> the spec value (a list of `K=V` strings is accepted for
        mappings, as on the command line)."""
        check_not_empty(self.keyword, value)
        if self.kind == "pairs" and isinstance(value, list | tuple):
            return parse_pairs(self.keyword, list(value))
        return value


def parse_pairs(field: str, items: list[str], *, form: str = "KEY=VALUE") -> dict[str, str]:
    """`["A=1", "B=x=y"]` -> `{"A": "1", "B": "x=y"}`; InputError names `field` and `form`.

    The key is everything before the first `=` and must not be empty; the value may be.
    """
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(field, f"{item!r} is not {form}", form)
        pairs[key] = value
    return pairs


def _kind_of(annotation: Any, where: str) -> tuple[FlagKind, type, tuple[str, ...] | None]:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    inner = args[0] if optional and len(args) == 1 else annotation
    origin = typing.get_origin(inner)
    if inner is bool:
        return "switch", bool, None
    if origin is Literal:
        return "value", str, tuple(str(a) for a in typing.get_args(inner))
    if inner in (int, float, str):
        return "value", inner, None
    if origin is list and typing.get_args(inner) == (str,):
        return "list", str, None
    if origin is dict and typing.get_args(inner) == (str, str):
        return "pairs", str, None
    raise TypeError(f"{where}: {annotation!r} cannot be a CLI flag")


def _walk(model: type[BaseModel], prefix: str) -> Iterator[SpecFlag]:
    from peagle_deploy.spec.errors import models_in
    from peagle_deploy.spec.models import Flag

    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = models_in(info.annotation)
        if nested:
            yield from _walk(nested[0], f"{path}.")
            continue
        marker = next((m for m in info.metadata if isinstance(m, Flag)), None)
        if marker is None:
            continue
        kind, value_type, choices = _kind_of(info.annotation, path)
        flag = marker.name or "--" + name.replace("_", "-")
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        yield SpecFlag(
            path=path,
            keyword=marker.keyword or name,
            decls=(flag, marker.short) if marker.short else (flag,),
            kind=kind,
            value_type=value_type,
            default=default,
            choices=choices,
            doc=re.sub(r"\s+", " ", info.description or "").strip(),
            panel=marker.panel,
        )


@cache
def spec_flags() -> tuple[SpecFlag, ...]:
    """Every knob of DeploymentSpec, in field order (derived from the models)."""
    from peagle_deploy.spec.models import DeploymentSpec

    return tuple(_walk(DeploymentSpec, ""))


def model_doc() -> str:
    """The `model` field's docstring (the CLI's MODEL argument)."""
    from peagle_deploy.spec.models import DeploymentSpec

    return re.sub(r"\s+", " ", DeploymentSpec.model_fields["model"].description or "").strip()


@cache
def _by_keyword() -> dict[str, SpecFlag]:
    return {f.keyword: f for f in spec_flags()}


def spec_flag(keyword: str) -> SpecFlag:
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


TABLE_FILE = Path(__file__).with_name("flag_table.json")
_TYPES: dict[str, type] = {t.__name__: t for t in (int, float, str, bool)}


def table_json() -> str:
    """`flag_table.json`: the derived table as data, one flag per line."""
    rows = [json.dumps({**asdict(f), "value_type": f.value_type.__name__}) for f in spec_flags()]
    return (
        f'{{"model_doc": {json.dumps(model_doc())},\n "flags": [\n  '
        + ",\n  ".join(rows)
        + "\n]}\n"
    )


@cache
def cli_table() -> tuple[str, tuple[SpecFlag, ...]]:
    """The MODEL argument's doc and the flag table, read from `flag_table.json`: the same
    data as `model_doc()` and `spec_flags()` without building the pydantic models."""
    doc = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
    flags = tuple(
        SpecFlag(
            **{
                **row,
                "decls": tuple(row["decls"]),
                "choices": None if row["choices"] is None else tuple(row["choices"]),
                "value_type": _TYPES[row["value_type"]],
            }
        )
        for row in doc["flags"]
    )
    return str(doc["model_doc"]), flags


if __name__ == "__main__":
    TABLE_FILE.write_text(table_json(), encoding="utf-8")
    print(f"wrote {TABLE_FILE}", file=sys.stderr)
