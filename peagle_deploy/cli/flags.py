"""Flag tables as typer options: the one way a model's knobs become command-line flags.

A table (peagle_deploy.spec.flag_table, read from its JSON so that start-up builds no
pydantic model) gives each option its names, help and help panel. Two ways to hand a
value on, chosen by the command that owns the table:
- typed (`as_text=False`, the spec's flags): typer converts the value to the field's
  type, and the command gets it as the spec value (`FlagRow.from_cli`);
- as text (`as_text=True`, the benchmark's flags): the model parses the value (e.g.
  `-c 1,4,8`), and a refused value names the flag.
Also the parsers that turn an empty or malformed value into one line naming the flag.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from peagle_deploy.errors import InputError
from peagle_deploy.spec.flag_table import FlagRow

_METAVAR = {"int": "<int>", "float": "<float>", "str": "<str>", "levels": "<int,...>"}
_ALLOWED = {
    "int": "an integer",
    "float": "a number",
    "str": "a non-empty value",
    "levels": "comma-separated integers",
}


def given(flag: str, allowed: str = "a non-empty value") -> Callable[[Any], Any]:
    """A typer parser that refuses an empty value (an unset shell variable) naming the
    flag, where typer would pass '' on or print a multi-line usage error."""

    def parse(raw: Any) -> Any:
        if isinstance(raw, str) and not raw.strip():
            raise InputError(flag, "is empty (an unset shell variable?)", allowed)
        return raw

    return parse


def number(
    flag: str,
    kind: type[int] | type[float],
    allowed: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Callable[[Any], Any]:
    """A typer parser for a number: one line naming the flag for '', `abc`, `nan` or a
    value outside [minimum, maximum]."""

    def parse(raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw  # the default
        try:
            value = kind(raw.strip())
        except ValueError:
            raise InputError(flag, f"{raw!r} is not {_ALLOWED[kind.__name__]}", allowed) from None
        if not math.isfinite(value):
            raise InputError(flag, f"{raw!r} is not a finite number", allowed)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise InputError(flag, f"{raw!r} is out of range", allowed)
        return value

    return parse


def option(row: FlagRow, *, as_text: bool = False) -> inspect.Parameter:
    """The keyword-only parameter that declares `row` to typer (default None or, for a
    switch, False: "not given", so the model's default applies)."""
    extra: dict[str, Any] = {"show_default": False, "rich_help_panel": row.panel}
    if as_text:
        what = "levels" if row.kind == "levels" else row.value_type.__name__
        python_type: Any = str | None
        extra.update(metavar=_METAVAR[what], parser=given(row.flag, _ALLOWED[what]))
    else:
        python_type = {
            "switch": bool,
            "list": list[str] | None,
            "pairs": list[str] | None,
            "value": row.value_type | None,
        }[row.kind]
        if row.kind == "pairs":
            extra["metavar"] = "KEY=VALUE"
    return inspect.Parameter(
        row.keyword,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[python_type, typer.Option(*row.decls, help=row.help, **extra)],
        default=False if row.kind == "switch" and not as_text else None,
    )


def take_given(rows: Iterable[FlagRow], kwargs: dict[str, Any]) -> list[tuple[FlagRow, Any]]:
    """Pop every row's parameter from `kwargs`; the given ones, as model values."""
    values = [(row, row.from_cli(kwargs.pop(row.keyword, None))) for row in rows]
    return [(row, value) for row, value in values if value is not None]
