"""Role: the execution role exists, SageMaker may assume it, and IAM lets it read the
model data and drafter, pull the image and decrypt with the keys involved.

Each permission is decided as IAM decides it (`decision.decide`): the role's side from
iam:SimulatePrincipalPolicy (identity policies, permissions boundary, the SCPs the
simulator applies; `simulation`), the resource's side from its bucket, key or
repository policy (`resource_policies`, `policy_eval`). A permission that depends on
what doctor cannot know (a context key, an unreadable policy) is a warning naming it,
never a failure.

For a CDK stage (`peagle doctor --stage`), the role is the one the stack creates: its
side is the stack's planned policy, evaluated here (`PlannedRole`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

from peagle_serve import strict_json

from peagle_deploy.doctor import locations
from peagle_deploy.doctor.context import DoctorContext, could_not_check, error_code
from peagle_deploy.doctor.decision import Decision, Kind, RoleSide, decide, no_policy
from peagle_deploy.doctor.image import parse_image
from peagle_deploy.doctor.policy_eval import (
    PolicyError,
    Principal,
    Request,
    Tri,
    evaluate,
)
from peagle_deploy.doctor.resource_policies import (
    PolicyRead,
    bucket_policy,
    key_policy,
    repository_policy,
)
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned
from peagle_deploy.doctor.simulation import Ask, simulate

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
# What the execution role needs to pull the serving image: the grants of the CDK
# execution role (infra/execution_policy.py ECR_PULL_ACTIONS; a test keeps the two equal).
ECR_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)
ECR_TOKEN_ACTION = "ecr:GetAuthorizationToken"
CONTEXT_S3_RESOURCE_ACCOUNT = "s3:ResourceAccount"
CONTEXT_S3_PREFIX = "s3:prefix"
CONTEXT_KMS_VIA = "kms:ViaService"
CONTEXT_KMS_CALLER = "kms:CallerAccount"
SCP_NOTE = (
    "Organizations policies: the IAM policy simulator applies your SCPs to the role's own "
    "policies, but neither SCPs nor RCPs can be read by a member account, so a deny in "
    "them that applies to a grant made by a bucket, key or repository policy is not seen "
    "by doctor."
)


def role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _role_account(arn: str) -> str:
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 else ""


class RoleView(Protocol):
    """The role SageMaker will run as, and how doctor learns what its policies allow."""

    source: str
    """How messages name its policies (`the role's policies`)."""

    @property
    def arn(self) -> str | None: ...

    @property
    def label(self) -> str:
        """How fixes name the role (`role my-role`, `the stack's role`)."""
        ...

    def skip_reason(self, ctx: DoctorContext) -> str | None: ...

    def sides(self, ctx: DoctorContext, asks: Sequence[Ask]) -> dict[Ask, RoleSide]: ...

    def principal_context(self, ctx: DoctorContext) -> tuple[dict[str, list[str]], tuple[str, ...]]:
        """Known context of the role's requests, and key prefixes known complete."""
        ...


def _principal_keys(arn: str | None, account: str) -> dict[str, list[str]]:
    keys = {"aws:PrincipalAccount": [account], "aws:PrincipalType": ["AssumedRole"]}
    if arn:
        keys["aws:PrincipalArn"] = [arn]
    return keys


@dataclass
class SimulatedRole:
    """An existing role, asked of iam:SimulatePrincipalPolicy (the SDK path)."""

    role_arn: str
    placeholder: bool = False
    source: str = "the role's policies"

    @property
    def arn(self) -> str | None:
        return self.role_arn

    @property
    def label(self) -> str:
        return f"role {role_name(self.role_arn)}"

    def skip_reason(self, ctx: DoctorContext) -> str | None:
        if self.placeholder:
            return "no execution role given (pass --role-arn or execution_role_arn)"
        if _role_account(self.role_arn) != ctx.account_id:
            return (
                f"the role is in account {_role_account(self.role_arn)}, the caller in "
                f"{ctx.account_id}: IAM only shows roles of the caller's account"
            )
        return None

    def sides(self, ctx: DoctorContext, asks: Sequence[Ask]) -> dict[Ask, RoleSide]:
        known, _ = self.principal_context(ctx)
        extra = tuple((k, v[0]) for k, v in sorted(known.items()) if len(v) == 1)
        with_principal = [Ask(a.action, a.resource, a.context + extra) for a in asks]
        found = simulate(ctx.client("iam"), self.role_arn, with_principal)
        return {a: found[b] for a, b in zip(asks, with_principal, strict=True) if b in found}

    def principal_context(self, ctx: DoctorContext) -> tuple[dict[str, list[str]], tuple[str, ...]]:
        keys = _principal_keys(self.role_arn, _role_account(self.role_arn))
        tags = role_tags(ctx, self.role_arn)
        if tags is None:
            return keys, ()
        for key, value in tags.items():
            keys[f"aws:PrincipalTag/{key}"] = [value]
        return keys, ("aws:principaltag/",)


