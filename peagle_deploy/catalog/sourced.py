"""A catalog value together with where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """One catalog value and its provenance.

    `verified` is True only when the value is confirmed by the public source named in
    `source` (a URL, a repository + commit + path, or a PyPI wheel + path). Unverified
    values are sensible defaults that users must be able to override; `peagle models`
    marks them.
    """

    value: T
    verified: bool
    source: str

    def marker(self) -> str:
        """A short suffix for tables: empty when verified, `*` otherwise."""
        return "" if self.verified else "*"


def verified(value: T, source: str) -> Sourced[T]:
    """A value confirmed by `source` (a public document, repository file or wheel)."""
    return Sourced(value, True, source)


def unverified(value: T, why: str) -> Sourced[T]:
    """A default nobody has confirmed yet; `why` says how it was chosen."""
    return Sourced(value, False, why)
