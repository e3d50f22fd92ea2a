"""Turn pydantic's validation errors into InputError: the field path and what is allowed."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from peagle_deploy.errors import InputError
from peagle_deploy.redaction import value_excerpt

_UNECHOED = frozenset({"env"})
"""Top-level fields whose values are never echoed: container environments carry tokens
under any key (`HF_TOKEN=...` pasted as a list or a string), so only the kind is said."""


def field_path(loc: tuple[int | str, ...]) -> str:
    """`("speculative", "num_speculative_tokens")` -> `speculative.num_speculative_tokens`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The BaseModel classes an annotation can hold (through Optional / unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        found: list[type[BaseModel]] = []
        for arg in typing.get_args(annotation):
            found.extend(models_in(arg))
        return found
    return []


def _walk(
    model: type[BaseModel], loc: tuple[int | str, ...]
) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model that owns the last named part of `loc`, and that field's info."""
    owner: type[BaseModel] | None = model
    info: FieldInfo | None = None
    for part in loc:
        if isinstance(part, int) or owner is None:
            break
        info = owner.model_fields.get(part)
        if info is None:
            return owner, None
        nested = models_in(info.annotation)
        if part is not loc[-1] and nested:
            owner = nested[0]
    return owner, info


FIELD_LIST_CHARS = 220
"""Longest list of field names an unknown-field error shows; past it, how many more (the
whole error must stay a readable line)."""


def _unknown_field(name: str, fields: list[str]) -> tuple[str, str | None]:
    """The problem (with the nearest field names, if any) and the fields allowed there."""
    import difflib  # only on a refused spec

    nearest = difflib.get_close_matches(name, fields, n=2, cutoff=0.75)
    problem = "unknown field"
    if nearest:
        problem += f"; did you mean {' or '.join(nearest)}?"
    if not fields:
        return problem, None
    shown: list[str] = []
    for field in fields:
        if shown and len(", ".join([*shown, field])) > FIELD_LIST_CHARS:
            break
        shown.append(field)
    more = len(fields) - len(shown)
    return problem, ", ".join(shown) + (f" and {more} more (docs/specs.md)" if more else "")


def _bounds(info: FieldInfo | None) -> str | None:
    """`60-3600`, `>= 1` ... from the field's numeric constraints."""
    if info is None:
        return None
    lo = hi = None
    for meta in info.metadata:
        lo = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else lo
        if getattr(meta, "gt", None) is not None:
            lo = f"> {meta.gt}"
        hi = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else hi
    if lo is not None and hi is not None and not isinstance(lo, str):
        return f"{lo}-{hi}"
    if lo is not None:
        return lo if isinstance(lo, str) else f">= {lo}"
    if hi is not None:
        return f"<= {hi}"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, str):
        return f"a string of {len(value)} character{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _shown(loc: tuple[int | str, ...], value: Any) -> str:
    """How an error message shows the offending value: a short masked excerpt, or only
    its kind where values may be credentials."""
    if loc and loc[0] in _UNECHOED:
        return _kind(value)
    return value_excerpt(value)


def input_error_from(exc: ValidationError, model: type[BaseModel]) -> InputError:
    """The first pydantic error as an InputError naming the field and the allowed values."""
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    field = field_path(loc) or "spec"
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    msg = err.get("msg", "invalid value")
    value = err.get("input")
    shown = _shown(loc, value)
    owner, info = _walk(model, loc)
    allowed: str | list[str] | None = None
    if kind == "extra_forbidden":
        problem, allowed = _unknown_field(str(loc[-1]), sorted(owner.model_fields) if owner else [])
    elif kind == "missing":
        problem = "is required"
    elif kind == "literal_error":
        allowed = str(ctx.get("expected", ""))
        problem = f"{shown} is not allowed"
    elif kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        allowed = _bounds(info)
        problem = f"{shown} is out of range"
    elif "allowed" in ctx:  # the project's own rules (e.g. StageName) say what is allowed
        allowed = str(ctx["allowed"])
        problem = msg
    else:
        problem = f"{msg.lower()} (got {shown})" if value is not None else msg.lower()
    more = len(exc.errors()) - 1
    if more > 0:
        problem += f" [and {more} more problem{'s' if more > 1 else ''}]"
    return InputError(field, problem, allowed)
