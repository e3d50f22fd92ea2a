"""Role: existence, trust, and what its policies let SageMaker do (IAM simulation)."""

from __future__ import annotations

import json

import pytest
from doctor_testkit import ACCOUNT, ROLE, Account, by_check, make_plan, only_failure
from peagle_local.emulator.world import ROLE_POLICY_NAME, execution_policy

from peagle_deploy.doctor.role import ECR_PULL_ACTIONS

ROLE_NAME = ROLE.rsplit("/", 1)[-1]


def test_staged_role_passes_every_role_check(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    results = by_check(account.doctor(plan))
    for check in ("role.trust", "role.s3-model-data", "role.s3-drafter", "role.ecr"):
        assert results[check].status == "pass", results[check].line()


def test_role_without_s3_access_fails_for_each_location(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    policy = execution_policy(plan)
    policy["Statement"] = [s for s in policy["Statement"] if not str(s["Action"]).startswith("s3")]
    account.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
    )
    report = account.doctor(plan)
    failed = {r.check: r for r in report.failures}
    assert set(failed) == {"role.s3-model-data", "role.s3-drafter"}
    drafter = failed["role.s3-drafter"]
    assert drafter.resource == plan.drafter_uri
    assert "s3:GetObject on arn:aws:s3:::jumpstart-cache-prod-us-east-1/" in drafter.detail
    # JumpStart's bucket is AWS's (public): the role's own policy must allow the read.
    assert "cross-account: the role's policies do not allow it" in drafter.detail
    assert f"grant role {ROLE_NAME} s3:GetObject" in drafter.fix


def test_explicit_deny_wins(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    deny = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Action": "ecr:*", "Resource": "*"}],
    }
    inprocess.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName="no-ecr", PolicyDocument=json.dumps(deny)
    )
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "role.ecr" and "explicit deny in the role's policies" in failure.detail


def test_listing_limited_to_another_prefix_fails(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    policy = execution_policy(plan)
    for statement in policy["Statement"]:
        if statement["Action"] == "s3:ListBucket":
            statement["Condition"] = {"StringLike": {"s3:prefix": ["someone-else/*"]}}
    inprocess.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
    )
    failed = {r.check for r in inprocess.doctor(plan).failures}
    assert failed == {"role.s3-model-data", "role.s3-drafter"}


def test_missing_role_fails(account: Account) -> None:
    plan = make_plan()
    account.stage(plan)
    plan = make_plan(execution_role_arn=f"arn:aws:iam::{ACCOUNT}:role/nobody")
    results = by_check(account.doctor(plan))
    assert results["role.trust"].status == "fail"
    assert results["role.trust"].detail == f"the role does not exist in account {ACCOUNT}"
    assert results["role.trust"].resource == f"arn:aws:iam::{ACCOUNT}:role/nobody"


def test_role_that_sagemaker_cannot_assume_fails(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    inprocess.client("iam").update_assume_role_policy(
        RoleName=ROLE_NAME, PolicyDocument=json.dumps(trust)
    )
    failure = only_failure(inprocess.doctor(plan))
    assert failure.check == "role.trust" and "sagemaker.amazonaws.com" in failure.detail


def test_placeholder_role_is_not_checked(inprocess: Account) -> None:
    plan = make_plan(execution_role_arn=None)
    inprocess.stage(make_plan())
    report = inprocess.doctor(plan)
    role_lines = [r for r in report.results if r.check.startswith("role.")]
    assert role_lines and all(r.status == "warn" for r in role_lines)
    assert "no execution role given" in role_lines[0].detail


def test_simulation_denied_to_the_caller_is_a_warning(inprocess: Account) -> None:
    plan = make_plan()
    inprocess.stage(plan)
    inprocess.deny("SimulatePrincipalPolicy", "iam")
    report = inprocess.doctor(plan)
    assert report.ok
    line = by_check(report)["role.ecr"]
    assert line.status == "warn" and "iam:SimulatePrincipalPolicy" in line.detail


@pytest.mark.parametrize("state", ["enabled", "disabled", "not granted"])
def test_volume_key(inprocess: Account, state: str) -> None:
    kms = inprocess.client("kms")
    key = kms.create_key()["KeyMetadata"]
    if state == "disabled":
        kms.disable_key(KeyId=key["KeyId"])
    plan = make_plan(kms_key_id=key["KeyId"])
    inprocess.stage(plan)
    if state == "not granted":
        policy = execution_policy(plan)
        policy["Statement"] = [s for s in policy["Statement"] if s["Action"] != "kms:Decrypt"]
        inprocess.client("iam").put_role_policy(
            RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
        )
    line = by_check(inprocess.doctor(plan))["role.kms-volume"]
    expected = {
        "enabled": ("pass", "the key is enabled and the role may decrypt with it"),
        "disabled": ("fail", "the KMS key is Disabled"),
        "not granted": (
            "fail",
            f"the role may not: kms:Decrypt on {key['Arn']} (the key policy of {key['Arn']} "
            "delegates to the account's IAM policies, and the role's policies do not allow it)",
        ),
    }[state]
    assert (line.status, line.detail) == expected


def test_model_data_key_is_simulated_through_s3(inprocess: Account) -> None:
    key = inprocess.client("kms").create_key()["KeyMetadata"]["Arn"]
    plan = make_plan(model_data_kms_key_arns=[key])
    inprocess.stage(plan)
    policy = execution_policy(plan)
    for statement in policy["Statement"]:
        if statement["Action"] == "kms:Decrypt":  # only when S3 asks, like the CDK role
            statement["Condition"] = {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}
    inprocess.client("iam").put_role_policy(
        RoleName=ROLE_NAME, PolicyName=ROLE_POLICY_NAME, PolicyDocument=json.dumps(policy)
    )
    assert by_check(inprocess.doctor(plan))["role.kms-model-data"].status == "pass"


def test_unknown_key_fails(inprocess: Account) -> None:
    missing = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
    plan = make_plan(model_data_kms_key_arns=[missing])
    inprocess.stage(plan)
    line = by_check(inprocess.doctor(plan))["role.kms-model-data"]
    assert (line.status, line.resource) == ("fail", missing)


def test_pull_actions_are_the_cdk_roles() -> None:
    from infra.execution_policy import ECR_PULL_ACTIONS as CDK_PULL_ACTIONS

    assert tuple(ECR_PULL_ACTIONS) == tuple(CDK_PULL_ACTIONS)
