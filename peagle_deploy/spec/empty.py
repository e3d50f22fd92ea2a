"""The empty-value rule of every flag, keyword and spec field, in one place.

An empty string is what an unset shell variable gives (`--region "$REGION"`): it is an
error naming the flag, never the default in disguise (`--region ''` must not quietly
deploy to us-east-1). Used by the flag table (CLI flags, SDK keywords), the spec models
(files) and the CLI's guard on every other option.
"""

from __future__ import annotations

from typing import Any

from peagle_deploy.errors import InputError

EMPTY_PROBLEM = "is empty (an unset shell variable?)"
EMPTY_ALLOWED = "a non-empty value"


def is_empty(value: Any) -> bool:
    """An empty string, or a list of values (a repeatable flag) holding one."""
    return value == "" or (isinstance(value, list | tuple) and "" in value)


def check_not_empty(name: str, value: Any) -> None:
    """InputError naming `name` when `value` is empty (see `is_empty`)."""
    if is_empty(value):
        raise InputError(name, EMPTY_PROBLEM, EMPTY_ALLOWED)
