"""The SageMaker execution role, least privilege, derived from the CreateModel request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.nag import acknowledge, nag_text
from peagle_deploy.access import ecr_repositories, s3_read_statements, s3_reads

ECR_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
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


def sagemaker_trust_conditions(stack: Stack) -> dict[str, Any]:
    """SageMaker may assume the role only for this account's resources in this region.

    AWS's confused-deputy guidance for SageMaker AI inference (real-time, serverless and
    asynchronous endpoints) puts `aws:SourceArn` = `arn:<partition>:sagemaker:<region>:
    <account>:*` in the execution role's trust policy, in exactly that form ("do not
    replace it with the full ARN of a specific model or endpoint"), and says that with the
    account in `aws:SourceArn` no `aws:SourceAccount` is needed; so only the documented
    key is used (SageMaker Developer Guide, "Cross-service confused deputy prevention",
    section "SageMaker Inference";
    https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html,
    read in awsdocs/amazon-sagemaker-developer-guide,
    doc_source/security-confused-deputy-prevention.md).
    """
    source = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}:*"
    return {"ArnLike": {"aws:SourceArn": source}}


def volume_key_services(stack: Stack) -> list[str]:
    """The `kms:ViaService` values of the services that use the storage-volume key on
    the role's behalf: SageMaker and EBS (EBS reports itself as ec2), per the AWS KMS
    Developer Guide's kms:ViaService table ("Amazon SageMaker
    sagemaker.AWS_region.amazonaws.com"; "Amazon EBS ec2.AWS_region.amazonaws.com";
    awsdocs/aws-kms-developer-guide@38281913dc98, doc_source/conditions-kms.md). Code in
    the container, which can read the role's credentials, cannot call kms:Decrypt
    directly."""
    return [f"sagemaker.{stack.region}.amazonaws.com", f"ec2.{stack.region}.amazonaws.com"]


def endpoint_log_group_name(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's container output to."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


class ExecutionRole(Construct):
    """The role SageMaker assumes to load the model and run the container.

    Grants exactly what the CreateModel request needs: GetObject/ListBucket on the
    model and drafter locations, only in buckets `expected_bucket_owner` (default: the
    stack's account) owns (`s3:ResourceAccount`; JumpStart's own buckets, which AWS owns,
    are granted without it), image pulls from the image's repository only, writes to the
    endpoint's own log group, Decrypt with the stack's key where it encrypts the
    storage volume (`key`; None on local-NVMe families), only through SageMaker or EBS
    (and, through S3 only, with
    the spec's `model_data_kms_key_arns` of SSE-KMS weights), and the ENI actions
    SageMaker needs when the model runs in a VPC. No managed policies. SageMaker may
    assume it only on behalf of this account's resources in this region
    (`aws:SourceArn`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        create_model: Mapping[str, Any],
        endpoint_name: str,
        key: kms.IKey | None,
        model_data_kms_key_arns: Sequence[str] = (),
        expected_bucket_owner: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        partition = stack.partition
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                sagemaker_trust_conditions(stack)
            ),
            description=f"SageMaker execution role of endpoint {endpoint_name} (peagle-deploy)",
        )
        policy = iam.Policy(self, "Policy", roles=[self.role])
        self.policy = policy
        wildcard_reasons: list[tuple[str, str]] = []

        # --- S3: the model and drafter locations, nothing else, in the expected owner's
        # buckets (s3:ResourceAccount; JumpStart's own buckets are AWS's) ------------
        reads = s3_reads(create_model)
        for statement in s3_read_statements(
            create_model, partition=partition, owner=expected_bucket_owner or stack.account
        ):
            policy.add_statements(iam.PolicyStatement.from_json(statement))
        for read in reads:
            if read.is_prefix:
                # parse_s3_uri refuses bucket roots; a bucket-wide grant is never waved
                # through by this acknowledgement.
                if not read.key.strip("/"):
                    raise ValueError(f"{read.source}: a bucket-wide S3 grant is never acknowledged")
                wildcard_reasons.append(
                    (
                        f"arn:{partition}:s3:::{read.object_pattern}",
                        f"SageMaker reads every object under the {read.source} prefix "
                        f"s3://{read.bucket}/{read.key} (uncompressed weights); only that prefix.",
                    )
                )

        # --- ECR: pull the serving image from its repository only ------------------
        repos = ecr_repositories(create_model)
        policy.add_statements(
            iam.PolicyStatement(
                sid="PullServingImage",
                actions=list(ECR_PULL_ACTIONS),
                resources=[
                    stack.format_arn(
                        service="ecr",
                        region=r.region,
                        account=r.account,
                        resource="repository",
                        resource_name=r.name,
                    )
                    for r in repos
                ],
            ),
            iam.PolicyStatement(
                sid="EcrAuthToken",
                actions=["ecr:GetAuthorizationToken"],
                resources=["*"],
            ),
        )
        wildcard_reasons.append(
            (
                "*",
                "ecr:GetAuthorizationToken does not support resource-level permissions "
                "(it must be granted on *); image pulls are limited to the image's repository.",
            )
        )

        # --- Logs: the endpoint's own log group ------------------------------------
        log_group_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{endpoint_log_group_name(endpoint_name)}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        policy.add_statements(
            iam.PolicyStatement(
                sid="WriteOwnLogGroup", actions=list(LOG_ACTIONS), resources=[log_group_arn]
            )
        )
        wildcard_reasons.append(
            (
                log_group_arn,
                "Log streams are created by SageMaker per instance with generated names; "
                "the grant is limited to streams of the endpoint's own log group.",
            )
        )

        # --- CloudWatch: the endpoint's instance metrics -----------------------------
        policy.add_statements(
            iam.PolicyStatement(
                sid="PutInstanceMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": INSTANCE_METRICS_NAMESPACE}},
            )
        )
        wildcard_reasons.append(
            (
                "*",
                "cloudwatch:PutMetricData does not support resource-level permissions; it is "
                f"limited to the {INSTANCE_METRICS_NAMESPACE} namespace by condition.",
            )
        )

        # --- KMS: its own key, only through the services that encrypt the volume -----
        if key is not None:
            policy.add_statements(
                iam.PolicyStatement(
                    sid="DecryptOwnKey",
                    actions=["kms:Decrypt"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": volume_key_services(stack)}},
                )
            )
        # SSE-KMS encrypted weights: Decrypt on exactly the spec's keys, and only when
        # S3 asks on the role's behalf (GetObject of an SSE-KMS object), not directly.
        if model_data_kms_key_arns:
            policy.add_statements(
                iam.PolicyStatement(
                    sid="DecryptModelDataViaS3",
                    actions=["kms:Decrypt"],
                    resources=sorted(set(model_data_kms_key_arns)),
                    conditions={"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}},
                )
            )

        # --- VPC: ENIs in the spec's subnets ------------------------------------------
        vpc = create_model.get("VpcConfig")
        if vpc:
            eni_resources = [
                stack.format_arn(service="ec2", resource="network-interface", resource_name="*"),
                *(
                    stack.format_arn(service="ec2", resource="subnet", resource_name=s)
                    for s in vpc.get("Subnets", [])
                ),
                *(
                    stack.format_arn(service="ec2", resource="security-group", resource_name=g)
                    for g in vpc.get("SecurityGroupIds", [])
                ),
            ]
            policy.add_statements(
                iam.PolicyStatement(
                    sid="VpcDescribe", actions=list(VPC_DESCRIBE_ACTIONS), resources=["*"]
                ),
                iam.PolicyStatement(
                    sid="VpcNetworkInterfaces",
                    actions=list(VPC_ENI_ACTIONS),
                    resources=eni_resources,
                ),
            )
            wildcard_reasons.append(
                (
                    "*",
                    "ec2:Describe* (subnets, VPCs, ENIs) does not support resource-level "
                    "permissions.",
                )
            )
            wildcard_reasons.append(
                (
                    eni_resources[0],
                    "SageMaker creates the container ENIs itself; their ids are unknown before "
                    "they exist. Creation is also limited to the spec's subnets and groups.",
                )
            )

        merged: dict[str, list[str]] = {}
        for finding, reason in wildcard_reasons:
            merged.setdefault(finding, []).append(reason)
        for finding, reasons in merged.items():
            acknowledge(
                policy,
                "AwsSolutions-IAM5",
                " ".join(reasons),
                "Resource::" + nag_text(stack, finding),
            )

    @property
    def role_arn(self) -> str:
        """ARN of the role (a token until deploy time)."""
        return self.role.role_arn
