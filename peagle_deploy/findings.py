"""What validation reports besides refusals: warnings and CloudFormation gaps, each with
the spec field it concerns, so that readers (the CDK stack, tools) never parse text.
"""

from __future__ import annotations

from dataclasses import dataclass


class PlanWarning(str):
    """A warning about a plan: its text, plus the spec field it concerns (`.field`).

    A `str` so that everything that shows, logs or serialises warnings keeps working
    with the text; code that acts on a warning reads `.field`, never the text.
    """

    field: str
    message: str

    def __new__(cls, field: str, message: str) -> PlanWarning:
        self = super().__new__(cls, message)
        self.field = field
        self.message = message
        return self

    def __reduce__(self) -> tuple[type[PlanWarning], tuple[str, str]]:
        return (PlanWarning, (self.field, self.message))


@dataclass(frozen=True)
class CdkIncompatibility:
    """A spec field whose value CloudFormation cannot express (the CDK path refuses it)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"
