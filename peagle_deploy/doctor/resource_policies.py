"""The resource's side: bucket, key and repository policies, read read-only.

Each read answers who owns the resource (the caller's account, another one, or unknown)
and what its policy says, or why it cannot be read, with the permission to grant:

- S3 `GetBucketPolicy`: only the owner's account may call it (a 405 MethodNotAllowed for
  anyone else, botocore's s3 model documentation); `NoSuchBucketPolicy`: no policy.
  JumpStart's content bucket (`jumpstart-cache-prod-<region>`, the catalog's
  JUMPSTART_BUCKET) belongs to AWS and is public (catalog/models.py): not read.
- KMS `GetKeyPolicy` (PolicyName `default`): not for another account's key, whose
  account is in its ARN.
- ECR `GetRepositoryPolicy` for an image of the caller's account;
  `RepositoryPolicyNotFoundException`: no policy. Another account's repository is not
  read (`image.exists` pulls its manifest as the caller).

Policy text is parsed with the container's strict JSON rules (each key once, bounded
size and depth): a policy doctor cannot parse is reported, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from peagle_serve import strict_json

from peagle_deploy.doctor.context import DoctorContext, error_code, is_access_denied, short_error
from peagle_deploy.doctor.decision import ResourceSide, no_policy, unreadable
from peagle_deploy.doctor.policy_eval import Outcome, PolicyError, Request, evaluate

POLICY_MAX_BYTES = 64 * 1024
"""Largest policy text parsed (IAM caps bucket policies at 20 KB, key policies at 32 KB,
repository policies at 10 KB; beyond is not a policy)."""
_JUMPSTART = re.compile(r"^jumpstart-cache-prod-[a-z0-9-]+$")

Owner = Literal["self", "other", "unknown", "aws"]


@dataclass(frozen=True)
class PolicyRead:
    """A resource policy as read: its document (None: the resource has none)."""

    where: str
    owner: Owner
    document: dict[str, Any] | None = None
    problem: str = ""
    """Why the policy is unknown (and what to grant), when it could not be read."""
    public: bool = False
    """A bucket AWS documents as readable by every account (JumpStart's)."""

    @property
    def same_account(self) -> bool | None:
        return {"self": True, "other": False, "aws": False}.get(self.owner)

    def side(self, request: Request) -> ResourceSide:
        """The resource's side of `request`."""
        if self.public:
            return ResourceSide(Outcome(allow_anyone=True), self.where)
        if self.problem:
            return unreadable(self.where, self.problem)
        if self.document is None:
            return no_policy(self.where)
        try:
            return ResourceSide(evaluate(self.document, request, resource_policy=True), self.where)
        except PolicyError as exc:
            return unreadable(self.where, f"doctor cannot evaluate it: {exc}")


def _parse(text: Any, where: str) -> dict[str, Any] | str:
    """The policy document, or why it is not one."""
    if isinstance(text, dict):
        return text
    try:
        value = strict_json.loads(str(text), what=where, max_bytes=POLICY_MAX_BYTES)
    except strict_json.JsonInputError as exc:
        return f"not a policy doctor can read ({exc.problem})"
    if not isinstance(value, dict):
        return "not a policy doctor can read (not a JSON object)"
    return value


def _read(
    where: str, owner: Owner, call: Any, *, none_codes: tuple[str, ...], grant: str
) -> PolicyRead:
    try:
        text = call()
    except Exception as exc:
        code = error_code(exc)
        if code in none_codes:
            return PolicyRead(where, owner)
        if is_access_denied(exc):
            return PolicyRead(where, owner, problem=f"{short_error(exc)}; grant the caller {grant}")
        return PolicyRead(where, owner, problem=short_error(exc))
    parsed = _parse(text, where)
    if isinstance(parsed, str):
        return PolicyRead(where, owner, problem=parsed)
    return PolicyRead(where, owner, parsed)


def bucket_policy(ctx: DoctorContext, bucket: str) -> PolicyRead:
    """The bucket's policy (cached per doctor run)."""
    return ctx.memo(("bucket-policy", bucket), lambda: _bucket_policy(ctx, bucket))


def _bucket_policy(ctx: DoctorContext, bucket: str) -> PolicyRead:
    where = f"the bucket policy of {bucket}"
    if _JUMPSTART.match(bucket):
        return PolicyRead(f"JumpStart's public bucket {bucket}", "aws", public=True)
    s3 = ctx.client("s3")
    try:
        text = s3.get_bucket_policy(Bucket=bucket)["Policy"]
    except Exception as exc:
        code = error_code(exc)
        if code == "NoSuchBucketPolicy":
            return PolicyRead(where, "self")
        if code in ("MethodNotAllowed", "405"):
            return PolicyRead(
                where,
                "other",
                problem="the bucket belongs to another account, whose policy only its owner "
                "may read",
            )
        if is_access_denied(exc):
            return PolicyRead(
                where,
                "unknown",
                problem=f"{short_error(exc)}; grant the caller s3:GetBucketPolicy on "
                f"arn:{ctx.partition}:s3:::{bucket} (only the bucket's account can read it)",
            )
        return PolicyRead(where, "unknown", problem=short_error(exc))
    parsed = _parse(text, where)
    if isinstance(parsed, str):
        return PolicyRead(where, "self", problem=parsed)
    return PolicyRead(where, "self", parsed)


def key_policy(ctx: DoctorContext, key_arn: str) -> PolicyRead:
    """The key's policy (cached per doctor run)."""
    return ctx.memo(("key-policy", key_arn), lambda: _key_policy(ctx, key_arn))


def _key_policy(ctx: DoctorContext, key_arn: str) -> PolicyRead:
    where = f"the key policy of {key_arn}"
    account = key_arn.split(":")[4] if key_arn.count(":") >= 5 else ""
    if account != ctx.account_id:
        return PolicyRead(
            where,
            "other",
            problem=f"the key belongs to account {account}, whose key policy only that "
            "account may read",
        )
    kms = ctx.client("kms")
    return _read(
        where,
        "self",
        lambda: kms.get_key_policy(KeyId=key_arn, PolicyName="default")["Policy"],
        none_codes=(),
        grant=f"kms:GetKeyPolicy on {key_arn}",
    )


def repository_policy(ctx: DoctorContext, registry: str, repository: str, arn: str) -> PolicyRead:
    """An own-account repository's policy (cached per doctor run)."""
    return ctx.memo(
        ("repository-policy", registry, repository),
        lambda: _repository_policy(ctx, registry, repository, arn),
    )


def _repository_policy(ctx: DoctorContext, registry: str, repository: str, arn: str) -> PolicyRead:
    where = f"the repository policy of {repository}"
    ecr = ctx.client("ecr")
    return _read(
        where,
        "self",
        lambda: ecr.get_repository_policy(registryId=registry, repositoryName=repository)[
            "policyText"
        ],
        none_codes=("RepositoryPolicyNotFoundException", "RepositoryNotFoundException"),
        grant=f"ecr:GetRepositoryPolicy on {arn}",
    )
