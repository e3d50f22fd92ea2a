"""The SageMaker execution role's identity policy, as JSON statements (no aws_cdk).

Exactly what the CreateModel request needs: GetObject/ListBucket on the model and drafter
locations, only in buckets of the expected owner (`s3:ResourceAccount`; JumpStart's own
buckets, which AWS owns, apart), image pulls from the image's repository only, writes to
the endpoint's own log group (its grant from `peagle_deploy.access.endpoint_grants`),
instance metrics in SageMaker's namespace only, Decrypt with the stack's key only through
SageMaker or EBS (and of SSE-KMS weights only through S3), and the ENI actions SageMaker
needs when the model runs in a VPC. Each statement that names a `*` comes with the reason
the construct acknowledges it with (infra/role.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.access import (
    ECR_PULL_ACTIONS,
    ecr_repositories,
    endpoint_grants,
    s3_read_statements,
    s3_reads,
)

LOG_ACTIONS = (
    "logs:CreateLogGroup",
    "logs:CreateLogStream",
    "logs:DescribeLogStreams",
    "logs:PutLogEvents",
)
# SageMaker publishes the instance metrics (CPU, memory, disk, GPU) of an endpoint with
# the execution role into this namespace.
INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"
# What SageMaker does with the role to attach containers to a VPC (ENIs in its subnets).
VPC_DESCRIBE_ACTIONS = (
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)
VPC_ENI_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
)


@dataclass(frozen=True)
class Where:
    """The stack's partition, region and account (CDK tokens or literal text)."""

    partition: str
    region: str
    account: str

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"


@dataclass
class ExecutionPolicy:
    """The statements, and (resource with `*`, why) for each wildcard they name."""

    statements: list[dict[str, Any]] = field(default_factory=list)
    wildcards: list[tuple[str, str]] = field(default_factory=list)

    def add(self, *statements: dict[str, Any]) -> None:
        self.statements.extend(statements)

    def acknowledged(self) -> dict[str, str]:
        """Each wildcard resource with its reasons joined (one acknowledgement each)."""
        merged: dict[str, list[str]] = {}
        for resource, reason in self.wildcards:
            merged.setdefault(resource, []).append(reason)
        return {resource: " ".join(reasons) for resource, reasons in merged.items()}


def _allow(
    sid: str, actions: Sequence[str], resources: Sequence[str], condition: Any = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": list(actions),
        "Resource": list(resources),
    }
    if condition:
        out["Condition"] = condition
    return out


def s3_part(
    policy: ExecutionPolicy, create_model: Mapping[str, Any], where: Where, owner: str
) -> None:
    """The model and drafter locations, nothing else, in the expected owner's buckets."""
    policy.add(*s3_read_statements(create_model, partition=where.partition, owner=owner))
    for read in s3_reads(create_model):
        if not read.is_prefix:
            continue
        # parse_s3_uri refuses bucket roots; a bucket-wide grant is never waved through.
        if not read.key.strip("/"):
            raise ValueError(f"{read.source}: a bucket-wide S3 grant is never acknowledged")
        policy.wildcards.append(
            (
                f"arn:{where.partition}:s3:::{read.object_pattern}",
                f"SageMaker reads every object under the {read.source} prefix "
                f"s3://{read.bucket}/{read.key} (uncompressed weights); only that prefix.",
            )
        )


def image_part(policy: ExecutionPolicy, create_model: Mapping[str, Any], where: Where) -> None:
    """Pull the serving image from its repository only."""
    repos = [r.arn(where.partition) for r in ecr_repositories(create_model)]
    policy.add(
        _allow("PullServingImage", ECR_PULL_ACTIONS, repos),
        _allow("EcrAuthToken", ["ecr:GetAuthorizationToken"], ["*"]),
    )
    policy.wildcards.append(
        (
            "*",
            "ecr:GetAuthorizationToken does not support resource-level permissions "
            "(it must be granted on *); image pulls are limited to the image's repository.",
        )
    )


