"""Role permissions decided with the bucket, key and repository policies (issue 20).

Each case is an account the emulator holds (moto with the peagle extensions: bucket
policies, key policies, repository policies, and iam:SimulatePrincipalPolicy answering
like IAM's simulator, without resource policies). Valid setups must pass; invalid ones
fail naming the resource and the fix; what doctor cannot know is a warning naming it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from doctor_testkit import ACCOUNT, ROLE, Account, by_check, make_plan
from peagle_local.emulator.world import ROLE_POLICY_NAME, execution_policy

from peagle_deploy.doctor.role import SCP_NOTE

ROLE_NAME = ROLE.rsplit("/", 1)[-1]
BUCKET = "acme-models"
OWN_IMAGE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/acme/peagle-vllm:1.0"


def own_bucket_plan(**overrides: Any) -> Any:
    return make_plan(
        **{
            "custom.model_data_uri": f"s3://{BUCKET}/qwen/",
            "speculative.drafter_uri": f"s3://{BUCKET}/drafter/",
            **overrides,
        }
    )


def set_role_policy(account: Account, plan: Any, keep: Any) -> None:
    """The staged role's policy with only the statements `keep(statement)` accepts."""
    policy = execution_policy(plan)
    policy["Statement"] = [s for s in policy["Statement"] if keep(s)]
    account.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
    )


def no_s3(statement: dict[str, Any]) -> bool:
    return not str(statement["Action"]).startswith("s3")


def bucket_policy(account: Account, *statements: dict[str, Any]) -> None:
    document = {"Version": "2012-10-17", "Statement": list(statements)}
    account.client("s3").put_bucket_policy(Bucket=BUCKET, Policy=json.dumps(document))


