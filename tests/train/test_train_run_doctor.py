"""The training doctor (peagle_deploy/doctor/training.py) against an emulated account: each
seeded misconfiguration is the one failing line, with its fix; a staged account passes."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from train_run_kit import (  # noqa: F401 (`account_fixture` is the `account` fixture)
    BUCKET,
    CALLER_POLICY,
    INSTANCE,
    JOB,
    REGION,
    ROLE,
    ROLE_NAME,
    account_fixture,
    caller_session,
    request,
)

from peagle_deploy.doctor.result import CheckResult, DoctorReport
from peagle_deploy.doctor.training import quota_name, run_training_doctor


def _doctor(account: Any, req: dict[str, Any] | None = None, session: Any = None) -> DoctorReport:
    return run_training_doctor(
        req or request(), region=REGION, boto_session=session or account.session
    )


def _only_failure(report: DoctorReport) -> CheckResult:
    assert len(report.failures) == 1, [r.line() for r in report.results]
    return report.failures[0]


def test_a_staged_account_passes_every_check(account: Any) -> None:
    report = _doctor(account)
    assert report.ok, [r.line() for r in report.results]
    assert {r.check for r in report.results} == {
        "training.quota",
        "training.target",
        "training.data",
        "training.role",
        "training.role.s3",
        "caller.permissions",
    }
    assert not report.warnings, [r.line() for r in report.warnings]


def test_the_quota_names_follow_the_job_kind() -> None:
    assert quota_name("ml.p5.48xlarge", spot=False) == "ml.p5.48xlarge for training job usage"
    assert quota_name("ml.g6e.2xlarge", spot=True) == "ml.g6e.2xlarge for spot training job usage"


def test_no_quota_for_the_instance_type_fails(account: Any) -> None:
    # the on-demand job needs the other quota, which this account does not list
    failure = _only_failure(_doctor(account, request(EnableManagedSpotTraining=False)))
    assert failure.check == "training.quota"
    assert f"'{INSTANCE} for training job usage'" in failure.resource
    assert "not offered for SageMaker training" in failure.detail


def test_a_quota_too_small_fails_with_the_increase_command(account: Any) -> None:
    code = account.quotas.set_quota("sagemaker", f"{INSTANCE} for spot training job usage", 1)
    resources = {"InstanceType": INSTANCE, "InstanceCount": 2, "VolumeSizeInGB": 200}
    failure = _only_failure(_doctor(account, request(ResourceConfig=resources)))
    assert "quota is 1 instances; the job needs 2" in failure.detail
    assert f"--quota-code {code} --desired-value 2" in failure.fix


def test_running_jobs_count_against_the_quota(account: Any) -> None:
    account.jobs.scripts["other-job"] = [("InProgress", "Training", "Training")]
    account.client("sagemaker").create_training_job(**request("other-job"))
    failure = _only_failure(_doctor(account))
    assert "beside the 1 running training jobs hold" in failure.detail


def test_a_target_without_a_chat_template_fails(account: Any) -> None:
    boto3.client("s3", region_name=REGION).put_object(
        Bucket=BUCKET, Key="target/tokenizer_config.json", Body=b'{"bos_token": "<s>"}'
    )
    failure = _only_failure(_doctor(account))
    assert failure.check == "training.target"
    assert "no chat template" in failure.detail


def test_a_chat_template_file_is_enough(account: Any) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key="target/tokenizer_config.json", Body=b"{}")
    s3.put_object(Bucket=BUCKET, Key="target/chat_template.jinja", Body=b"{{ messages }}")
    assert _doctor(account).ok


def test_empty_data_fails(account: Any) -> None:
    boto3.client("s3", region_name=REGION).delete_object(Bucket=BUCKET, Key="data/chat.jsonl")
    failure = _only_failure(_doctor(account))
    assert (failure.check, failure.detail) == ("training.data", "no object under this prefix")


def test_a_role_the_caller_may_not_pass_fails(account: Any) -> None:
    no_pass = {
        **CALLER_POLICY,
        "Statement": [s for s in CALLER_POLICY["Statement"] if s["Action"] != "iam:PassRole"],
    }
    failure = _only_failure(_doctor(account, session=caller_session("no-pass", no_pass)))
    assert failure.check == "caller.permissions"
    assert failure.detail == f"IAM denies iam:PassRole on {ROLE}"
    assert failure.fix.startswith("grant iam:PassRole on")


def test_a_caller_that_may_not_create_the_job_fails(account: Any) -> None:
    """Asked as IAM decides the real request: the job's ARN, its instance type, network
    isolation and tags (the call map), so a grant conditioned on them is honoured."""
    statements = [
        CALLER_POLICY["Statement"][0],
        {
            "Effect": "Allow",
            "Action": ["s3:*", "iam:GetRole", "iam:SimulatePrincipalPolicy", "sagemaker:*"],
            "Resource": "*",
        },
        {
            "Effect": "Deny",
            "Action": "sagemaker:CreateTrainingJob",
            "Resource": "*",
            "Condition": {"Bool": {"sagemaker:NetworkIsolation": "false"}},
        },
    ]
    isolated = caller_session("isolated-only", {"Version": "2012-10-17", "Statement": statements})
    assert _doctor(account, session=isolated).ok
    report = _doctor(account, request(EnableNetworkIsolation=False), session=isolated)
    failure = _only_failure(report)
    assert failure.check == "caller.permissions"
    assert failure.detail == (
        "IAM denies sagemaker:CreateTrainingJob on "
        f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB} (explicit Deny)"
    )


def test_a_role_that_does_not_trust_sagemaker_fails(account: Any) -> None:
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
    boto3.client("iam", region_name=REGION).update_assume_role_policy(
        RoleName=ROLE_NAME, PolicyDocument=json.dumps(trust)
    )
    failure = _only_failure(_doctor(account))
    assert "does not let sagemaker.amazonaws.com assume the role" in failure.detail


def test_an_output_the_role_may_not_write_fails(account: Any) -> None:
    read_only = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"},
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
        ],
    }
    boto3.client("iam", region_name=REGION).put_role_policy(
        RoleName=ROLE_NAME, PolicyName="train", PolicyDocument=json.dumps(read_only)
    )
    report = _doctor(account)
    denied = sorted(r.detail for r in report.failures)
    assert denied == [
        f"IAM denies s3:PutObject on arn:aws:s3:::{BUCKET}/checkpoints/{JOB}/*",
        f"IAM denies s3:PutObject on arn:aws:s3:::{BUCKET}/output/{JOB}/*",
    ]
    assert {r.check for r in report.failures} == {"training.role.s3"}


@pytest.mark.parametrize("state", ["Disabled", "PendingDeletion"])
def test_a_kms_key_that_cannot_encrypt_fails(account: Any, state: str) -> None:
    kms = boto3.client("kms", region_name=REGION)
    created = kms.create_key()["KeyMetadata"]
    key = created["Arn"]
    if state == "Disabled":
        kms.disable_key(KeyId=created["KeyId"])
    else:
        kms.schedule_key_deletion(KeyId=created["KeyId"], PendingWindowInDays=7)
    output = {"S3OutputPath": f"s3://{BUCKET}/output", "KmsKeyId": key}
    failure = _only_failure(_doctor(account, request(OutputDataConfig=output)))
    assert failure.check == "training.kms"
    assert f"the key is {state}" in failure.detail


def test_an_enabled_key_passes(account: Any) -> None:
    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    resources = {
        "InstanceType": INSTANCE,
        "InstanceCount": 1,
        "VolumeSizeInGB": 200,
        "VolumeKmsKeyId": key,
    }
    report = _doctor(account, request(ResourceConfig=resources))
    assert report.ok
    assert [r.status for r in report.results if r.check == "training.kms"] == ["pass"]


def test_a_denied_read_is_a_warning_not_a_failure(account: Any) -> None:
    from botocore.exceptions import ClientError

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "ListObjectsV2")

    account.session.events.register("before-call.s3.ListObjectsV2", refuse)
    report = _doctor(account)
    assert report.ok
    assert {r.check for r in report.warnings} == {"training.target", "training.data"}
    assert all("could not check" in r.detail for r in report.warnings)