def logs_and_metrics_part(policy: ExecutionPolicy, endpoint_name: str, where: Where) -> None:
    """The endpoint's own log group; instance metrics in SageMaker's namespace only."""
    streams = endpoint_grants(endpoint_name).log_streams.arn(
        where.partition, where.region, where.account
    )
    policy.add(
        _allow("WriteOwnLogGroup", LOG_ACTIONS, [streams]),
        _allow(
            "PutInstanceMetrics",
            ["cloudwatch:PutMetricData"],
            ["*"],
            {"StringEquals": {"cloudwatch:namespace": INSTANCE_METRICS_NAMESPACE}},
        ),
    )
    policy.wildcards += [
        (
            streams,
            "Log streams are created by SageMaker per instance with generated names; "
            "the grant is limited to streams of the endpoint's own log group.",
        ),
        (
            "*",
            "cloudwatch:PutMetricData does not support resource-level permissions; it is "
            f"limited to the {INSTANCE_METRICS_NAMESPACE} namespace by condition.",
        ),
    ]


def volume_key_services(region: str) -> list[str]:
    """The `kms:ViaService` values of the services that use the storage-volume key on
    the role's behalf: SageMaker and EBS (EBS reports itself as ec2), per the AWS KMS
    Developer Guide's kms:ViaService table ("Amazon SageMaker
    sagemaker.AWS_region.amazonaws.com"; "Amazon EBS ec2.AWS_region.amazonaws.com";
    awsdocs/aws-kms-developer-guide@38281913dc98, doc_source/conditions-kms.md). Code in
    the container, which can read the role's credentials, cannot call kms:Decrypt
    directly."""
    return [f"sagemaker.{region}.amazonaws.com", f"ec2.{region}.amazonaws.com"]


def kms_part(
    policy: ExecutionPolicy, key_arn: str | None, data_keys: Sequence[str], where: Where
) -> None:
    """Decrypt with the stack's key only through the services that encrypt the volume;
    SSE-KMS weights' keys (exactly the spec's) only when S3 asks on the role's behalf."""
    if key_arn is not None:
        policy.add(
            _allow(
                "DecryptOwnKey",
                ["kms:Decrypt"],
                [key_arn],
                {"StringEquals": {"kms:ViaService": volume_key_services(where.region)}},
            )
        )
    if data_keys:
        policy.add(
            _allow(
                "DecryptModelDataViaS3",
                ["kms:Decrypt"],
                sorted(set(data_keys)),
                {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}},
            )
        )


def vpc_part(policy: ExecutionPolicy, vpc: Mapping[str, Any] | None, where: Where) -> None:
    """ENIs in the spec's subnets and security groups, when the model runs in a VPC."""
    if not vpc:
        return
    interfaces = where.arn("ec2", "network-interface/*")
    eni_resources = [
        interfaces,
        *(where.arn("ec2", f"subnet/{s}") for s in vpc.get("Subnets", [])),
        *(where.arn("ec2", f"security-group/{g}") for g in vpc.get("SecurityGroupIds", [])),
    ]
    policy.add(
        _allow("VpcDescribe", VPC_DESCRIBE_ACTIONS, ["*"]),
        _allow("VpcNetworkInterfaces", VPC_ENI_ACTIONS, eni_resources),
    )
    policy.wildcards += [
        ("*", "ec2:Describe* (subnets, VPCs, ENIs) does not support resource-level permissions."),
        (
            interfaces,
            "SageMaker creates the container ENIs itself; their ids are unknown before "
            "they exist. Creation is also limited to the spec's subnets and groups.",
        ),
    ]


def execution_policy(
    create_model: Mapping[str, Any],
    endpoint_name: str,
    where: Where,
    *,
    key_arn: str | None,
    model_data_kms_key_arns: Sequence[str] = (),
    bucket_owner: str,
) -> ExecutionPolicy:
    """Every statement of the execution role, in a fixed order, with the wildcards'
    reasons. `bucket_owner`: the spec's `expected_bucket_owner`, else the stack's account."""
    policy = ExecutionPolicy()
    s3_part(policy, create_model, where, bucket_owner)
    image_part(policy, create_model, where)
    logs_and_metrics_part(policy, endpoint_name, where)
    kms_part(policy, key_arn, model_data_kms_key_arns, where)
    vpc_part(policy, create_model.get("VpcConfig"), where)
    return policy
