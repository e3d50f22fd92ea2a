"""The Service Quotas and SimulatePrincipalPolicy double, through boto3, both modes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from peagle_local.emulator import AccountExtensions, LocalAWS
from peagle_local.emulator.account_ext import endpoint_quota_name

REGION = "us-east-1"


@pytest.fixture(params=["inprocess", "server"])
def env(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, AccountExtensions]]:
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    if request.param == "inprocess":
        with mock_aws(), AccountExtensions() as account:
            yield boto3.Session(region_name=REGION), account
    else:
        with LocalAWS(region=REGION) as local:
            for key, value in local.env().items():  # its endpoint, its own key
                monkeypatch.setenv(key, value)
            yield boto3.Session(region_name=REGION), local.account


def test_quotas_list_page_and_get(env: tuple[Any, AccountExtensions]) -> None:
    session, account = env
    sq = session.client("service-quotas")
    assert sq.list_service_quotas(ServiceCode="sagemaker")["Quotas"] == []
    codes = [account.set_endpoint_quota(f"ml.g7e.{n}xlarge", n) for n in (2, 4, 8)]
    first = sq.list_service_quotas(ServiceCode="sagemaker", MaxResults=2)
    assert len(first["Quotas"]) == 2 and first["NextToken"]
    rest = sq.list_service_quotas(ServiceCode="sagemaker", NextToken=first["NextToken"])
    names = [q["QuotaName"] for q in first["Quotas"] + rest["Quotas"]]
    assert sorted(names) == sorted(endpoint_quota_name(f"ml.g7e.{n}xlarge") for n in (2, 4, 8))
    quota = sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=codes[1])["Quota"]
    assert quota["Value"] == 4.0 and quota["QuotaCode"] == codes[1]
    with pytest.raises(sq.exceptions.NoSuchResourceException):
        sq.get_service_quota(ServiceCode="sagemaker", QuotaCode="L-00000000")


def test_default_only_quotas(env: tuple[Any, AccountExtensions]) -> None:
    session, account = env
    sq = session.client("service-quotas")
    code = account.set_endpoint_quota("ml.p5.48xlarge", 0, applied=False)
    assert sq.list_service_quotas(ServiceCode="sagemaker")["Quotas"] == []
    defaults = sq.list_aws_default_service_quotas(ServiceCode="sagemaker")["Quotas"]
    assert [q["QuotaCode"] for q in defaults] == [code]
    assert sq.get_aws_default_service_quota(ServiceCode="sagemaker", QuotaCode=code)["Quota"]
    # services nobody set keep moto's own answers
    assert sq.list_aws_default_service_quotas(ServiceCode="vpc")["Quotas"]


def test_quotas_are_per_region(env: tuple[Any, AccountExtensions]) -> None:
    session, account = env
    account.set_endpoint_quota("ml.g7e.2xlarge", 3, region="eu-west-1")
    assert (
        session.client("service-quotas").list_service_quotas(ServiceCode="sagemaker")["Quotas"]
        == []
    )
    eu = session.client("service-quotas", region_name="eu-west-1")
    assert eu.list_service_quotas(ServiceCode="sagemaker")["Quotas"][0]["Value"] == 3.0


def test_simulate_principal_policy(env: tuple[Any, AccountExtensions]) -> None:
    session, _ = env
    iam = session.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    arn = iam.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(
        RoleName="r",
        PolicyName="inline",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}
                ],
            }
        ),
    )
    managed = iam.create_policy(
        PolicyName="list",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "s3:ListBucket",
                        "Resource": "arn:aws:s3:::b",
                        "Condition": {"StringLike": {"s3:prefix": "m/*"}},
                    }
                ],
            }
        ),
    )["Policy"]["Arn"]
    iam.attach_role_policy(RoleName="r", PolicyArn=managed)
    results = iam.simulate_principal_policy(
        PolicySourceArn=arn,
        ActionNames=["s3:GetObject", "s3:ListBucket"],
        ResourceArns=["arn:aws:s3:::b"],
        ContextEntries=[
            {"ContextKeyName": "s3:prefix", "ContextKeyValues": ["m/"], "ContextKeyType": "string"}
        ],
    )["EvaluationResults"]
    by_action = {r["EvalActionName"]: r for r in results}
    assert by_action["s3:GetObject"]["EvalDecision"] == "implicitDeny"  # b/* is not b
    listing = by_action["s3:ListBucket"]
    assert listing["EvalDecision"] == "allowed"
    assert listing["MatchedStatements"] == [
        {"SourcePolicyId": managed, "SourcePolicyType": "user-managed"}
    ]
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.simulate_principal_policy(PolicySourceArn=arn + "-gone", ActionNames=["s3:GetObject"])


def test_simulation_reports_per_resource_and_the_boundary(
    env: tuple[Any, AccountExtensions],
) -> None:
    """botocore's iam model: per-resource MissingContextValues in ResourceSpecificResults,
    the boundary's own verdict in PermissionsBoundaryDecisionDetail."""
    session, _ = env
    iam = session.client("iam")
    arn = iam.create_role(RoleName="rb", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    grant = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceVpce": "vpce-1"}},
    }
    iam.put_role_policy(
        RoleName="rb",
        PolicyName="inline",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [grant]}),
    )
    boundary = iam.create_policy(
        PolicyName="ecr-only",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "ecr:*", "Resource": "*"}],
            }
        ),
    )["Policy"]["Arn"]
    iam.put_role_permissions_boundary(RoleName="rb", PermissionsBoundary=boundary)
    (result,) = iam.simulate_principal_policy(
        PolicySourceArn=arn, ActionNames=["s3:GetObject"], ResourceArns=["arn:aws:s3:::b/k"]
    )["EvaluationResults"]
    (specific,) = result["ResourceSpecificResults"]
    assert specific["EvalResourceName"] == "arn:aws:s3:::b/k"
    assert specific["MissingContextValues"] == ["aws:SourceVpce"]
    assert specific["PermissionsBoundaryDecisionDetail"] == {"AllowedByPermissionsBoundary": False}


