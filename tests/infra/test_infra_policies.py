"""The pure statement builders the CDK constructs wire (no synthesis): the CI deploy
role's (infra/deploy_policy.py), the execution role's (infra/execution_policy.py) and the
model provider's (infra/model.py `provider_statements`)."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from infra.deploy_policy import (
    SCALING_DIMENSION,
    Arns,
    StageResources,
    deploy_statements,
    wildcard_reason,
)
from infra.execution_policy import Where, execution_policy
from peagle_deploy.access import endpoint_grants, patterns_intersect
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

ACCOUNT = "123456789012"
REGION = "us-east-1"
SHARED = "peagle-" + "b" * 46  # 53 characters shared by the stages below
ROLE = f"arn:aws:iam::{ACCOUNT}:role/exec"


def _stage(name: str, **kwargs: Any) -> StageResources:
    return StageResources(stage=name, region=REGION, endpoint_name=f"{SHARED}-{name}", **kwargs)


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return [resource] if isinstance(resource, str) else list(resource)


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    sids = [s["Sid"] for s in statements]
    assert len(sids) == len(set(sids)), sids
    return {s["Sid"]: s for s in statements}


def test_every_name_grant_of_the_ci_role_is_the_stages_identity() -> None:
    arns = Arns("aws", ACCOUNT)
    dev, staging = _stage("dev"), _stage("staging")
    sids = _by_sid(deploy_statements(arns, staging, dev))
    grants = endpoint_grants(staging.endpoint_name)
    assert _resources(sids["OwnConfigsAndModels"]) == sorted(
        [grants.configs.arn("aws", REGION, ACCOUNT), grants.models.arn("aws", REGION, ACCOUNT)]
    )
    own_config = sids["OwnConfigsOfOwnModels"]
    assert own_config["Action"] == ["sagemaker:CreateEndpointConfig"]
    assert own_config["Condition"] == {
        "ArnLike": {"sagemaker:ModelArn": grants.models.arn("aws", REGION, ACCOUNT)}
    }
    creates = [s["Sid"] for s in sids.values() if "sagemaker:CreateEndpointConfig" in s["Action"]]
    assert creates == ["OwnConfigsOfOwnModels"]  # never without the model condition
    # what staging may change names nothing of dev's, though the names share 53 characters
    dev_grants = [g.arn("aws", REGION, ACCOUNT) for g in endpoint_grants(dev.endpoint_name).all()]
    for sid in ("OwnEndpoint", "OwnConfigsAndModels", "OwnConfigsOfOwnModels", "OwnEndpointLogs"):
        for mine in _resources(sids[sid]):
            assert not any(patterns_intersect(mine, theirs) for theirs in dev_grants), (sid, mine)
    # dev, its promotion source, is read only, and never its models' environment
    # (DescribeModel shows the resolved secrets: issue 34, Low 2)
    assert set(sids["SourceConfigsAndModels"]["Action"]) == {
        "sagemaker:DescribeEndpointConfig",
        "sagemaker:ListTags",
    }
    assert "OwnEndpointOnOwnConfigs" in sids
    for sid in ("OwnEndpointOnOwnConfigs",):
        for mine in _resources(sids[sid]):
            assert not any(patterns_intersect(mine, theirs) for theirs in dev_grants), (sid, mine)


def test_autoscaling_writes_are_bound_to_sagemaker_variants_of_the_stage() -> None:
    sids = _by_sid(deploy_statements(Arns("aws", ACCOUNT), _stage("dev"), None))
    variants = {
        "application-autoscaling:service-namespace": "sagemaker",
        "application-autoscaling:scalable-dimension": SCALING_DIMENSION,
    }
    targets = f"arn:aws:application-autoscaling:{REGION}:{ACCOUNT}:scalable-target/*"
    register, writes = sids["AutoscalingRegister"], sids["AutoscalingOwnTargets"]
    assert register["Resource"] == writes["Resource"] == targets
    assert register["Action"] == ["application-autoscaling:RegisterScalableTarget"]
    assert register["Condition"] == {
        "StringEquals": {**variants, "aws:RequestTag/peagle:stage": "dev"},
        "StringEqualsIfExists": {"aws:ResourceTag/peagle:stage": "dev"},
    }
    assert writes["Condition"] == {
        "StringEquals": {**variants, "aws:ResourceTag/peagle:stage": "dev"}
    }
    assert all(
        a.startswith("application-autoscaling:Describe") for a in sids["AutoscalingReads"]["Action"]
    )
    plan = build_plan(load_spec(model="gpt-oss-20b", scaling={"max_instances": 2}))
    assert plan.autoscaling is not None
    target = plan.autoscaling["register_scalable_target"]
    assert (target["ServiceNamespace"], target["ScalableDimension"], target["Tags"]) == (
        "sagemaker",
        SCALING_DIMENSION,
        {"peagle:stage": "dev"},
    )


@pytest.mark.parametrize("role", [None, ROLE])
def test_every_wildcard_of_the_ci_role_has_its_reason(role: str | None) -> None:
    plan = build_plan(load_spec(model="gpt-oss-20b", stage="staging"))
    own = StageResources(
        "staging", REGION, plan.endpoint_name, plan.create_model, execution_role_arn=role
    )
    source = StageResources("dev", REGION, f"{SHARED}-dev", plan.create_model)
    for statement in deploy_statements(Arns("aws", ACCOUNT), own, source):
        if any("*" in r for r in _resources(statement)):
            assert wildcard_reason(statement["Sid"]).strip(), statement["Sid"]


def _custom_model(**container: Any) -> dict[str, Any]:
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/team/vllm:1"
    return {
        "ModelName": "m",
        "PrimaryContainer": {
            "Image": image,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": "s3://acme-models/qwen3/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
            **container,
        },
    }


def test_the_execution_policy_writes_only_its_endpoints_logs_and_names_its_wildcards() -> None:
    where = Where("aws", REGION, ACCOUNT)
    vpc = {"Subnets": ["subnet-0123456789abcdef0"], "SecurityGroupIds": ["sg-0123456789abcdef0"]}
    policy = execution_policy(
        {**_custom_model(), "VpcConfig": vpc},
        f"{SHARED}-dev",
        where,
        key_arn=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k",
        model_data_kms_key_arns=[f"arn:aws:kms:{REGION}:{ACCOUNT}:key/d"],
        bucket_owner=ACCOUNT,
    )
    sids = _by_sid(policy.statements)
    logs = endpoint_grants(f"{SHARED}-dev").log_streams.arn("aws", REGION, ACCOUNT)
    assert _resources(sids["WriteOwnLogGroup"]) == [logs]
    prod_group = f"/aws/sagemaker/Endpoints/{SHARED}-prod"
    prod_stream = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{prod_group}:log-stream:x"
    assert not fnmatch.fnmatchcase(prod_stream, logs)
    assert sids["DecryptOwnKey"]["Condition"]["StringEquals"]["kms:ViaService"] == [
        f"sagemaker.{REGION}.amazonaws.com",
        f"ec2.{REGION}.amazonaws.com",
    ]
    assert set(sids) >= {"ReadModelAndDrafter", "PullServingImage", "VpcNetworkInterfaces"}
    acknowledged = policy.acknowledged()
    wildcards = {r for s in policy.statements for r in _resources(s) if "*" in r}
    assert set(acknowledged) == wildcards
    assert all(reason.strip() for reason in acknowledged.values())


def test_without_a_key_or_a_vpc_the_execution_policy_has_neither() -> None:
    policy = execution_policy(
        _custom_model(),
        "peagle-x-dev",
        Where("aws", REGION, ACCOUNT),
        key_arn=None,
        bucket_owner=ACCOUNT,
    )
    sids = {s["Sid"] for s in policy.statements}
    assert not sids & {
        "DecryptOwnKey",
        "DecryptModelDataViaS3",
        "VpcDescribe",
        "VpcNetworkInterfaces",
    }


def test_the_model_provider_manages_only_its_endpoints_models() -> None:
    from infra.model import provider_statements

    models = endpoint_grants(f"{SHARED}-dev").models.arn("aws", REGION, ACCOUNT)
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-AbCdEf"
    statements = _by_sid(provider_statements(models, ROLE, {"HF_TOKEN": secret + ":token"}))
    assert statements["ManagePeagleModels"]["Resource"] == models
    assert statements["PassExecutionRoleToSageMaker"]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }
    assert statements["ReadTheModelsSecrets"]["Resource"] == [secret]
    prod = endpoint_grants(f"{SHARED}-prod").models.arn("aws", REGION, ACCOUNT)
    assert not patterns_intersect(models, prod)
    assert "ReadTheModelsSecrets" not in _by_sid(provider_statements(models, ROLE, {}))
