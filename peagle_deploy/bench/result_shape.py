"""The shape a results file must have before a comparison or a report trusts it.

`peagle bench --json` files are read back by `bench compare --results` and `bench
recommend-k`; a hand-edited or foreign file must be refused here with the key that is
wrong, not crash later in a table or a plot (`float("fast")`). Values the tool computes
with are checked; anything else a newer writer adds is carried through untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from peagle_deploy.errors import InputError

FORMAT_VERSION = 1
MAX_LABEL = 200
_COUNTS = frozenset({"concurrency", "completed", "failed"})
_NUMERIC_SUFFIXES = ("_ms", "_throughput", "_tokens", "_s", "_rate", "_length", "_drafts")
SHAPE = '{"levels": [{"concurrency": N, "output_throughput": X, ...}]} or {"runs": [...]}'


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refuse(where: str, problem: str) -> InputError:
    return InputError("results", f"{where}: {problem}", SHAPE)


def check_level(doc: Any, where: str) -> None:
    """One entry of `levels`: counts are integers, metrics numbers (or null)."""
    if not isinstance(doc, Mapping):
        raise _refuse(where, f"is {type(doc).__name__}, not a mapping")
    for key in ("concurrency", "output_throughput"):
        if doc.get(key) is None:
            raise _refuse(where, f"has no {key}")
    if not isinstance(doc["concurrency"], int) or doc["concurrency"] < 1:
        raise _refuse(f"{where}.concurrency", "is not an integer >= 1")
    for key, value in doc.items():
        if not isinstance(key, str):  # JSON keys are strings; a dict built in code may not be
            raise _refuse(where, "has a key that is not a string")
        if value is None:
            continue
        if key == "errors":
            _check_errors(value, f"{where}.errors")
        elif key == "spec_decode_per_position_acceptance_rates":
            if not isinstance(value, list) or not all(_is_number(v) for v in value):
                raise _refuse(f"{where}.{key}", "is not a list of numbers")
        elif key == "spec_decode_source":
            if not isinstance(value, str):
                raise _refuse(f"{where}.{key}", "is not a string")
        elif key in _COUNTS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _refuse(f"{where}.{key}", "is not a count (an integer >= 0)")
        elif key.endswith(_NUMERIC_SUFFIXES) and not _is_number(value):
            raise _refuse(f"{where}.{key}", "is not a number")


def _check_errors(value: Any, where: str) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise _refuse(where, "is not a mapping of error text to count")


def check_run(doc: Any, where: str) -> None:
    """One sweep result (what `peagle bench --json` writes)."""
    if not isinstance(doc, Mapping):
        raise _refuse(where, f"is {type(doc).__name__}, not a mapping")
    version = doc.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise _refuse(where, f"format_version {version!r} is not {FORMAT_VERSION}")
    levels = doc.get("levels")
    if not isinstance(levels, list):
        raise _refuse(where, "has no `levels` list")
    label = doc.get("label")
    if label is not None and (
        not isinstance(label, str) or len(label) > MAX_LABEL or not label.isprintable()
    ):
        raise _refuse(
            f"{where}.label", f"is not a printable string of at most {MAX_LABEL} characters"
        )
    for key in ("target", "model", "dataset", "started_at", "finished_at", "kind"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise _refuse(f"{where}.{key}", "is not a string")
    k = doc.get("k")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise _refuse(f"{where}.k", "is not an integer >= 1")
    if doc.get("config") is not None and not isinstance(doc["config"], Mapping):
        raise _refuse(f"{where}.config", "is not a mapping")
    for i, level in enumerate(levels):
        check_level(level, f"{where}.levels[{i}]")
