"""The stage-name rule, in one place: the spec, the CDK stage map and the gates file use it.

A stage name ends up in SSM parameter paths (`/peagle-deploy/<stage>/...`), tag values,
the default endpoint name (`peagle-<model>-<stage>`, 63 characters in all) and the CDK
stack id (`PeagleEndpoint-<stage>`), so it is kept short and plain: the strictest of
those uses decides.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from peagle_deploy.errors import InputError

STAGE_NAME_PATTERN = r"^[a-z](-?[a-z0-9]){0,19}$"
STAGE_NAME_RULE = (
    "1-20 lowercase letters, digits and single dashes, starting with a letter and not "
    "ending with a dash (e.g. dev, staging, prod, eu-prod)"
)
_STAGE_NAME = re.compile(STAGE_NAME_PATTERN)


def is_stage_name(value: object) -> bool:
    """Whether `value` is a valid stage name."""
    return isinstance(value, str) and _STAGE_NAME.fullmatch(value) is not None


def check_stage_name(value: object, field: str) -> str:
    """`value` when it is a stage name; InputError naming `field` and the rule otherwise."""
    if not is_stage_name(value):
        raise InputError(field, f"{value!r} is not a stage name", STAGE_NAME_RULE)
    assert isinstance(value, str)
    return value


def _validated(value: str) -> str:
    if not is_stage_name(value):
        raise PydanticCustomError(
            "stage_name",
            "{value} is not a stage name",
            {"value": repr(value), "allowed": STAGE_NAME_RULE},
        )
    return value


StageName = Annotated[
    str,
    AfterValidator(_validated),
    WithJsonSchema({"type": "string", "pattern": STAGE_NAME_PATTERN}),
]
"""A stage name in a pydantic model; its error carries the rule as `ctx["allowed"]`."""