@dataclass
class PlannedRole:
    """A role a CloudFormation stack will create with `policy` (the CDK path)."""

    policy: Mapping[str, Any]
    account: str | None = None
    """The stack's account (None: the caller's)."""
    role_arn: str | None = None
    """The stack's role when it exists already (its name is generated)."""
    source: str = "the stack's planned role policy"

    @property
    def arn(self) -> str | None:
        return self.role_arn

    @property
    def label(self) -> str:
        return "the stack's execution role (infra/role.py)"

    def skip_reason(self, ctx: DoctorContext) -> str | None:
        if self.account and self.account != ctx.account_id:
            return (
                f"the stage deploys to account {self.account}, the caller is in "
                f"{ctx.account_id}: run doctor with credentials of the stage's account"
            )
        return None

    def sides(self, ctx: DoctorContext, asks: Sequence[Ask]) -> dict[Ask, RoleSide]:
        known, prefixes = self.principal_context(ctx)
        out = {}
        for ask in asks:
            account = self.account or ctx.account_id
            request = _request(ask, Principal(account, self.role_arn), known, prefixes)
            outcome = evaluate(self.policy, request, resource_policy=False)
            missing = tuple(sorted(outcome.unknown_keys))
            out[ask] = RoleSide(
                allowed=None if missing else outcome.allow_direct,
                denied=None if missing else outcome.deny,
                missing_keys=missing,
                source=self.source,
            )
        return out

    def principal_context(self, ctx: DoctorContext) -> tuple[dict[str, list[str]], tuple[str, ...]]:
        # The stack's role carries the plan's tags (infra/stack.py tags every resource).
        keys = _principal_keys(self.role_arn, self.account or ctx.account_id)
        for tag in ctx.plan.tags:
            keys[f"aws:PrincipalTag/{tag['Key']}"] = [tag["Value"]]
        return keys, ("aws:principaltag/",)


def role_view(ctx: DoctorContext) -> RoleView:
    if ctx.role is not None:
        view: RoleView = ctx.role
        return view
    return SimulatedRole(ctx.plan.execution_role_arn, placeholder=ctx.plan.has_placeholder_role)


# --- role.trust -----------------------------------------------------------------------


def _trusts_sagemaker(document: Any) -> bool:
    if isinstance(document, str):
        document = strict_json.loads(
            unquote(document), what="trust policy", max_bytes=strict_json.ENV_VALUE_MAX_BYTES
        )
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


def _get_role(ctx: DoctorContext, arn: str) -> dict[str, Any]:
    return ctx.memo(
        ("role", arn), lambda: ctx.client("iam").get_role(RoleName=role_name(arn))["Role"]
    )


def role_tags(ctx: DoctorContext, arn: str) -> dict[str, str] | None:
    """The role's tags (aws:PrincipalTag/*), None when the role cannot be read."""
    try:
        role = _get_role(ctx, arn)
    except Exception:
        return None
    return {str(t["Key"]): str(t["Value"]) for t in role.get("Tags") or [] if "Key" in t}


def check_role(ctx: DoctorContext) -> list[CheckResult]:
    """The role exists and trusts sagemaker.amazonaws.com (an existing role only)."""
    view = role_view(ctx)
    if not isinstance(view, SimulatedRole):
        return []  # the stack creates its role, trusting SageMaker (infra/role.py)
    arn = view.role_arn
    skip = view.skip_reason(ctx)
    if skip:
        return [warned("role.trust", arn, f"could not check: {skip}")]
    try:
        role = _get_role(ctx, arn)
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
    try:
        trusted = _trusts_sagemaker(role.get("AssumeRolePolicyDocument", {}))
    except (strict_json.JsonInputError, ValueError) as exc:
        return [
            warned("role.trust", arn, f"could not check: the trust policy is unreadable ({exc})")
        ]
    if not trusted:
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


