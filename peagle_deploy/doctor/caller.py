"""May the caller make the calls of the coming run? Asked of IAM's policy simulator.

The calls the coming run makes (a deploy, a promotion, an experiment: doctor/coming.py;
the call ledger, tests/infra/test_infra_call_ledger.py, checks them against what those
runs really call) are turned into IAM requests by `catalog.iam_calls` (the action, every
resource the Service Authorization Reference requires, the condition keys the call's
parameters decide) and asked of `iam:SimulatePrincipalPolicy` for the caller's own
role (an assumed-role session ARN becomes its role's ARN; a caller that is not a role
session is not asked), in a few calls. A request the simulator denies is one failed
line; one it decides with a context key missing (a resource's tags no call names) is a
warning naming the key; a caller that may not simulate itself could not be checked.
Before `cdk deploy` (`peagle doctor --stage`) nothing is asked: CloudFormation makes
those calls, with CDK's bootstrap roles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from peagle_deploy.catalog.iam_calls import IamRequest, Where, distinct, iam_requests
from peagle_deploy.catalog.iam_reference import reference
from peagle_deploy.doctor.coming import coming_calls
from peagle_deploy.doctor.context import DoctorContext, could_not_check
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned
from peagle_deploy.doctor.simulation import Ask, decided, simulate

CHECK = "caller.permissions"
_ASSUMED = re.compile(r"^arn:(?P<p>[^:]+):sts::(?P<a>\d{12}):assumed-role/(?P<role>[^/]+)/.+$")


def caller_principal(arn: str) -> str | None:
    """The principal to simulate for a caller's ARN: a role for an assumed-role session
    (its path is not in the session ARN; roles made by CDK have none), an IAM user as it
    is; None for the root user or a federated user (the simulator takes neither)."""
    assumed = _ASSUMED.match(arn)
    if assumed:
        return f"arn:{assumed['p']}:iam::{assumed['a']}:role/{assumed['role']}"
    if re.match(r"^arn:[^:]+:iam::\d{12}:(role|user)/.+$", arn):
        return arn
    return None


def _role_tags(ctx: DoctorContext, requests: list[IamRequest]) -> dict[str, dict[str, str]]:
    """The tags of the roles the run passes or reads, where the caller may read them
    (GetRole): IAM decides those requests on `aws:ResourceTag/*`, which no call names."""
    iam = ctx.client("iam")
    tags: dict[str, dict[str, str]] = {}
    for arn in sorted({r.resource for r in requests if r.action.startswith("iam:")}):
        if ":role/" not in arn:
            continue
        try:
            role = iam.get_role(RoleName=arn.rsplit("/", 1)[1])["Role"]
        except Exception:
            continue  # not readable: its tags stay unknown, and the line says which key
        tags[arn] = {str(t["Key"]): str(t["Value"]) for t in role.get("Tags") or []}
    return tags


def _asks(
    requests: list[IamRequest], role_tags: Mapping[str, Mapping[str, str]]
) -> dict[Ask, IamRequest]:
    out: dict[Ask, IamRequest] = {}
    for request in requests:
        known = role_tags.get(request.resource, {}) if request.action.startswith("iam:") else {}
        context = {**request.context, **{f"aws:ResourceTag/{k}": v for k, v in known.items()}}
        out[Ask(request.action, request.resource, tuple(sorted(context.items())))] = request
    return out


def _key_types(asks: Mapping[Ask, IamRequest]) -> dict[str, str]:
    ref = reference()
    return {k: ref.key_type(k) for ask in asks for k, _ in ask.context}


def _known_absent(ask: Ask, role_tags: Mapping[str, Mapping[str, str]]) -> Callable[[str], bool]:
    """Which missing context keys the caller knows the request lacks: the tags a role it
    read does not carry (IAM then evaluates them as absent, as the simulator did)."""
    read = ask.action.startswith("iam:") and ask.resource in role_tags

    def absent(key: str) -> bool:
        return read and key.lower().startswith("aws:resourcetag/")

    return absent


def _endpoint_now(ctx: DoctorContext) -> tuple[dict[str, Any] | None, str | None]:
    """The endpoint as it is (None when it does not exist or cannot be read: a denied
    read is itself asked), and the instance type its variant runs."""
    from peagle_deploy.aws import describe_endpoint_or_none, serving_instance_type

    sm = ctx.client("sagemaker")
    try:
        endpoint = describe_endpoint_or_none(sm, ctx.plan.endpoint_name)
    except Exception:
        return None, None
    if endpoint is None or not ctx.plan.autoscaling:
        return endpoint, None
    return endpoint, serving_instance_type(sm, str(endpoint.get("EndpointConfigName", "")))


def check_caller(ctx: DoctorContext) -> list[CheckResult]:
    """One line per request the caller's own policies deny; a pass line otherwise."""
    plan = ctx.plan
    if ctx.coming.kind == "cdk":
        return []
    identity = ctx.client("sts").get_caller_identity()
    principal = caller_principal(str(identity["Arn"]))
    if principal is None or ":role/" not in principal:
        # Asked only for a role session (CI's roles, SSO): an IAM user or the root user
        # is no stage's caller, and says nothing here (docs/doctor.md).
        return []
    endpoint, serving = _endpoint_now(ctx)
    where = Where(plan.region, str(identity["Account"]), ctx.partition)
    requests = distinct(
        [
            r
            for s, op, p in coming_calls(ctx.coming, plan, endpoint, where.account, serving)
            for r in iam_requests(s, op, p, where)
        ]
    )
    role_tags = _role_tags(ctx, requests)
    asks = _asks(requests, role_tags)
    try:
        sides = simulate(ctx.client("iam"), principal, list(asks), key_types=_key_types(asks))
    except Exception as exc:
        return [
            could_not_check(
                CHECK,
                principal,
                exc,
                denied=f"the caller may not simulate its own policies ({principal})",
                fix=f"grant iam:SimulatePrincipalPolicy on {principal} to itself",
                failed="the policy simulator did not answer",
            )
        ]
    sides = {a: decided(side, _known_absent(a, role_tags)) for a, side in sides.items()}
    return _results(principal, asks, sides, ctx.coming.label)


def _results(
    principal: str, asks: Mapping[Ask, IamRequest], sides: Mapping[Ask, Any], run: str
) -> list[CheckResult]:
    results: list[CheckResult] = []
    for ask, request in asks.items():
        side = sides.get(ask)
        where = f"{request.action} on {request.resource}"
        if side is None or side.allowed is None:
            missing = ", ".join(side.missing_keys) if side is not None else "no answer"
            results.append(warned(CHECK, principal, f"{where}: could not decide without {missing}"))
        elif not side.allowed:
            results.append(
                failed(
                    CHECK,
                    principal,
                    f"IAM denies {where}" + (" (explicit Deny)" if side.denied else ""),
                    f"grant {request.action} on {request.resource} to {principal}",
                )
            )
    if not results:
        results.append(passed(CHECK, principal, f"may make all {len(asks)} requests of {run}"))
    return results