GRANT_ROLE_READS = [
    {
        "Effect": "Allow",
        "Principal": {"AWS": ROLE},
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{BUCKET}/*",
    },
    {
        "Effect": "Allow",
        "Principal": {"AWS": ROLE},
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{BUCKET}",
    },
]


def test_bucket_policy_grant_is_enough_in_the_same_account(account: Account) -> None:
    """Was a false failure: the role's policy has no S3, the bucket policy grants it."""
    plan = own_bucket_plan()
    account.stage(plan)
    set_role_policy(account, plan, no_s3)
    bucket_policy(account, *GRANT_ROLE_READS)
    report = account.doctor(plan)
    results = by_check(report)
    assert results["role.s3-model-data"].status == "pass", results["role.s3-model-data"].line()
    assert results["role.s3-drafter"].status == "pass", results["role.s3-drafter"].line()
    assert report.exit_code == 0
    assert report.notes == [SCP_NOTE]  # once, not a warning per check


def test_bucket_policy_deny_fails_although_the_role_may(inprocess: Account) -> None:
    """Was a false pass: the role's policy allows, the bucket policy denies."""
    plan = own_bucket_plan()
    inprocess.stage(plan)
    bucket_policy(
        inprocess,
        {
            "Sid": "NoRole",
            "Effect": "Deny",
            "Principal": {"AWS": ROLE},
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{BUCKET}/drafter/*",
        },
    )
    report = inprocess.doctor(plan)
    (failure,) = report.failures
    assert (failure.check, failure.resource) == ("role.s3-drafter", plan.drafter_uri)
    assert f"explicit deny in the bucket policy of {BUCKET}" in failure.detail
    assert failure.fix == (
        f"remove or narrow the Deny in the bucket policy of {BUCKET} that matches role {ROLE_NAME}"
    )
    assert by_check(report)["role.s3-model-data"].status == "pass"


def test_key_policy_naming_the_role_is_enough(inprocess: Account) -> None:
    """Was a false failure: the key policy names the role, its IAM policy has no KMS."""
    key_policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Admin",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/admin"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "ExecutionRole",
                "Effect": "Allow",
                "Principal": {"AWS": ROLE},
                "Action": "kms:Decrypt",
                "Resource": "*",
            },
        ],
    }
    kms = inprocess.client("kms")
    key = kms.create_key(Policy=json.dumps(key_policy))["KeyMetadata"]["Arn"]
    plan = own_bucket_plan(model_data_kms_key_arns=[key])
    inprocess.stage(plan)
    set_role_policy(inprocess, plan, lambda s: s["Action"] != "kms:Decrypt")
    line = by_check(inprocess.doctor(plan))["role.kms-model-data"]
    assert (line.status, line.detail) == (
        "pass",
        "the key is enabled and the role may decrypt with it",
    )


def test_key_policy_without_the_role_or_the_account_fails(inprocess: Account) -> None:
    key_policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/admin"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }
    key = inprocess.client("kms").create_key(Policy=json.dumps(key_policy))["KeyMetadata"]["Arn"]
    plan = own_bucket_plan(model_data_kms_key_arns=[key])
    inprocess.stage(plan)  # the role's own policy allows kms:Decrypt: not enough
    line = by_check(inprocess.doctor(plan))["role.kms-model-data"]
    assert line.status == "fail" and line.resource == key
    assert "neither names the role nor delegates to the account" in line.detail
    assert line.fix.startswith(f"let the key policy of {key} allow role {ROLE_NAME} kms:Decrypt")


def test_grant_on_a_context_key_doctor_cannot_supply_is_a_warning(inprocess: Account) -> None:
    """Was a false failure: the grant holds only from a VPC endpoint."""
    plan = own_bucket_plan()
    inprocess.stage(plan)
    set_role_policy(inprocess, plan, no_s3)
    vpce = {"StringEquals": {"aws:SourceVpce": "vpce-0123456789abcdef0"}}
    bucket_policy(inprocess, *({**s, "Condition": vpce} for s in GRANT_ROLE_READS))
    report = inprocess.doctor(plan)
    assert report.ok
    line = by_check(report)["role.s3-model-data"]
    assert line.status == "warn" and "aws:SourceVpce" in line.detail
    assert "aws:SourceVpce" in line.fix


def test_identity_grant_with_missing_context_values_is_a_warning(inprocess: Account) -> None:
    """The simulator's MissingContextValues: a warning naming the keys, never a failure."""
    plan = own_bucket_plan()
    inprocess.stage(plan)
    policy = execution_policy(plan)
    for statement in policy["Statement"]:
        if str(statement["Action"]).startswith("s3"):
            statement["Condition"] = {"StringEquals": {"aws:SourceVpc": "vpc-0123456789abcdef0"}}
    inprocess.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
    )
    report = inprocess.doctor(plan)
    assert report.ok
    for check in ("role.s3-model-data", "role.s3-drafter"):
        line = by_check(report)[check]
        assert line.status == "warn" and "aws:SourceVpc" in line.detail, line.line()


def test_boundary_limits_a_bucket_grant_to_the_role(inprocess: Account) -> None:
    plan = own_bucket_plan()
    inprocess.stage(plan)
    set_role_policy(inprocess, plan, no_s3)
    bucket_policy(inprocess, *GRANT_ROLE_READS)
    iam = inprocess.client("iam")
    boundary = iam.create_policy(
        PolicyName="ecr-only",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "ecr:*", "Resource": "*"}],
            }
        ),
    )["Policy"]["Arn"]
    iam.put_role_permissions_boundary(RoleName=ROLE_NAME, PermissionsBoundary=boundary)
    line = by_check(inprocess.doctor(plan))["role.s3-model-data"]
    assert line.status == "fail" and "permissions boundary does not allow it" in line.detail
    assert line.fix.startswith(
        f"allow s3:GetObject in the permissions boundary of role {ROLE_NAME}; "
        f"allow s3:ListBucket in the permissions boundary of role {ROLE_NAME}"
    )


@pytest.mark.parametrize(
    ("operation", "service", "check", "permission"),
    [
        ("GetBucketPolicy", "s3", "role.s3-model-data", "s3:GetBucketPolicy"),
        ("GetKeyPolicy", "kms", "role.kms-model-data", "kms:GetKeyPolicy"),
        ("GetRepositoryPolicy", "ecr", "role.ecr", "ecr:GetRepositoryPolicy"),
    ],
)
def test_unreadable_policy_warns_with_the_permission_to_grant(
    inprocess: Account, operation: str, service: str, check: str, permission: str
) -> None:
    key = inprocess.client("kms").create_key()["KeyMetadata"]["Arn"]
    plan = own_bucket_plan(model_data_kms_key_arns=[key], image_uri=OWN_IMAGE)
    inprocess.stage(plan)
    inprocess.deny(operation, service)
    report = inprocess.doctor(plan)
    line = by_check(report)[check]
    assert report.ok and line.status == "warn", line.line()
    assert f"grant the caller {permission}" in line.detail


def test_own_repository_policy_grant_and_deny(inprocess: Account) -> None:
    plan = own_bucket_plan(image_uri=OWN_IMAGE)
    inprocess.stage(plan)
    set_role_policy(inprocess, plan, lambda s: "ecr:BatchGetImage" not in s["Action"])
    ecr = inprocess.client("ecr")

    def repository_policy(effect: str) -> None:
        statement = {"Effect": effect, "Principal": {"AWS": ROLE}, "Action": ["ecr:*"]}
        ecr.set_repository_policy(
            repositoryName="acme/peagle-vllm",
            policyText=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
        )

    assert by_check(inprocess.doctor(plan))["role.ecr"].status == "fail"
    repository_policy("Allow")
    assert by_check(inprocess.doctor(plan))["role.ecr"].status == "pass"
    repository_policy("Deny")
    line = by_check(inprocess.doctor(plan))["role.ecr"]
    assert line.status == "fail" and "explicit deny in the repository policy" in line.detail


def _not_owner(**_: Any) -> None:
    raise ClientError(
        {"Error": {"Code": "MethodNotAllowed", "Message": "not the owner"}}, "GetBucketPolicy"
    )


def test_another_accounts_bucket_needs_its_policy_too(inprocess: Account) -> None:
    """Cross account: both must allow. The role's side decides a denial; an allow needs
    the bucket's policy, which only its owner may read: a warning."""
    plan = own_bucket_plan()
    inprocess.stage(plan)
    inprocess.session.events.register("before-call.s3.GetBucketPolicy", _not_owner)
    line = by_check(inprocess.doctor(plan))["role.s3-model-data"]
    assert line.status == "warn" and "belongs to another account" in line.detail
    set_role_policy(inprocess, plan, no_s3)
    line = by_check(inprocess.doctor(plan))["role.s3-model-data"]
    assert line.status == "fail" and "cross-account" in line.detail


def test_unparseable_bucket_policy_is_a_warning(inprocess: Account) -> None:
    plan = own_bucket_plan()
    inprocess.stage(plan)

    def duplicate_keys(**_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        text = '{"Version": "2012-10-17", "Version": "2008-10-17", "Statement": []}'
        return AWSResponse("", 200, {}, None), {"Policy": text}

    inprocess.session.events.register("before-call.s3.GetBucketPolicy", duplicate_keys)
    line = by_check(inprocess.doctor(plan))["role.s3-model-data"]
    assert line.status == "warn" and "duplicate key 'Version'" in line.detail