# --- permissions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """One permission a check needs, and where the resource's side comes from."""

    ask: Ask
    kind: Kind
    policy: PolicyRead | None = None
    """The resource's policy (None: a resource type without one)."""
    grant: str = ""
    """What to grant the role when its own policies are short (for the fix)."""


def _request(
    ask: Ask,
    principal: Principal,
    known: Mapping[str, list[str]],
    prefixes: tuple[str, ...],
    owner: str | None = None,
) -> Request:
    asked = {k: list(v) if isinstance(v, tuple) else [v] for k, v in ask.context}
    context: dict[str, list[str]] = {**known, **asked}
    if owner:
        context["aws:ResourceAccount"] = [owner]
    return Request(ask.action, ask.resource, principal, context, absent_prefixes=prefixes)


@dataclass
class _Line:
    denied: list[tuple[Need, Decision]] = field(default_factory=list)
    unknown: list[tuple[Need, Decision]] = field(default_factory=list)


def _fix(view: RoleView, need: Need, decision: Decision) -> str:
    where = need.policy.where if need.policy else "the resource's policy"
    if decision.blame == "resource":
        if decision.reason.startswith("explicit deny"):
            return f"remove or narrow the Deny in {where} that matches {view.label}"
        return f"let {where} allow {view.label} {need.ask.action} (or delegate to the account)"
    if decision.blame == "boundary":
        return f"allow {need.ask.action} in the permissions boundary of {view.label}"
    if decision.reason.startswith("explicit deny"):
        return f"remove or narrow the Deny in {view.source} that matches {need.ask.action}"
    return need.grant or f"grant {view.label} {need.ask.action} on {need.ask.resource}"


def permission_line(
    ctx: DoctorContext, check: str, resource: str, needs: Sequence[Need], *, ok: str
) -> CheckResult:
    """One check's line: pass, fail (naming the denied permission and the fix) or warn."""
    view = role_view(ctx)
    skip = view.skip_reason(ctx)
    if skip:
        return warned(check, resource, f"could not check: {skip}")
    try:
        sides = view.sides(ctx, [n.ask for n in needs])
    except PolicyError as exc:
        return warned(check, resource, f"could not check: {view.source}: {exc}")
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return failed(check, resource, "the execution role does not exist", "create the role")
        return _cannot(exc, check, resource, "iam:SimulatePrincipalPolicy")
    known, prefixes = view.principal_context(ctx)
    principal = Principal(ctx.account_id, view.arn)
    line = _Line()
    for need in needs:
        side = sides.get(need.ask)
        if side is None:
            line.unknown.append((need, Decision("unknown", "the simulator gave no answer")))
            continue
        owner = ctx.account_id if need.policy and need.policy.owner == "self" else None
        request = _request(need.ask, principal, known, prefixes, owner)
        resource_side = (
            need.policy.side(request) if need.policy else no_policy("the resource (no policy)")
        )
        same: Tri = need.policy.same_account if need.policy else True
        decision = decide(side, resource_side, kind=need.kind, same_account=same)
        if decision.verdict == "deny":
            line.denied.append((need, decision))
        elif decision.verdict == "unknown":
            line.unknown.append((need, decision))
    if line.denied:
        shown = "; ".join(
            f"{n.ask.action} on {n.ask.resource} ({d.reason})" for n, d in line.denied
        )
        fixes = list(dict.fromkeys(_fix(view, n, d) for n, d in line.denied))
        return failed(check, resource, f"the role may not: {shown}", "; ".join(fixes))
    if line.unknown:
        shown = "; ".join(f"{n.ask.action}: {d.reason}" for n, d in line.unknown)
        keys = sorted({k for _, d in line.unknown for k in d.unknown_keys})
        fix = (
            f"check by hand whether the request carries {', '.join(keys)} as the policy expects"
            if keys
            else ""
        )
        return warned(check, resource, f"could not decide: {shown}", fix)
    return passed(check, resource, ok)


