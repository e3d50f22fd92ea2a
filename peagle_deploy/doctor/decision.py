"""One IAM decision from the role's side and the resource's side, as AWS documents it.

AWS's policy evaluation logic (docs/platform-facts.md, "How IAM decides"):

- an explicit Deny in any policy that applies (identity, permissions boundary, SCP,
  resource policy) ends the evaluation: denied;
- same account: an Allow in the identity policies OR in the resource policy is enough,
  except that a resource policy's grant to the role's ARN is still limited by an
  implicit deny of the role's permissions boundary;
- cross account: the identity policies AND the resource policy must both allow;
- KMS: the key policy must allow, either naming the principal or delegating to the
  account (`arn:...:root`), in which case the account's IAM policies must allow too;
  without a key policy grant, IAM policies have no effect.

The role's side comes from iam:SimulatePrincipalPolicy (identity policies with the
permissions boundary and the SCPs the simulator applies) or, for a role a stack has
not created yet, from its planned policy. The resource's side comes from the bucket,
key or repository policy (`policy_eval.evaluate`). Either side may be unknown in part
(`Tri` None): then the verdict is `unknown`, a warning naming what doctor could not
know, never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from peagle_deploy.doctor.policy_eval import Outcome, Tri, tri_and, tri_or

Kind = Literal["s3", "ecr", "kms"]
Verdict = Literal["allow", "deny", "unknown"]
Blame = Literal["role", "resource", "boundary", ""]
"""Which policy to change for a denied request: the role's, the resource's, the boundary."""


@dataclass(frozen=True)
class RoleSide:
    """What the role's own policies decide (the simulator's view)."""

    allowed: Tri
    """The identity policies allow (within the boundary and the SCPs)."""
    denied: Tri
    """An explicit Deny in the identity policies, the boundary or an SCP."""
    boundary_allows: Tri = True
    """The permissions boundary allows (True when the role has none)."""
    organizations_allow: bool = True
    """The SCPs allow, as the simulator evaluates them (True outside an organization)."""
    missing_keys: tuple[str, ...] = ()
    """Context keys the role's policies asked for and doctor could not supply."""
    without_missing: str | None = None
    """With `missing_keys`: what the simulator decided with them absent (its EvalDecision),
    which is IAM's decision when they are known to be absent."""
    source: str = "the role's policies"


@dataclass(frozen=True)
class ResourceSide:
    """What the resource's policy decides, or why it is unknown."""

    outcome: Outcome
    where: str
    """`the bucket policy of models`, `the key policy of arn:...`: for messages."""
    readable: bool = True
    why_unknown: str = ""
    """When not readable: why (and what to grant)."""


def no_policy(where: str) -> ResourceSide:
    """A resource without a policy: it grants nothing and denies nothing."""
    return ResourceSide(Outcome(), where)


def unreadable(where: str, why: str) -> ResourceSide:
    """A policy doctor may not read: anything is possible."""
    return ResourceSide(
        Outcome(allow_direct=None, allow_anyone=None, allow_account=None, deny=None),
        where,
        readable=False,
        why_unknown=why,
    )


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    """Why, in words for the doctor's table (the policy that decided)."""
    unknown_keys: tuple[str, ...] = field(default_factory=tuple)
    blame: Blame = ""


def _allow_paths(role: RoleSide, res: Outcome, kind: Kind, same_account: bool) -> Tri:
    """Whether the request is allowed, explicit denies aside."""
    # A grant to the role itself stands on its own in the same account, but an implicit
    # deny of the boundary still limits a grant to the role's ARN. Whether it limits a
    # grant to "*" the documentation doctor cites does not say: not decided.
    boundary_on_anyone: Tri = None if role.boundary_allows is False else role.boundary_allows
    resource_own = tri_or(
        [
            tri_and([res.allow_direct, role.boundary_allows]),
            tri_and([res.allow_anyone, boundary_on_anyone]),
        ]
    )
    delegated = tri_and([res.allow_account, role.allowed])
    if not same_account:
        return tri_and(
            [role.allowed, tri_or([res.allow_direct, res.allow_anyone, res.allow_account])]
        )
    if kind == "kms":
        return tri_or([resource_own, delegated])
    return tri_or([role.allowed, resource_own])


def decide(role: RoleSide, resource: ResourceSide, *, kind: Kind, same_account: Tri) -> Decision:
    """The verdict for one request of the role on one resource."""
    res = resource.outcome
    if res.deny is True:
        return Decision("deny", f"explicit deny in {resource.where}", blame="resource")
    if role.organizations_allow is False:
        # The simulator applies SCPs without the request's context (and does not list
        # the keys they use); a member account cannot read them to do better.
        return Decision(
            "unknown",
            "your organization's SCPs deny it as the IAM policy simulator evaluates them, "
            "without the request's context; doctor cannot read the SCPs",
        )
    if role.denied is True:
        return Decision("deny", f"explicit deny in {role.source}", blame="role")
    if same_account is None:
        both = {_allow_paths(role, res, kind, True), _allow_paths(role, res, kind, False)}
        allowed: Tri = both.pop() if len(both) == 1 else None
    else:
        allowed = _allow_paths(role, res, kind, same_account)
    if allowed is False:
        reason, blame = _not_allowed(role, resource, kind, same_account)
        return Decision("deny", reason, blame=blame)
    unknown = sorted(set(role.missing_keys) | res.unknown_keys)
    if allowed is True and role.denied is False and res.deny is False:
        return Decision("allow", _allowed_reason(role, res, kind, same_account))
    reasons = []
    if not resource.readable:
        reasons.append(f"{resource.where} could not be read ({resource.why_unknown})")
    if role.denied is None:
        reasons.append(f"{role.source} may deny it")
    elif res.deny is None and resource.readable:
        reasons.append(f"{resource.where} may deny it")
    if allowed is None and resource.readable:
        reasons.append("whether a policy allows it depends on the request")
    if unknown:
        reasons.append("on context doctor cannot know: " + ", ".join(unknown))
    return Decision("unknown", "; ".join(reasons) or "undecided", tuple(unknown))


def _allowed_reason(role: RoleSide, res: Outcome, kind: Kind, same_account: Tri) -> str:
    if kind == "kms":
        if res.allow_direct is True or res.allow_anyone is True:
            return "the key policy allows the role"
        return "the key policy delegates to the account's IAM policies, which allow it"
    if role.allowed is True and same_account is not False:
        return "the role's policies allow it"
    if same_account is False:
        return "the role's policies and the resource policy allow it"
    return "the resource policy allows the role"


def _not_allowed(
    role: RoleSide, resource: ResourceSide, kind: Kind, same_account: Tri
) -> tuple[str, Blame]:
    res = resource.outcome
    if kind == "kms":
        if res.allow is False:
            return (
                f"{resource.where} neither names the role nor delegates to the account",
                "resource",
            )
        if res.allow_account is True and role.allowed is False:
            return (
                f"{resource.where} delegates to the account's IAM policies, and "
                f"{role.source} do not allow it",
                "role",
            )
        if role.boundary_allows is False:
            return (
                f"{resource.where} names the role, but its permissions boundary does not allow it",
                "boundary",
            )
        return f"{resource.where} does not allow the role", "resource"
    if same_account is False:
        if role.allowed is False:
            return f"cross-account: {role.source} do not allow it", "role"
        return f"cross-account: {resource.where} does not grant the role or its account", "resource"
    if role.boundary_allows is False and res.allow_direct is True:
        return (
            f"{resource.where} grants the role, but its permissions boundary does not allow it",
            "boundary",
        )
    return f"neither {role.source} nor {resource.where} allow it", "role"
