"""The container's numeric environment variables: one rule, for the image and the plan.

`peagle-serve` reads these when it starts, and `peagle plan` checks the environment it
renders with the same table and the same function, so a value the container would refuse
never reaches a deployment. The rule: plain ASCII digits (and, for seconds, one decimal
point), at most MAX_CHARS characters, within the variable's bounds. Written that way a
value is finite by construction: `nan`, `inf`, `1e9`, `-1`, `²` (a Unicode digit that
`str.isdigit()` accepts and `int()` refuses) and a 5000-digit number are all refused
before any conversion. An empty value means the variable is unset.

Standard library only: the image installs this package without peagle_deploy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from peagle_serve import contract

MAX_CHARS: Final = 16
"""Longest value looked at: far more than any bound below needs, short enough that no
conversion of it can cost anything."""
_INTEGER: Final = re.compile(r"[0-9]+")
_DECIMAL: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_ECHO_LIMIT: Final = 16
"""Values up to this length are quoted in errors; a longer one (a pasted token, say) is
only described."""


class NumericEnvError(ValueError):
    """A numeric variable with a value outside the rule; names the variable."""

    def __init__(self, variable: str, problem: str, allowed: str) -> None:
        super().__init__(f"{variable}: {problem} (allowed: {allowed})")
        self.variable = variable
        self.problem = problem
        self.allowed = allowed


@dataclass(frozen=True)
class NumericVariable:
    """One numeric variable: its bounds, and whether it takes decimals (seconds)."""

    name: str
    minimum: int
    maximum: int
    decimals: bool
    unit: str

    @property
    def allowed(self) -> str:
        if self.decimals:
            return f"{self.unit}, {self.minimum}-{self.maximum} (ASCII digits, one '.' at most)"
        return f"whole {self.unit}, {self.minimum}-{self.maximum} (ASCII digits)"

    def parse(self, raw: str) -> int | float | None:
        """The value of `raw` (None when empty: unset); raises NumericEnvError."""
        if raw == "":
            return None
        pattern = _DECIMAL if self.decimals else _INTEGER
        if len(raw) > MAX_CHARS or not pattern.fullmatch(raw):
            raise NumericEnvError(
                self.name, f"{_shown(raw)} is not a number in ASCII digits", self.allowed
            )
        value: int | float = float(raw) if self.decimals else int(raw)
        if not self.minimum <= value <= self.maximum:
            raise NumericEnvError(
                self.name, f"{raw} is out of range {self.minimum}-{self.maximum}", self.allowed
            )
        return value


def _shown(raw: str) -> str:
    if len(raw) <= _ECHO_LIMIT:
        return ascii(raw)  # `'\xb2'` for `²`: what the value is, in plain ASCII
    return f"a value of {len(raw)} characters"


NUMERIC_VARIABLES: Final[Mapping[str, NumericVariable]] = {
    v.name: v
    for v in (
        # A drafter's trained parallel tokens: vLLM drafts at most 128 per step, so any
        # larger count means "never warn"; 1024 leaves room without being unbounded.
        NumericVariable(contract.DRAFTER_TRAINED_TOKENS_ENV, 1, 1024, False, "tokens"),
        # 0 turns the acceptance reporter off; more than an hour between two reads would
        # leave CloudWatch without acceptance figures for most benchmark runs.
        NumericVariable(contract.METRICS_INTERVAL_ENV, 0, 3600, True, "seconds"),
        # How long vLLM gets after a forwarded SIGTERM before its process group is killed.
        NumericVariable(contract.STOP_GRACE_ENV, 0, 3600, True, "seconds"),
    )
}
"""Every numeric variable the container reads, by name."""


def numeric_value(env: Mapping[str, str], name: str) -> int | float | None:
    """The value of one numeric variable in `env` (None when unset or empty)."""
    return NUMERIC_VARIABLES[name].parse(env.get(name, ""))


def check_numeric_env(env: Mapping[str, str]) -> dict[str, int | float]:
    """Every numeric variable set in `env`, parsed; raises NumericEnvError for the first
    bad one (in name order, so the same environment always names the same variable)."""
    values: dict[str, int | float] = {}
    for name in sorted(NUMERIC_VARIABLES):
        value = numeric_value(env, name)
        if value is not None:
            values[name] = value
    return values
