"""Names of the SageMaker resources peagle-deploy makes, in one place.

An endpoint is named `peagle-<model>-<stage>` unless the spec names it. Its models and
endpoint configs are named after it plus a content digest: `<head>-m<8 hex>` and
`<head>-c<8 hex>`, where `<head>` is the endpoint name cut so the whole name fits
SageMaker's 63 characters. The planner makes these names; the SDK recognises them to
clean up only what the planner made; the CDK grants IAM permissions on their prefix.
"""

from __future__ import annotations

import re
from typing import Literal

MAX_NAME = 63
"""SageMaker's limit for endpoint, endpoint-config and model names."""
DIGEST_LEN = 8
"""Hex digits of the content digest at the end of a derived name."""

MANAGED_TAG = "peagle:managed"
STAGE_TAG = "peagle:stage"
SPEC_HASH_TAG = "peagle:spec-hash"
MODEL_TAG = "peagle:model"
MANAGED_TAG_COUNT = 4
"""The tags peagle-deploy puts on every resource it makes (user tags cannot use `peagle:`)."""

DerivedKind = Literal["m", "c", "x"]
"""`m`: model; `c`: endpoint config; `x`: inference experiment (a shadow experiment)."""

_HEAD_LEN = MAX_NAME - len("-m") - DIGEST_LEN


def slug(text: str) -> str:
    """Lowercase `[a-z0-9-]` with single dashes, for resource names."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "model"


def default_endpoint_name(model_name: str, stage: str) -> str:
    """`peagle-<model>-<stage>`, the model part shortened to fit 63 characters."""
    suffix = f"-{slug(stage)}"
    head = f"peagle-{slug(model_name)}"[: MAX_NAME - len(suffix)].rstrip("-")
    return head + suffix


def derived_head(endpoint_name: str) -> str:
    """The part of `endpoint_name` that every derived name starts with."""
    return endpoint_name[:_HEAD_LEN].rstrip("-")


def derived_prefix(endpoint_name: str, kind: DerivedKind) -> str:
    """`<head>-m` / `<head>-c`: what stays when the content (and so the digest) changes.

    IAM permissions on `model/<prefix>*` keep the old model of a replaced spec
    deletable, while models of other endpoints (another prefix) are not.
    """
    return f"{derived_head(endpoint_name)}-{kind}"


def derived_name(endpoint_name: str, kind: DerivedKind, digest: str) -> str:
    """The model (`m`), endpoint-config (`c`) or inference-experiment (`x`) name for
    content digest `digest`."""
    if not re.fullmatch(rf"[0-9a-f]{{{DIGEST_LEN}}}", digest):
        raise ValueError(f"digest must be {DIGEST_LEN} hex digits, got {digest!r}")
    return derived_prefix(endpoint_name, kind) + digest


def derived_name_pattern(endpoint_name: str, kind: DerivedKind) -> re.Pattern[str]:
    """Matches exactly the names `derived_name(endpoint_name, kind, ...)` can return."""
    return re.compile(
        rf"^{re.escape(derived_prefix(endpoint_name, kind))}[0-9a-f]{{{DIGEST_LEN}}}$"
    )


def sweepable(endpoint_name: str) -> bool:
    """Whether derived names identify this endpoint alone.

    Longer names are cut before the digest, so two long endpoint names with the same
    first characters share a head: then only resources the endpoint references are
    removed, never ones found by name.
    """
    return len(endpoint_name) <= _HEAD_LEN


def name_contains(endpoint_name: str) -> str:
    """The `NameContains` filter that lists this endpoint's derived models and configs.

    botocore's EndpointConfigNameContains / ModelNameContains: up to 63 of
    `[a-zA-Z0-9-]`; the head always fits.
    """
    return derived_head(endpoint_name)
