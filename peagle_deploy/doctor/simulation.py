"""The role's side of a decision, as iam:SimulatePrincipalPolicy reports it.

The simulator evaluates the role's identity policies with its permissions boundary and
the SCPs of its organization (botocore's iam model: SimulatePrincipalPolicy,
EvaluationResult). It takes a resource policy only for IAM users (`ResourcePolicy`;
`CallerArn` cannot be a role), so the resource's side is read and evaluated by doctor
itself (`decision.decide`).

Read from each result: `EvalDecision`; `MissingContextValues` (per resource, in
`ResourceSpecificResults`, when resources are named) - keys the policies asked for that
doctor did not supply, which make the decision a warning naming them;
`PermissionsBoundaryDecisionDetail` (a resource policy's grant to the role is still
limited by the boundary); `OrganizationsDecisionDetail`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from peagle_deploy.doctor.decision import RoleSide

MAX_PAGES = 20
"""SimulatePrincipalPolicy pages read per question (each holds up to 100 results; a
question here has at most four actions)."""


@dataclass(frozen=True)
class Ask:
    """One question to the simulator: may the role do `action` on `resource`?"""

    action: str
    resource: str
    context: tuple[tuple[str, str | tuple[str, ...]], ...] = ()
    """Context keys and their value (a tuple: a multi-valued key)."""


def _flag(detail: Any, key: str) -> bool | None:
    if isinstance(detail, Mapping) and isinstance(detail.get(key), bool):
        return bool(detail[key])
    return None


def role_side(result: Mapping[str, Any], resource: str) -> RoleSide:
    """The RoleSide of one EvaluationResult for `resource`."""
    specific = next(
        (
            r
            for r in result.get("ResourceSpecificResults") or []
            if r.get("EvalResourceName") == resource
        ),
        None,
    )
    decision = str((specific or {}).get("EvalResourceDecision") or result.get("EvalDecision"))
    missing = {str(k) for k in result.get("MissingContextValues") or []}
    if specific is not None:
        missing |= {str(k) for k in specific.get("MissingContextValues") or []}
    boundary = _flag(
        (specific or {}).get("PermissionsBoundaryDecisionDetail")
        or result.get("PermissionsBoundaryDecisionDetail"),
        "AllowedByPermissionsBoundary",
    )
    organizations = _flag(result.get("OrganizationsDecisionDetail"), "AllowedByOrganizations")
    if missing:
        # Decided with those keys absent; the real request may carry them.
        return RoleSide(
            allowed=None,
            denied=None,
            boundary_allows=None if boundary is False else True,
            organizations_allow=organizations is not False,
            missing_keys=tuple(sorted(missing)),
            without_missing=decision,
        )
    return RoleSide(
        allowed=decision == "allowed",
        denied=decision == "explicitDeny",
        boundary_allows=boundary is not False,
        organizations_allow=organizations is not False,
    )


def decided(side: RoleSide, known_absent: Callable[[str], bool]) -> RoleSide:
    """`side` decided after all when every key it missed is known to be absent from the
    real request (the simulator evaluated the request as IAM will)."""
    if side.allowed is not None or not all(known_absent(k) for k in side.missing_keys):
        return side
    return replace(
        side,
        allowed=side.without_missing == "allowed",
        denied=side.without_missing == "explicitDeny",
        missing_keys=(),
    )


_ENTRY_TYPES = {"Bool": "boolean", "Numeric": "numeric", "ArrayOfString": "stringList"}
"""The reference's condition key types -> SimulatePrincipalPolicy's ContextKeyType
(botocore's iam model: string, stringList, numeric, boolean, ...; an ARN is a string)."""


def _entry(key: str, value: str | tuple[str, ...], kind: str) -> dict[str, Any]:
    values = list(value) if isinstance(value, tuple) else [value]
    entry_type = _ENTRY_TYPES.get(kind, "stringList" if isinstance(value, tuple) else "string")
    if isinstance(value, tuple) and not entry_type.endswith("List"):
        entry_type += "List"
    return {"ContextKeyName": key, "ContextKeyValues": values, "ContextKeyType": entry_type}


def simulate(
    iam: Any,
    role_arn: str,
    asks: Sequence[Ask],
    key_types: Mapping[str, str] | None = None,
) -> dict[Ask, RoleSide]:
    """The role's side for each ask (one SimulatePrincipalPolicy call per resource and
    context, its pages bounded). `key_types`: a context key's type as the Service
    Authorization Reference gives it (`String` when absent)."""
    sides: dict[Ask, RoleSide] = {}
    groups: dict[tuple[str, tuple[tuple[str, str | tuple[str, ...]], ...]], list[Ask]] = {}
    for ask in asks:
        groups.setdefault((ask.resource, ask.context), []).append(ask)
    for (resource, context), group in groups.items():
        request: dict[str, Any] = {
            "PolicySourceArn": role_arn,
            "ActionNames": sorted({a.action for a in group}),
            "ResourceArns": [resource],
        }
        if context:
            request["ContextEntries"] = [
                _entry(k, v, (key_types or {}).get(k, "String")) for k, v in context
            ]
        pages = iam.get_paginator("simulate_principal_policy").paginate(**request)
        for number, page in enumerate(pages, start=1):
            for result in page.get("EvaluationResults", []):
                for ask in group:
                    if ask.action == result.get("EvalActionName"):
                        sides[ask] = role_side(result, resource)
            if all(a in sides for a in group) or number >= MAX_PAGES:
                break
    return sides
