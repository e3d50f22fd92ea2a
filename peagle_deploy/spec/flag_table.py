"""Flag tables: a model's knobs as command-line flags, declared once on the model.

One mechanism for every knob the CLI exposes, in the spirit of vLLM's `EngineArgs`
(whose CLI flags and help come from its config classes): a field annotated with
`Flag(...)` is a flag; the field gives the type, the allowed values, the default and,
from its docstring, the help; the marker gives the option names. `derive(model)` turns a
model into `FlagRow`s, `table_json` writes them as data and `read_table` reads them back,
so that the CLI builds its options (peagle_deploy.cli.flags) without building the
pydantic models at start-up. The deployment spec's table is peagle_deploy.spec.flags;
the benchmark's is peagle_deploy.bench.settings.

This module imports neither pydantic (until `derive` runs) nor a CLI library.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from peagle_deploy.errors import InputError
from peagle_deploy.spec.empty import check_not_empty

if TYPE_CHECKING:
    from pydantic import BaseModel

FlagKind = Literal["value", "switch", "list", "pairs", "levels"]
"""`value`: one value; `switch`: a bool flag that sets the opposite of the default;
`list`: repeatable; `pairs`: repeatable KEY=VALUE into a mapping; `levels`: integers
given comma-separated in one value."""


@dataclass(frozen=True)
class Flag:
    """Marks a model field as a flag (its SDK keyword, for the spec, too).

    `name` defaults to `--<field-name>` (dashes for underscores), `keyword` to the field
    name; a bool field's flag sets the opposite of its default. Help comes from the
    field's docstring; `panel` groups flags in `--help`.
    """

    name: str | None = None
    short: str | None = None
    keyword: str | None = None
    panel: str | None = None


@dataclass(frozen=True)
class FlagRow:
    """One knob: where it lives in its model and how the CLI (and the SDK) spell it."""

    path: str
    """Dotted path in the model, e.g. `speculative.num_speculative_tokens`."""
    keyword: str
    """The SDK keyword (and the CLI function parameter), e.g. `num_speculative_tokens`."""
    decls: tuple[str, ...]
    """CLI option names, long first, e.g. `("--num-speculative-tokens", "-k")`."""
    kind: FlagKind
    value_type: type
    """`int`, `float`, `str` or `bool` (of each element for lists and mappings)."""
    default: Any
    """The field's default (for a switch: the value when the flag is absent)."""
    choices: tuple[str, ...] | None
    doc: str
    """What the knob does: the field's docstring on one line."""
    panel: str | None
    key: str | None
    """The file key the knob sets, shown in help (`spec: speculative.mode`); None when
    the knob is the command line's only."""

    @property
    def help(self) -> str:
        """CLI help: the docstring, how to give the value, the default, the file key."""
        text = self.doc
        if self.kind == "switch" and self.flag.startswith("--no-"):
            text = f"Sets {self.path} to false. {text}"
        if self.choices and not all(choice in text for choice in self.choices):
            text += f" One of: {', '.join(self.choices)}."
        if self.kind == "list":
            text += " Repeatable."
        elif self.kind == "pairs":
            text += " KEY=VALUE, repeatable."
        elif self.kind == "levels":
            text += f" Default: {','.join(str(v) for v in self.default)}."
        elif self.kind == "value" and self.default is not None:
            text += f" Default: {self.default}."
        return f"{text} ({self.key})" if self.key else text

    @property
    def flag(self) -> str:
        """The long option name (`--tp`)."""
        return self.decls[0]

    def from_cli(self, raw: Any) -> Any:
        """A parsed CLI value -> the model value; None when the flag was not given."""
        check_not_empty(self.flag, raw)
        if self.kind == "switch":
            return (not self.default) if raw else None
        if self.kind == "list":
            return list(raw) if raw else None
        if self.kind == "pairs":
            return parse_pairs(self.flag, raw) if raw else None
        return raw

    def from_keyword(self, value: Any) -> Any:
        """An SDK keyword value -> the model value (a list of `K=V` strings is accepted
        for mappings, as on the command line)."""
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
    if origin is list and typing.get_args(inner) == (int,):
        return "levels", int, None
    if origin is dict and typing.get_args(inner) == (str, str):
        return "pairs", str, None
    raise TypeError(f"{where}: {annotation!r} cannot be a CLI flag")


def derive(
    model: type[BaseModel], *, key: str | None = None, panel: str | None = None
) -> tuple[FlagRow, ...]:
    """The flag rows of `model` and the models nested in it, in field order.

    `key` names the document the fields are keys of (`spec`), for the help text;
    `panel` is the help panel of flags whose marker names none.
    """
    return tuple(_walk(model, key, panel, ""))


def _walk(
    model: type[BaseModel], key: str | None, panel: str | None, prefix: str
) -> Iterator[FlagRow]:
    from peagle_deploy.spec.errors import models_in

    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = models_in(info.annotation)
        if nested:
            yield from _walk(nested[0], key, panel, f"{path}.")
            continue
        marker = next((m for m in info.metadata if isinstance(m, Flag)), None)
        if marker is None:
            continue
        kind, value_type, choices = _kind_of(info.annotation, path)
        flag = marker.name or "--" + name.replace("_", "-")
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        yield FlagRow(
            path=path,
            keyword=marker.keyword or name,
            decls=(flag, marker.short) if marker.short else (flag,),
            kind=kind,
            value_type=value_type,
            default=default,
            choices=choices,
            doc=re.sub(r"\s+", " ", info.description or "").strip(),
            panel=marker.panel or panel,
            key=f"{key}: {path}" if key else None,
        )


_TYPES: dict[str, type] = {t.__name__: t for t in (int, float, str, bool)}


def table_json(rows: tuple[FlagRow, ...], **extra: str) -> str:
    """A flag table as data, one flag per line (`extra`: e.g. the MODEL argument's doc)."""
    head = "".join(f"{json.dumps(k)}: {json.dumps(v)},\n " for k, v in extra.items())
    lines = [json.dumps({**asdict(r), "value_type": r.value_type.__name__}) for r in rows]
    return "{" + head + '"flags": [\n  ' + ",\n  ".join(lines) + "\n]}\n"


def read_table(path: Path) -> tuple[dict[str, Any], tuple[FlagRow, ...]]:
    """A table written by `table_json`: its extra entries and its rows."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = tuple(
        FlagRow(
            **{
                **row,
                "decls": tuple(row["decls"]),
                "choices": None if row["choices"] is None else tuple(row["choices"]),
                "value_type": _TYPES[row["value_type"]],
            }
        )
        for row in doc.pop("flags")
    )
    return doc, rows
