"""The targets of `peagle bench` and `peagle bench compare`, checked before any request.

From `--url` / `--endpoint`, `--target label=ADDRESS` and a `--file` with a `targets:` list
(read through `peagle_deploy.documents`: size, depth, YAML aliases, encodings and
duplicate keys are limited there). Every value is checked here, naming the flag or the
file's key, so that a bad second target cannot fail after the first one was measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peagle_deploy.errors import InputError

MAX_LABEL = 200
"""Labels name table columns and plot lines; longer ones are a mistake (results files
are held to the same length, `bench.result_shape.MAX_LABEL`)."""
MAX_MODEL = 512
FILE_KEYS = ("label", "url", "endpoint", "model", "region", "kind", "k")
ENDPOINT_NAME = "1-63 of [a-zA-Z0-9-], starting and ending with a letter or digit"


@dataclass(frozen=True)
class TargetEntry:
    """One configuration to measure: a label and `http(s)://...` or `endpoint:NAME`."""

    label: str | None
    address: str
    model: str | None = None
    region: str | None = None
    kind: str | None = None
    k: int | None = None


def check_entry(
    entry: TargetEntry, address_field: str, where: str | None = None, label_field: str | None = None
) -> None:
    """Every value of one target. Errors name `address_field` for the URL or endpoint and,
    for the other values, the file key under `where` (`--file targets[0]`) or the flag
    (`label_field`, else `address_field`, for the label)."""
    from peagle_deploy.bench.compare import classify
    from peagle_deploy.bench.targets import split_base_url
    from peagle_deploy.validation.aws_shapes import NAME_RE

    def name(key: str, flag: str) -> str:
        return f"{where}.{key}" if where else flag

    if entry.label is not None:
        check_text(
            entry.label, name("label", label_field or address_field), MAX_LABEL, "a short label"
        )
    if entry.address.startswith("endpoint:"):
        endpoint = entry.address.removeprefix("endpoint:")
        if not NAME_RE.match(endpoint):
            raise InputError(
                address_field, f"{endpoint!r} is not a SageMaker endpoint name", ENDPOINT_NAME
            )
    else:
        split_base_url(entry.address, address_field)
    check_model_and_region(entry.model, entry.region, where)
    if entry.kind is not None:
        try:
            classify(entry.label or "", entry.kind)
        except InputError as exc:
            raise InputError(name("kind", "--kind"), exc.problem, exc.allowed) from None


def check_model_and_region(model: Any, region: Any, where: str | None = None) -> None:
    """`--model` / `--region` (or a file entry's `model` / `region` under `where`)."""
    from peagle_deploy.validation.aws_shapes import REGION_RE

    if model is not None:
        check_text(model, f"{where}.model" if where else "--model", MAX_MODEL, "a model name")
    if region is not None and (not isinstance(region, str) or not REGION_RE.match(region)):
        field = f"{where}.region" if where else "--region"
        raise InputError(field, f"{region!r} is not a region name", "e.g. us-east-1")


def check_text(value: Any, field: str, limit: int, allowed: str = "text") -> None:
    if not isinstance(value, str) or not value.strip():
        raise InputError(field, f"{value!r} is not a non-empty string", allowed)
    if len(value) > limit:
        raise InputError(field, f"is longer than {limit} characters", allowed)
    if not value.isprintable():  # a newline or an escape sequence would break tables and logs
        raise InputError(field, f"{value!r} holds control characters", allowed)


def pairs(items: list[str], flag: str) -> dict[str, str]:
    """`label=value` items (the value may contain `=`); duplicate labels refused."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(flag, f"{item!r} is not label=value", "label=value")
        if key.strip() in out:
            raise InputError(flag, f"label {key.strip()!r} is given twice", "unique labels")
        out[key.strip()] = value.strip()
    return out


def compare_entries(targets: list[str], file: Path | None) -> list[TargetEntry]:
    """Targets from --target label=ADDRESS flags and/or a YAML/JSON file, all checked."""
    entries = [TargetEntry(label, address) for label, address in pairs(targets, "--target").items()]
    for entry in entries:
        check_entry(entry, "--target")
    if file is not None:
        entries += file_entries(file)
    if not entries:
        raise InputError("--target", "no targets given", "label=URL, label=endpoint:NAME, --file")
    labels = [entry.label for entry in entries]
    twice = sorted({lb for lb in labels if lb is not None and labels.count(lb) > 1})
    if twice:
        raise InputError("--target", f"duplicate labels {', '.join(twice)}", "unique labels")
    return entries


def file_entries(file: Path) -> list[TargetEntry]:
    from peagle_deploy.documents import load_mapping

    doc = load_mapping(file, "--file")
    items = doc.get("targets")
    if not isinstance(items, list) or not items:
        raise InputError("--file", f"{file} has no `targets:` list", "targets: [{label, url}]")
    entries: list[TargetEntry] = []
    for i, item in enumerate(items):
        where = f"--file targets[{i}]"
        if not isinstance(item, dict):
            raise InputError(where, "is not a mapping", FILE_KEYS)
        unknown = sorted(str(key) for key in set(item) - set(FILE_KEYS))
        if unknown:
            raise InputError(where, f"unknown keys {', '.join(unknown)}", FILE_KEYS)
        if item.get("label") is None:
            raise InputError(f"{where}.label", "is missing")
        url, endpoint = item.get("url"), item.get("endpoint")
        if (url is None) == (endpoint is None):
            raise InputError(where, "needs exactly one of url, endpoint")
        for key in ("url", "endpoint", "kind"):
            if item.get(key) is not None:
                check_text(item[key], f"{where}.{key}", 2048)
        k = item.get("k")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise InputError(f"{where}.k", f"{k!r} is not a K", "integers >= 1")
        entry = TargetEntry(
            label=item["label"],
            address=url if url is not None else f"endpoint:{endpoint}",
            model=item.get("model"),
            region=item.get("region"),
            kind=item.get("kind"),
            k=k,
        )
        check_entry(entry, f"{where}.{'url' if url is not None else 'endpoint'}", where)
        entries.append(entry)
    return entries
