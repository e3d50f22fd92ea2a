"""Role: the execution role exists, SageMaker may assume it, and its policies let it read
the model data and drafter, pull the image and decrypt the keys involved.

Permissions are asked of IAM's policy simulator (iam:SimulatePrincipalPolicy), which
evaluates the role's identity policies with its permissions boundary and the
organization's SCPs (botocore's iam model: EvaluationResult.PermissionsBoundaryDecision-
Detail, OrganizationsDecisionDetail). It takes a resource policy only for IAM users, so
bucket, KMS key and ECR repository policies are not seen: a grant or deny there is not
reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from peagle_deploy.doctor import locations
from peagle_deploy.doctor.context import (
    DoctorContext,
    could_not_check,
    error_code,
)
from peagle_deploy.doctor.image import parse_image
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
# What the execution role needs to pull the serving image: the grants of the CDK
# execution role (infra/role.py ECR_PULL_ACTIONS; a test keeps the two equal).
ECR_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)
ECR_TOKEN_ACTION = "ecr:GetAuthorizationToken"
CONTEXT_S3_RESOURCE_ACCOUNT = "s3:ResourceAccount"
CONTEXT_S3_PREFIX = "s3:prefix"
CONTEXT_KMS_VIA = "kms:ViaService"


@dataclass(frozen=True)
class Ask:
    """One question to the simulator: may the role do `action` on `resource`?"""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


def _role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _role_account(arn: str) -> str:
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 else ""


def _skip_reason(ctx: DoctorContext) -> str | None:
    plan = ctx.plan
    if plan.has_placeholder_role:
        return "no execution role given (pass --role-arn or execution_role_arn)"
    if _role_account(plan.execution_role_arn) != ctx.account_id:
        return (
            f"the role is in account {_role_account(plan.execution_role_arn)}, the caller "
            f"in {ctx.account_id}: IAM only shows roles of the caller's account"
        )
    return None


def _trusts_sagemaker(document: Any) -> bool:
    if isinstance(document, str):
        import json
        from urllib.parse import unquote

        document = json.loads(unquote(document))
    statements = document.get("Statement", []) if isinstance(document, dict) else []
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        principal = statement.get("Principal", {})
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        services = [services] if isinstance(services, str) else services
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if SAGEMAKER_PRINCIPAL in services and any(
            a in ("sts:AssumeRole", "sts:*", "*") for a in actions
        ):
            return True
    return False


def check_role(ctx: DoctorContext) -> list[CheckResult]:
    """The role exists and trusts sagemaker.amazonaws.com."""
    arn = ctx.plan.execution_role_arn
    skip = _skip_reason(ctx)
    if skip:
        return [warned("role.trust", arn, f"could not check: {skip}")]
    try:
        role = ctx.client("iam").get_role(RoleName=_role_name(arn))["Role"]
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return [
                failed(
                    "role.trust",
                    arn,
                    f"the role does not exist in account {ctx.account_id}",
                    "create the execution role (or fix --role-arn)",
                )
            ]
        return [_cannot(exc, "role.trust", arn, "iam:GetRole")]
    if str(role.get("Arn", arn)) != arn:
        return [
            failed(
                "role.trust",
                arn,
                f"the role is {role.get('Arn')} (another path)",
                "use the role's exact ARN",
            )
        ]
    if not _trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
        return [
            failed(
                "role.trust",
                arn,
                f"the trust policy does not let {SAGEMAKER_PRINCIPAL} assume the role",
                f"add a statement allowing sts:AssumeRole to the service principal "
                f"{SAGEMAKER_PRINCIPAL}",
            )
        ]
    return [passed("role.trust", arn, f"exists and trusts {SAGEMAKER_PRINCIPAL}")]


def _cannot(exc: BaseException, check: str, resource: str, action: str) -> CheckResult:
    return could_not_check(
        check,
        resource,
        exc,
        denied=f"the caller may not call {action}",
        fix=f"grant the caller {action}, or check the role's policy by hand",
        failed=f"{action} failed",
    )


def simulate(ctx: DoctorContext, asks: Sequence[Ask]) -> dict[Ask, str]:
    """The simulator's decision (allowed / explicitDeny / implicitDeny) for each ask."""
    iam = ctx.client("iam")
    decisions: dict[Ask, str] = {}
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Ask]] = {}
    for ask in asks:
        groups.setdefault((ask.resource, ask.context), []).append(ask)
    for (resource, context), group in groups.items():
        request: dict[str, Any] = {
            "PolicySourceArn": ctx.plan.execution_role_arn,
            "ActionNames": sorted({a.action for a in group}),
            "ResourceArns": [resource],
        }
        if context:
            request["ContextEntries"] = [
                {"ContextKeyName": k, "ContextKeyValues": [v], "ContextKeyType": "string"}
                for k, v in context
            ]
        for page in iam.get_paginator("simulate_principal_policy").paginate(**request):
            for result in page.get("EvaluationResults", []):
                for ask in group:
                    if ask.action == result["EvalActionName"]:
                        decisions[ask] = str(result["EvalDecision"])
    return decisions


