"""The one path rule: `/peagle-deploy/<stage>/<endpoint>/<kind>`.

IAM grants follow it (a stage's role may write `/peagle-deploy/<stage>/*` and read the
stage it promotes from), so every record of one stage sits under the stage's path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast, get_args

from peagle_deploy.errors import InputError

PARAMETER_ROOT = "/peagle-deploy"

Kind = Literal["manifest", "experiment"]
"""What a record is: `manifest` (what an endpoint serves, with the gate results of the
promotion that put it there) and `experiment` (an experiment on the endpoint)."""
KINDS: tuple[Kind, ...] = get_args(Kind)


@dataclass(frozen=True)
class RecordPath:
    """Where one record lives; each part is one path segment, never empty, never `/`."""

    stage: str
    endpoint_name: str
    kind: Kind

    def __post_init__(self) -> None:
        for field, value in (("stage", self.stage), ("endpoint_name", self.endpoint_name)):
            if not value or "/" in value:
                raise InputError(
                    field,
                    f"{value!r} cannot be one segment of an SSM parameter path",
                    "a non-empty name without `/`",
                )
        if self.kind not in KINDS:
            raise InputError("kind", f"{self.kind!r} is no record kind", KINDS)

    @property
    def name(self) -> str:
        """The SSM parameter name."""
        return f"{PARAMETER_ROOT}/{self.stage}/{self.endpoint_name}/{self.kind}"

    @property
    def where(self) -> str:
        """`<stage>/<endpoint>`, as messages name a deployment."""
        return f"{self.stage}/{self.endpoint_name}"

    @classmethod
    def parse(cls, name: str) -> RecordPath | None:
        """The path of a parameter name that follows the rule; None for any other name."""
        parts = name.removeprefix(PARAMETER_ROOT + "/").split("/")
        if not name.startswith(PARAMETER_ROOT + "/") or len(parts) != 3:
            return None
        stage, endpoint_name, kind = parts
        if not stage or not endpoint_name or kind not in KINDS:
            return None
        return cls(stage, endpoint_name, cast(Kind, kind))