def _s3_needs(ctx: DoctorContext, loc: locations.DataLocation, grant: str) -> list[Need]:
    """The role's reads, with the bucket owner in the context (a role that pins it with
    `s3:ResourceAccount`, as the CDK stack's does, is then judged as S3 would judge it)."""
    part = ctx.partition
    policy = bucket_policy(ctx, loc.bucket)
    owner = ctx.bucket_owner(loc.bucket)
    pinned: tuple[tuple[str, str], ...] = ((CONTEXT_S3_RESOURCE_ACCOUNT, owner),) if owner else ()
    needs = [Need(Ask("s3:GetObject", loc.object_arn(part), pinned), "s3", policy, grant)]
    if loc.is_prefix:
        needs.append(
            Need(
                Ask(
                    "s3:ListBucket",
                    loc.bucket_arn(part),
                    ((CONTEXT_S3_PREFIX, loc.dir_key), *pinned),
                ),
                "s3",
                policy,
                grant,
            )
        )
    return needs


def check_s3_access(ctx: DoctorContext) -> list[CheckResult]:
    """The role may read each S3 location of the model."""
    out = []
    view = role_view(ctx)
    for loc in locations.all_locations(ctx.plan):
        pattern = f"{loc.bucket}/{loc.dir_key}*" if loc.is_prefix else f"{loc.bucket}/{loc.key}"
        grant = f"grant {view.label} s3:GetObject on arn:{ctx.partition}:s3:::{pattern}"
        if loc.is_prefix:
            grant += f" and s3:ListBucket on {loc.bucket_arn(ctx.partition)}"
        check = f"role.s3-{loc.label.replace(' ', '-')}"
        needs = functools.partial(_s3_needs, ctx, loc, grant)
        out.append(_guarded(ctx, check, loc.uri, needs, ok=f"the role may read the {loc.label}"))
    return out


def _guarded(
    ctx: DoctorContext,
    check: str,
    resource: str,
    needs: Callable[[], list[Need]],
    *,
    ok: str,
) -> CheckResult:
    skip = role_view(ctx).skip_reason(ctx)
    if skip:
        return warned(check, resource, f"could not check: {skip}")
    return permission_line(ctx, check, resource, needs(), ok=ok)


def check_image_pull(ctx: DoctorContext) -> list[CheckResult]:
    """The role may pull the serving image."""
    image = parse_image(ctx.plan.image_uri)
    if image is None:
        return []  # the image check reports a non-ECR image
    repo_arn = image.repository_arn(ctx.partition)
    view = role_view(ctx)
    grant = (
        f"grant {view.label} {', '.join(ECR_PULL_ACTIONS)} on {repo_arn} and "
        f"{ECR_TOKEN_ACTION} on *"
    )

    def needs() -> list[Need]:
        own = image.account == ctx.account_id
        # Another account's repository policy is not read (image.exists pulls as the
        # caller): the role's side decides, as for any other policy-less resource.
        policy = repository_policy(ctx, image.account, image.repository, repo_arn) if own else None
        pulls = [Need(Ask(a, repo_arn), "ecr", policy, grant) for a in ECR_PULL_ACTIONS]
        return [*pulls, Need(Ask(ECR_TOKEN_ACTION, "*"), "ecr", None, grant)]

    return [_guarded(ctx, "role.ecr", repo_arn, needs, ok="the role may pull the serving image")]


def _kms_keys(ctx: DoctorContext) -> Iterable[tuple[str, bool]]:
    """(key id, used through S3) for every KMS key the deployment involves."""
    spec = ctx.plan.spec
    if spec.kms_key_id and ctx.role is None:  # a stack encrypts the volume with its own key
        yield spec.kms_key_id, False
    for arn in spec.model_data_kms_key_arns:
        yield arn, True


def _kms_needs(ctx: DoctorContext, ask: Ask, grant: str) -> list[Need]:
    return [Need(ask, "kms", key_policy(ctx, ask.resource), grant)]


def check_kms(ctx: DoctorContext) -> list[CheckResult]:
    """Each key exists and is enabled, and the role may decrypt with it."""
    out = []
    kms = ctx.client("kms")
    view = role_view(ctx)
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
        context: tuple[tuple[str, str], ...] = (
            ((CONTEXT_KMS_VIA, f"s3.{ctx.region}.amazonaws.com"),) if via_s3 else ()
        )
        context += ((CONTEXT_KMS_CALLER, _role_account(view.arn) if view.arn else ctx.account_id),)
        grant = f"grant {view.label} kms:Decrypt on {arn}"

        needs = functools.partial(_kms_needs, ctx, Ask("kms:Decrypt", arn, context), grant)
        out.append(
            _guarded(
                ctx, check, arn, needs, ok="the key is enabled and the role may decrypt with it"
            )
        )
    return out
