"""Names of the SageMaker resources peagle-deploy makes, in one place.

An endpoint is named `peagle-<model>-<stage>` unless the spec names it. Its models and
endpoint configs are named after it plus a content digest: `<head>-m<8 hex>` and
`<head>-c<8 hex>`, so the whole name fits SageMaker's 63 characters. `<head>` is the
endpoint's identity: the endpoint name itself when it has 53 characters or fewer (every
default name of the catalog's models), else its first 40 characters, a dash and 12 hex
digits of the SHA-256 of the whole name, so two endpoint names that only differ after
their 40th character never share a head. The planner makes these names; the SDK
recognises them to clean up only what the planner made; every IAM grant on them
(`derived_grant`, through `peagle_deploy.access.endpoint_grants`) is spelled here once.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

MAX_NAME = 63
"""SageMaker's limit for endpoint, endpoint-config and model names."""
DIGEST_LEN = 8
"""Hex digits of the content digest at the end of a derived name."""
NAME_DIGEST_LEN = 12
"""Hex digits of the endpoint name's own digest in the head of a name that is cut."""

MANAGED_TAG = "peagle:managed"
STAGE_TAG = "peagle:stage"
SPEC_HASH_TAG = "peagle:spec-hash"
MODEL_TAG = "peagle:model"
MANAGED_TAG_COUNT = 4
"""The tags peagle-deploy puts on every resource it makes (user tags cannot use `peagle:`)."""
EXPERIMENT_STAGE_TAG = "peagle:experiment-stage"
"""On the role SageMaker assumes to run a stage's shadow experiments: the one role that
stage's CI role may pass as an InferenceExperiment's RoleArn (never `peagle:stage`, which
marks the execution roles it may pass)."""

DerivedKind = Literal["m", "c", "x"]
"""`m`: model; `c`: endpoint config; `x`: inference experiment (a shadow experiment)."""

_HEAD_LEN = MAX_NAME - len("-m") - DIGEST_LEN
_KEPT_LEN = _HEAD_LEN - len("-") - NAME_DIGEST_LEN
# What the head of a cut name looks like; a short name of this shape could be spelled
# like some long name's head, so it is never swept by name (see `sweepable`).
_CUT_HEAD = re.compile(rf"^.{{1,{_KEPT_LEN}}}-[0-9a-f]{{{NAME_DIGEST_LEN}}}$")


def slug(text: str) -> str:
    """Lowercase `[a-z0-9-]` with single dashes, for resource names."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "model"


def default_endpoint_name(model_name: str, stage: str) -> str:
    """`peagle-<model>-<stage>`, the model part shortened to fit 63 characters."""
    suffix = f"-{slug(stage)}"
    head = f"peagle-{slug(model_name)}"[: MAX_NAME - len(suffix)].rstrip("-")
    return head + suffix


def name_digest(endpoint_name: str) -> str:
    """NAME_DIGEST_LEN hex digits of the SHA-256 of the whole endpoint name, lowercased:
    SageMaker takes endpoint names case-insensitively (botocore, CreateEndpoint's
    EndpointName), so two spellings of one endpoint keep one identity."""
    return hashlib.sha256(endpoint_name.lower().encode()).hexdigest()[:NAME_DIGEST_LEN]


def derived_head(endpoint_name: str) -> str:
    """The identity every derived name starts with: the endpoint name when it fits,
    else its first characters and the digest of the whole name (`name_digest`)."""
    if len(endpoint_name) <= _HEAD_LEN:
        return endpoint_name.rstrip("-")
    return f"{endpoint_name[:_KEPT_LEN].rstrip('-')}-{name_digest(endpoint_name)}"


def derived_prefix(endpoint_name: str, kind: DerivedKind) -> str:
    """`<head>-m` / `<head>-c`: what stays when the content (and so the digest) changes.

    IAM permissions on `model/<prefix>` plus exactly the digest's characters keep the old
    model of a replaced spec deletable, while models of other endpoints (another head)
    are not.
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


def derived_grant(endpoint_name: str, kind: DerivedKind) -> str:
    """The IAM resource-name pattern of every name `derived_name(endpoint_name, kind, ...)`
    can return: the prefix and exactly DIGEST_LEN more characters (`?`), so
    `<endpoint>-mirror` and longer names never match. The one spelling of the grant."""
    return derived_prefix(endpoint_name, kind) + "?" * DIGEST_LEN


def sweepable(endpoint_name: str) -> bool:
    """Whether derived names identify this endpoint alone, so that resources found by
    name (not referenced by the endpoint) may be removed.

    A name of 53 characters or fewer is its own head; a longer one's head is its first
    40 characters plus the digest of the whole name. Only a short name spelled exactly
    like such a head could share one with a long name: long names and short names of
    that shape are never swept by name, only what the endpoint references is removed.
    """
    return len(endpoint_name) <= _HEAD_LEN and not _CUT_HEAD.fullmatch(endpoint_name)


def name_contains(endpoint_name: str) -> str:
    """The `NameContains` filter that lists this endpoint's derived models and configs.

    botocore's EndpointConfigNameContains / ModelNameContains: up to 63 of
    `[a-zA-Z0-9-]`; the head always fits.
    """
    return derived_head(endpoint_name)


def endpoint_log_group_name(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's container output to."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def provider_log_group_name(endpoint_name: str) -> str:
    """The CDK model provider's log group: a fixed name, so the stack key's policy can
    name it."""
    return f"/peagle-deploy/{endpoint_name}/model-provider"