def _permission_line(
    ctx: DoctorContext, check: str, resource: str, asks: Sequence[Ask], *, fix: str, ok: str
) -> CheckResult:
    skip = _skip_reason(ctx)
    if skip:
        return warned(check, resource, f"could not check: {skip}")
    try:
        decisions = simulate(ctx, asks)
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return failed(check, resource, "the execution role does not exist", "create the role")
        return _cannot(exc, check, resource, "iam:SimulatePrincipalPolicy")
    denied = [a for a in asks if decisions.get(a) != "allowed"]
    if denied:
        shown = ", ".join(
            f"{a.action} on {a.resource} ({decisions.get(a, 'not evaluated')})" for a in denied
        )
        return failed(check, resource, f"the role may not: {shown}", fix)
    return passed(check, resource, ok)


def _s3_asks(ctx: DoctorContext, loc: locations.DataLocation) -> list[Ask]:
    """The role's reads, with the bucket owner in the context (a role that pins it with
    `s3:ResourceAccount`, as the CDK stack's does, is then judged as S3 would judge it)."""
    part = ctx.partition
    owner = ctx.bucket_owner(loc.bucket)
    pinned: tuple[tuple[str, str], ...] = ((CONTEXT_S3_RESOURCE_ACCOUNT, owner),) if owner else ()
    asks = [Ask("s3:GetObject", loc.object_arn(part), pinned)]
    if loc.is_prefix:
        context = ((CONTEXT_S3_PREFIX, loc.dir_key), *pinned)
        asks.append(Ask("s3:ListBucket", loc.bucket_arn(part), context))
    return asks


def check_s3_access(ctx: DoctorContext) -> list[CheckResult]:
    """The role may read each S3 location of the model."""
    out = []
    role = _role_name(ctx.plan.execution_role_arn)
    for loc in locations.all_locations(ctx.plan):
        pattern = f"{loc.bucket}/{loc.dir_key}*" if loc.is_prefix else f"{loc.bucket}/{loc.key}"
        fix = f"grant role {role} s3:GetObject on arn:{ctx.partition}:s3:::{pattern}"
        if loc.is_prefix:
            fix += f" and s3:ListBucket on {loc.bucket_arn(ctx.partition)}"
        out.append(
            _permission_line(
                ctx,
                f"role.s3-{loc.label.replace(' ', '-')}",
                loc.uri,
                _s3_asks(ctx, loc),
                fix=fix,
                ok=f"the role may read the {loc.label}",
            )
        )
    return out


def check_image_pull(ctx: DoctorContext) -> list[CheckResult]:
    """The role may pull the serving image."""
    image = parse_image(ctx.plan.image_uri)
    if image is None:
        return []  # the image check reports a non-ECR image
    repo_arn = image.repository_arn(ctx.partition)
    asks = [Ask(a, repo_arn) for a in ECR_PULL_ACTIONS] + [Ask(ECR_TOKEN_ACTION, "*")]
    fix = (
        f"grant role {_role_name(ctx.plan.execution_role_arn)} {', '.join(ECR_PULL_ACTIONS)} on "
        f"{repo_arn} and {ECR_TOKEN_ACTION} on *"
    )
    return [
        _permission_line(
            ctx, "role.ecr", repo_arn, asks, fix=fix, ok="the role may pull the serving image"
        )
    ]


def _kms_keys(ctx: DoctorContext) -> Iterable[tuple[str, bool]]:
    """(key id, used through S3) for every KMS key the deployment involves."""
    spec = ctx.plan.spec
    if spec.kms_key_id:
        yield spec.kms_key_id, False
    for arn in spec.model_data_kms_key_arns:
        yield arn, True


def check_kms(ctx: DoctorContext) -> list[CheckResult]:
    """Each key exists and is enabled, and the role may decrypt with it."""
    out = []
    kms = ctx.client("kms")
    for key, via_s3 in _kms_keys(ctx):
        check = "role.kms-model-data" if via_s3 else "role.kms-volume"
        try:
            meta = kms.describe_key(KeyId=key)["KeyMetadata"]
        except Exception as exc:
            if error_code(exc) == "NotFoundException":
                out.append(failed(check, key, "the KMS key does not exist", "fix the key id"))
            else:
                out.append(_cannot(exc, check, key, "kms:DescribeKey"))
            continue
        state = str(meta.get("KeyState", "Enabled"))
        if state != "Enabled":
            out.append(
                failed(check, key, f"the KMS key is {state}", "enable the key or use another one")
            )
            continue
        arn = str(meta["Arn"])
        context = ((CONTEXT_KMS_VIA, f"s3.{ctx.region}.amazonaws.com"),) if via_s3 else ()
        out.append(
            _permission_line(
                ctx,
                check,
                arn,
                [Ask("kms:Decrypt", arn, context)],
                fix=f"grant role {_role_name(ctx.plan.execution_role_arn)} kms:Decrypt on {arn} "
                "(and allow it in the key policy)",
                ok="the key is enabled and the role may decrypt with it",
            )
        )
    return out
