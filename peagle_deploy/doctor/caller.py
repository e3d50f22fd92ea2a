"""May the caller make the calls of the coming deploy? Asked of IAM's policy simulator.

The calls a deploy of the plan makes (the call ledger's, tests/infra/test_infra_call_ledger.py
keeps them equal) are turned into IAM requests by `catalog.iam_calls` (the action, every
resource the Service Authorization Reference requires, the condition keys the call's
parameters decide) and asked of `iam:SimulatePrincipalPolicy` for the caller's own
role (an assumed-role session ARN becomes its role's ARN; a caller that is not a role
session is not asked), in a few calls. A request
the simulator denies is one failed line; one it decides with a context key missing (a
resource's tags no call names) is a warning naming the key; a caller that may not
simulate itself, or that is not a role or user, could not be checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from peagle_deploy.catalog.iam_calls import IamRequest, Where, distinct, iam_requests
from peagle_deploy.catalog.iam_reference import reference
from peagle_deploy.doctor.context import DoctorContext, could_not_check
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned
from peagle_deploy.doctor.simulation import Ask, simulate
from peagle_deploy.plan import Plan

CHECK = "caller.permissions"
Call = tuple[str, str, Mapping[str, Any]]

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


def deploy_calls(plan: Plan, endpoint: Mapping[str, Any] | None, account: str) -> list[Call]:
    """The calls a deploy of `plan` makes that change or read the stage (as the SDK
    makes them: sdk/deploy.py, records/store.py), given the endpoint as it is now."""
    from peagle_deploy.records import manifest_parameter_name

    name = plan.endpoint_name
    parameter = manifest_parameter_name(plan.spec.stage, name)
    endpoint_arn = f"arn:aws:sagemaker:{plan.region}:{account}:endpoint/{name}"
    calls: list[Call] = [
        ("sagemaker", "DescribeEndpoint", {"EndpointName": name}),
        ("sagemaker", "CreateModel", plan.create_model),
        ("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config),
        ("ssm", "GetParameter", {"Name": parameter, "WithDecryption": True}),
        ("ssm", "PutParameter", {"Name": parameter, "Type": "SecureString", "Overwrite": True}),
    ]
    if endpoint is None:
        calls.append(("sagemaker", "CreateEndpoint", plan.create_endpoint))
    else:
        calls.append(("sagemaker", "ListTags", {"ResourceArn": endpoint_arn}))
        calls.append(("sagemaker", "UpdateEndpoint", plan.update_endpoint))
    for ref in plan.secret_refs.values():
        calls.append(
            ("secretsmanager", "GetSecretValue", {"SecretId": ":".join(ref.split(":")[:7])})
        )
    if plan.autoscaling:
        calls.append(
            (
                "application-autoscaling",
                "RegisterScalableTarget",
                plan.autoscaling["register_scalable_target"],
            )
        )
        calls.append(
            ("application-autoscaling", "PutScalingPolicy", plan.autoscaling["put_scaling_policy"])
        )
    return calls


def _asks(requests: list[IamRequest]) -> dict[Ask, IamRequest]:
    out: dict[Ask, IamRequest] = {}
    for request in requests:
        context = tuple(sorted((k, v) for k, v in request.context.items()))
        out[Ask(request.action, request.resource, context)] = request
    return out


def _key_types(asks: Mapping[Ask, IamRequest]) -> dict[str, str]:
    ref = reference()
    return {k: ref.key_type(k) for ask in asks for k, _ in ask.context}


def check_caller(ctx: DoctorContext) -> list[CheckResult]:
    """One line per request the caller's own policies deny; a pass line otherwise."""
    from peagle_deploy.aws import describe_endpoint_or_none

    plan = ctx.plan
    identity = ctx.client("sts").get_caller_identity()
    principal = caller_principal(str(identity["Arn"]))
    if principal is None or ":role/" not in principal:
        # Asked only for a role session (CI's roles, SSO): an IAM user or the root user
        # is no stage's caller, and says nothing here (docs/doctor.md).
        return []
    try:
        endpoint = describe_endpoint_or_none(ctx.client("sagemaker"), plan.endpoint_name)
    except Exception:
        endpoint = None  # a denied read is itself asked below
    where = Where(plan.region, str(identity["Account"]), ctx.partition)
    requests = distinct(
        [
            r
            for s, op, p in deploy_calls(plan, endpoint, where.account)
            for r in iam_requests(s, op, p, where)
        ]
    )
    asks = _asks(requests)
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
    return _results(principal, asks, sides)


def _results(
    principal: str, asks: Mapping[Ask, IamRequest], sides: Mapping[Ask, Any]
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
        results.append(passed(CHECK, principal, f"may make all {len(asks)} requests of the deploy"))
    return results