def test_get_key_policy_as_the_api_shapes_it(env: tuple[Any, AccountExtensions]) -> None:
    """botocore's kms model: PolicyName is optional (default `default`) and answered."""
    session, _ = env
    kms = session.client("kms")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    answer = kms.get_key_policy(KeyId=key)
    assert answer["PolicyName"] == "default"
    assert json.loads(answer["Policy"])["Statement"]
    with pytest.raises(kms.exceptions.NotFoundException):
        kms.get_key_policy(KeyId=key, PolicyName="AWS_RAM")


def test_only_one_installed_at_a_time() -> None:
    with AccountExtensions(), pytest.raises(RuntimeError, match="already installed"):
        AccountExtensions().install()


def test_a_new_account_lists_zero_defaults_everywhere_and_grants_increases(
    env: tuple[Any, AccountExtensions],
) -> None:
    """`peagle emulator start`'s account: 0-instance AWS defaults for every instance type
    in every region; RequestServiceQuotaIncrease applies the value at once."""
    from peagle_local.emulator.world import applied_endpoint_quota, request_endpoint_quota

    session, account = env
    account.new_account_endpoint_quotas(["ml.g7e.2xlarge", "ml.g6e.xlarge"])
    for region in (REGION, "eu-west-1"):
        sq = session.client("service-quotas", region_name=region)
        assert sq.list_service_quotas(ServiceCode="sagemaker")["Quotas"] == []
        defaults = sq.list_aws_default_service_quotas(ServiceCode="sagemaker")["Quotas"]
        assert {q["QuotaName"]: q["Value"] for q in defaults} == {
            endpoint_quota_name("ml.g6e.xlarge"): 0.0,
            endpoint_quota_name("ml.g7e.2xlarge"): 0.0,
        }
    sq = session.client("service-quotas", region_name="eu-west-1")
    code = request_endpoint_quota(sq, "ml.g7e.2xlarge", 3)
    applied = sq.list_service_quotas(ServiceCode="sagemaker")["Quotas"]
    assert [(q["QuotaCode"], q["Value"]) for q in applied] == [(code, 3.0)]
    assert applied_endpoint_quota(sq, "ml.g7e.2xlarge") == 3.0
    assert applied_endpoint_quota(session.client("service-quotas"), "ml.g7e.2xlarge") == 0.0
    with pytest.raises(sq.exceptions.NoSuchResourceException):
        sq.request_service_quota_increase(
            ServiceCode="sagemaker", QuotaCode="L-00000000", DesiredValue=1
        )
    with pytest.raises(LookupError, match=r"ml\.p5\.48xlarge for endpoint usage"):
        request_endpoint_quota(sq, "ml.p5.48xlarge", 1)
