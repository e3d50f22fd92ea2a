"""Requests of a SageMaker execution role, with the policies that decide them.

Each case is what doctor sees for one of its checks: the role's identity policies (and
permissions boundary), the resource's policy (bucket, key or repository; None: none),
the account that owns the resource, and the request's context. The expected answer is
not written here: it is whatever the outside evaluator (@cloud-copilot/iam-simulate)
says, and `test_doctor_iam_oracle.py` compares doctor's verdict with it.

`unknown` lists context keys doctor does not know for that case (they are given to the
oracle through `variants` instead: one simulation per value, which must disagree with
each other for doctor's warning to be justified). `undecided` says why doctor warns on a
case that AWS's documentation does not settle (the oracle's answer is recorded, not
followed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "111111111111"
OTHER = "222222222222"
ROLE_PATH = "service-role/peagle-exec"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_PATH}"
SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/peagle-exec/SageMaker"
OBJECT = "arn:aws:s3:::models-bucket/qwen/config.json"
BUCKET = "arn:aws:s3:::models-bucket"
KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OTHER_KEY = f"arn:aws:kms:us-east-1:{OTHER}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
REPO = f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/peagle-vllm"
OTHER_REPO = f"arn:aws:ecr:us-east-1:{OTHER}:repository/peagle-vllm"
V = "2012-10-17"


@dataclass
class Case:
    id: str
    kind: str  # s3 | kms | ecr
    action: str
    resource: str
    resource_account: str
    identity: list[dict[str, Any]]
    resource_policy: dict[str, Any] | None = None
    boundary: dict[str, Any] | None = None
    context: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    variants: list[dict[str, str]] = field(default_factory=list)
    undecided: str = ""


def doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": V, "Statement": list(statements)}


def allow(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def to(principal: Any) -> dict[str, Any]:
    return {"Principal": principal if principal == "*" else {"AWS": principal}}


ROOT = f"arn:aws:iam::{ACCOUNT}:root"
NOTHING = doc(allow("cloudwatch:PutMetricData"))
READ_ALL = doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/*"))
LIST = doc(
    allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": ["qwen/*", "qwen/"]}})
)
DECRYPT = doc(allow("kms:Decrypt", KEY))
DECRYPT_OTHER = doc(allow("kms:Decrypt", OTHER_KEY))
PULL = doc(allow(["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"], "*"))
BOUNDARY_S3 = doc(allow("s3:*"))
BOUNDARY_ECR = doc(allow("ecr:*"))
KEY_ROOT = doc(allow("kms:*", **to(ROOT)))
DECRYPT_VIA_S3 = doc(
    allow("kms:Decrypt", KEY, Condition={"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}})
)


def _s3(id: str, identity: dict[str, Any], bucket: dict[str, Any] | None, **kw: Any) -> Case:
    account = kw.pop("resource_account", ACCOUNT)
    return Case(id, "s3", "s3:GetObject", OBJECT, account, [identity], bucket, **kw)


def _kms(id: str, identity: dict[str, Any], key: dict[str, Any], **kw: Any) -> Case:
    account = kw.pop("resource_account", ACCOUNT)
    resource = KEY if account == ACCOUNT else OTHER_KEY
    return Case(id, "kms", "kms:Decrypt", resource, account, [identity], key, **kw)


def _ecr(id: str, identity: dict[str, Any], repo: dict[str, Any] | None, **kw: Any) -> Case:
    account = kw.pop("resource_account", ACCOUNT)
    resource = REPO if account == ACCOUNT else OTHER_REPO
    return Case(id, "ecr", "ecr:BatchGetImage", resource, account, [identity], repo, **kw)


GRANT_ROLE = doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to(ROLE)))
GRANT_ROOT = doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to(ROOT)))
GRANT_ANYONE = doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to("*")))


def _granted_if(condition: dict[str, Any]) -> dict[str, Any]:
    return doc(
        allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", Condition=condition, **to(ROLE))
    )


CASES: list[Case] = [
    # --- S3, same account: identity OR bucket policy; any explicit deny wins ------------
    _s3("s3.identity-allows.no-policy", READ_ALL, None),
    _s3("s3.nothing-allows", NOTHING, None),
    _s3("s3.bucket-grants-role", NOTHING, GRANT_ROLE),
    _s3("s3.bucket-grants-account-only", NOTHING, GRANT_ROOT),
    _s3("s3.bucket-grants-anyone", NOTHING, GRANT_ANYONE),
    _s3(
        "s3.bucket-denies-role",
        READ_ALL,
        doc(deny("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to(ROLE))),
    ),
    _s3(
        "s3.bucket-denies-account",
        READ_ALL,
        doc(deny("s3:*", "arn:aws:s3:::models-bucket/*", **to(ROOT))),
    ),
    _s3(
        "s3.deny-insecure-transport.tls",
        READ_ALL,
        doc(
            deny(
                "s3:*",
                ["arn:aws:s3:::models-bucket/*", BUCKET],
                Condition={"Bool": {"aws:SecureTransport": "false"}},
                **to("*"),
            )
        ),
        context={"aws:SecureTransport": "true"},
    ),
    _s3(
        "s3.deny-other-accounts",
        READ_ALL,
        doc(
            deny(
                "s3:*",
                "*",
                Condition={"StringNotEquals": {"aws:PrincipalAccount": ACCOUNT}},
                **to("*"),
            )
        ),
    ),
    _s3(
        "s3.grant-on-vpce.match",
        NOTHING,
        _granted_if({"StringEquals": {"aws:SourceVpce": "vpce-1"}}),
        context={"aws:SourceVpce": "vpce-1"},
    ),
    _s3(
        "s3.grant-on-vpce.other",
        NOTHING,
        _granted_if({"StringEquals": {"aws:SourceVpce": "vpce-1"}}),
        context={"aws:SourceVpce": "vpce-2"},
    ),
    _s3("s3.identity-deny-beats-bucket-grant", doc(deny("s3:GetObject")), GRANT_ROLE),
    _s3("s3.boundary-allows", READ_ALL, None, boundary=BOUNDARY_S3),
    _s3("s3.boundary-excludes", READ_ALL, None, boundary=BOUNDARY_ECR),
    _s3("s3.boundary-allows.bucket-grant", NOTHING, GRANT_ROLE, boundary=BOUNDARY_S3),
    _s3("s3.boundary-limits-role-grant", NOTHING, GRANT_ROLE, boundary=BOUNDARY_ECR),
    _s3(
        "s3.bucket-grants-another-role",
        NOTHING,
        doc(
            allow(
                "s3:GetObject",
                "arn:aws:s3:::models-bucket/*",
                **to(f"arn:aws:iam::{ACCOUNT}:role/other"),
            )
        ),
    ),
    _s3(
        "s3.bucket-grants-notaction",
        NOTHING,
        doc(
            {
                "Effect": "Allow",
                "NotAction": "s3:Delete*",
                "Resource": "arn:aws:s3:::models-bucket/*",
                **to(ROLE),
            }
        ),
    ),
    _s3(
        "s3.bucket-denies-notresource.outside",
        READ_ALL,
        doc(
            {
                "Effect": "Deny",
                "Action": "s3:GetObject",
                "NotResource": "arn:aws:s3:::models-bucket/public/*",
                **to("*"),
            }
        ),
    ),
    _s3(
        "s3.bucket-denies-notresource.inside",
        READ_ALL,
        doc(
            {
                "Effect": "Deny",
                "Action": "s3:GetObject",
                "NotResource": "arn:aws:s3:::models-bucket/qwen/*",
                **to("*"),
            }
        ),
    ),
    _s3(
        "s3.identity-other-prefix",
        doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/llama/*")),
        None,
    ),
    _s3(
        "s3.deny-unless-role-pattern.match",
        READ_ALL,
        doc(
            deny(
                "s3:*",
                "*",
                Condition={
                    "StringNotLike": {
                        "aws:PrincipalArn": [f"arn:aws:iam::{ACCOUNT}:role/service-role/peagle-*"]
                    }
                },
                **to("*"),
            )
        ),
    ),
    _s3(
        "s3.deny-unless-role-pattern.other",
        READ_ALL,
        doc(
            deny(
                "s3:*",
                "*",
                Condition={
                    "StringNotLike": {"aws:PrincipalArn": [f"arn:aws:iam::{ACCOUNT}:role/admin-*"]}
                },
                **to("*"),
            )
        ),
    ),
    _s3(
        "s3.deny-arn-not-equals.own",
        READ_ALL,
        doc(deny("s3:*", "*", Condition={"ArnNotEquals": {"aws:PrincipalArn": ROLE}}, **to("*"))),
    ),
    _s3(
        "s3.identity-tag-condition",
        doc(
            allow("s3:GetObject", "*", Condition={"StringEquals": {"aws:PrincipalTag/team": "ml"}})
        ),
        None,
        context={"aws:PrincipalTag/team": "ml"},
    ),
    # --- S3 ListBucket with the listing's prefix -----------------------------------------
    Case(
        "s3.list.prefix-granted",
        "s3",
        "s3:ListBucket",
        BUCKET,
        ACCOUNT,
        [LIST],
        None,
        context={"s3:prefix": "qwen/"},
    ),
    Case(
        "s3.list.prefix-other",
        "s3",
        "s3:ListBucket",
        BUCKET,
        ACCOUNT,
        [LIST],
        None,
        context={"s3:prefix": "llama/"},
    ),
    Case(
        "s3.list.bucket-grants-prefix",
        "s3",
        "s3:ListBucket",
        BUCKET,
        ACCOUNT,
        [NOTHING],
        doc(
            allow(
                "s3:ListBucket",
                BUCKET,
                Condition={"StringLike": {"s3:prefix": "qwen/*"}},
                **to(ROLE),
            )
        ),
        context={"s3:prefix": "qwen/x"},
    ),
    # --- S3, another account's bucket: both sides must allow -------------------------------
    _s3("s3.cross.identity-only", READ_ALL, None, resource_account=OTHER),
    _s3("s3.cross.both-role", READ_ALL, GRANT_ROLE, resource_account=OTHER),
    _s3("s3.cross.both-account", READ_ALL, GRANT_ROOT, resource_account=OTHER),
    _s3("s3.cross.bucket-only", NOTHING, GRANT_ROLE, resource_account=OTHER),
    _s3("s3.cross.anyone", READ_ALL, GRANT_ANYONE, resource_account=OTHER),
    _s3(
        "s3.cross.grant-and-deny",
        READ_ALL,
        doc(
            allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to(ROOT)),
            deny("s3:GetObject", "arn:aws:s3:::models-bucket/qwen/*", **to(ROLE)),
        ),
        resource_account=OTHER,
    ),
    # --- KMS: the key policy must allow, directly or by delegating to IAM ------------------
    _kms("kms.delegates.identity-allows", DECRYPT, KEY_ROOT),
    _kms("kms.delegates.identity-silent", NOTHING, KEY_ROOT),
    _kms("kms.names-role.identity-silent", NOTHING, doc(allow("kms:Decrypt", "*", **to(ROLE)))),
    _kms(
        "kms.names-other-role",
        DECRYPT,
        doc(allow("kms:*", "*", **to(f"arn:aws:iam::{ACCOUNT}:role/admin"))),
    ),
    _kms(
        "kms.via-s3.granted",
        DECRYPT_VIA_S3,
        KEY_ROOT,
        context={"kms:ViaService": "s3.us-east-1.amazonaws.com"},
    ),
    _kms(
        "kms.via-s3.other-service",
        DECRYPT_VIA_S3,
        KEY_ROOT,
        context={"kms:ViaService": "ec2.us-east-1.amazonaws.com"},
    ),
    _kms(
        "kms.key-policy-denies",
        DECRYPT,
        doc(allow("kms:*", "*", **to(ROOT)), deny("kms:Decrypt", "*", **to(ROLE))),
    ),
    _kms(
        "kms.names-role.boundary-excludes",
        NOTHING,
        doc(allow("kms:Decrypt", "*", **to(ROLE))),
        boundary=BOUNDARY_S3,
    ),
    _kms(
        "kms.delegates.caller-account",
        DECRYPT,
        doc(
            allow(
                "kms:*", "*", Condition={"StringEquals": {"kms:CallerAccount": ACCOUNT}}, **to("*")
            )
        ),
        context={"kms:CallerAccount": ACCOUNT},
    ),
    _kms(
        "kms.names-role.via-s3",
        NOTHING,
        doc(
            allow(
                "kms:Decrypt",
                "*",
                Condition={"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}},
                **to(ROLE),
            )
        ),
        context={"kms:ViaService": "s3.us-east-1.amazonaws.com"},
    ),
    _kms(
        "kms.cross.account-grant",
        DECRYPT_OTHER,
        doc(allow("kms:Decrypt", "*", **to(ROOT))),
        resource_account=OTHER,
    ),
    _kms(
        "kms.cross.identity-silent",
        NOTHING,
        doc(allow("kms:Decrypt", "*", **to(ROOT))),
        resource_account=OTHER,
    ),
    _kms(
        "kms.cross.names-role.identity-silent",
        NOTHING,
        doc(allow("kms:Decrypt", "*", **to(ROLE))),
        resource_account=OTHER,
    ),
    # --- ECR: repository policies (no Resource element) -------------------------------------
    _ecr("ecr.identity-allows.no-policy", PULL, None),
    _ecr(
        "ecr.repo-grants-role",
        NOTHING,
        doc({"Sid": "pull", "Effect": "Allow", "Action": ["ecr:BatchGetImage"], **to(ROLE)}),
    ),
    _ecr(
        "ecr.repo-grants-account-only",
        NOTHING,
        doc({"Effect": "Allow", "Action": "ecr:*", **to(ACCOUNT)}),
    ),
    _ecr(
        "ecr.repo-denies-everyone",
        PULL,
        doc({"Effect": "Deny", "Action": "ecr:BatchGetImage", **to("*")}),
    ),
    _ecr(
        "ecr.cross.account-grant",
        PULL,
        doc({"Effect": "Allow", "Action": "ecr:BatchGetImage", **to(ROOT)}),
        resource_account=OTHER,
    ),
    _ecr("ecr.cross.no-policy", PULL, None, resource_account=OTHER),
    # --- condition operators, in a bucket policy's grant -----------------------------------
    _s3(
        "op.ignore-case",
        NOTHING,
        _granted_if({"StringEqualsIgnoreCase": {"aws:PrincipalTag/team": "ML"}}),
        context={"aws:PrincipalTag/team": "ml"},
    ),
    _s3("op.null-true.absent", NOTHING, _granted_if({"Null": {"aws:SourceVpce": "true"}})),
    _s3("op.null-false.absent", NOTHING, _granted_if({"Null": {"aws:SourceVpce": "false"}})),
    _s3(
        "op.if-exists.absent",
        NOTHING,
        _granted_if({"StringEqualsIfExists": {"aws:SourceVpce": "vpce-1"}}),
    ),
    _s3(
        "op.for-all-values.absent",
        NOTHING,
        _granted_if({"ForAllValues:StringEquals": {"aws:TagKeys": ["team"]}}),
    ),
    _s3(
        "op.for-any-value.absent",
        NOTHING,
        _granted_if({"ForAnyValue:StringEquals": {"aws:TagKeys": ["team"]}}),
    ),
    _s3(
        "op.policy-variable",
        NOTHING,
        _granted_if(
            {
                "StringEquals": {
                    "aws:PrincipalArn": f"arn:aws:iam::${{aws:PrincipalAccount}}:role/{ROLE_PATH}"
                }
            }
        ),
    ),
    _s3(
        "op.arn-like",
        NOTHING,
        _granted_if({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/service-role/peagle-*"}}),
    ),
    _s3(
        "op.date-less-than",
        NOTHING,
        _granted_if({"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}),
        context={"aws:CurrentTime": "2026-06-01T00:00:00Z"},
    ),
    _s3(
        "op.ip-address",
        NOTHING,
        _granted_if({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}),
        context={"aws:SourceIp": "10.1.2.3"},
    ),
    _s3(
        "op.not-ip-address.deny",
        READ_ALL,
        doc(
            deny("s3:*", "*", Condition={"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, **to("*"))
        ),
        context={"aws:SourceIp": "192.168.0.1"},
    ),
    # --- what doctor cannot know: a warning, justified when the values disagree -------------
    _s3(
        "unknown.secure-transport",
        READ_ALL,
        doc(deny("s3:*", "*", Condition={"Bool": {"aws:SecureTransport": "false"}}, **to("*"))),
        unknown=("aws:SecureTransport",),
        variants=[{"aws:SecureTransport": "true"}, {"aws:SecureTransport": "false"}],
    ),
    _s3(
        "unknown.source-vpce-grant",
        NOTHING,
        _granted_if({"StringEquals": {"aws:SourceVpce": "vpce-1"}}),
        unknown=("aws:SourceVpce",),
        variants=[{"aws:SourceVpce": "vpce-1"}, {"aws:SourceVpce": "vpce-9"}],
    ),
    _kms(
        "unknown.key-org-condition",
        DECRYPT,
        doc(
            allow(
                "kms:*",
                "*",
                Condition={"StringEquals": {"aws:PrincipalOrgID": "o-abc"}},
                **to(ROOT),
            )
        ),
        unknown=("aws:PrincipalOrgID",),
        variants=[{"aws:PrincipalOrgID": "o-abc"}, {"aws:PrincipalOrgID": "o-xyz"}],
    ),
    # --- what AWS's documentation does not settle: doctor warns ----------------------------
    _s3(
        "undecided.anyone-grant.boundary-excludes",
        NOTHING,
        GRANT_ANYONE,
        boundary=BOUNDARY_ECR,
        undecided='whether a boundary\'s implicit deny limits a grant to "*"',
    ),
    _kms(
        "undecided.kms-anyone-grant.boundary-excludes",
        NOTHING,
        doc(allow("kms:Decrypt", "*", **to("*"))),
        boundary=BOUNDARY_S3,
        undecided='whether a boundary\'s implicit deny limits a grant to "*"',
    ),
    _s3(
        "undecided.notprincipal-names-role",
        READ_ALL,
        doc(
            {
                "Effect": "Deny",
                "NotPrincipal": {"AWS": [ROLE, ROOT]},
                "Action": "s3:*",
                "Resource": "*",
            }
        ),
        undecided="which NotPrincipal entries exempt a role session",
    ),
    _s3(
        "undecided.notprincipal-names-account",
        READ_ALL,
        doc({"Effect": "Deny", "NotPrincipal": {"AWS": ROOT}, "Action": "s3:*", "Resource": "*"}),
        undecided="which NotPrincipal entries exempt a role session",
    ),
    _s3(
        "undecided.grant-to-a-session",
        NOTHING,
        doc(allow("s3:GetObject", "arn:aws:s3:::models-bucket/*", **to(SESSION))),
        undecided="the session name SageMaker gives the role",
    ),
    _s3(
        "s3.notprincipal-unrelated",
        READ_ALL,
        doc(
            {
                "Effect": "Deny",
                "NotPrincipal": {"AWS": f"arn:aws:iam::{OTHER}:root"},
                "Action": "s3:*",
                "Resource": "*",
            }
        ),
    ),
    _s3(
        "op.for-any-value-negated.absent",
        NOTHING,
        _granted_if({"ForAnyValue:StringNotEquals": {"aws:TagKeys": ["team"]}}),
    ),
]
