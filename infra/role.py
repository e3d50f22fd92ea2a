"""The SageMaker execution role, least privilege, derived from the CreateModel request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.execution_policy import Where, execution_policy
from infra.nag import acknowledge, nag_text


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


def sagemaker_role(scope: Construct, construct_id: str, description: str) -> iam.Role:
    """A role only SageMaker may assume, for this account's resources in this region."""
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
            sagemaker_trust_conditions(Stack.of(scope))
        ),
        description=description,
    )


class ExecutionRole(Construct):
    """The role SageMaker assumes to load the model and run the container.

    Grants exactly what the CreateModel request needs (`infra.execution_policy`):
    GetObject/ListBucket on the model and drafter locations, only in buckets
    `expected_bucket_owner` (default: the stack's account) owns (`s3:ResourceAccount`;
    JumpStart's own buckets, which AWS owns, are granted without it), image pulls from the
    image's repository only, writes to the endpoint's own log group, Decrypt with the
    stack's key where it encrypts the storage volume (`key`; None on local-NVMe families),
    only through SageMaker or EBS (and, through S3 only, with the spec's
    `model_data_kms_key_arns` of SSE-KMS weights), and the ENI actions SageMaker needs
    when the model runs in a VPC. No managed policies. SageMaker may assume it only on
    behalf of this account's resources in this region (`aws:SourceArn`). Each wildcard is
    acknowledged to cdk-nag on the policy, with its reason.
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
        self.role = sagemaker_role(
            self, "Role", f"SageMaker execution role of endpoint {endpoint_name} (peagle-deploy)"
        )
        planned = execution_policy(
            create_model,
            endpoint_name,
            Where(stack.partition, stack.region, stack.account),
            key_arn=key.key_arn if key is not None else None,
            model_data_kms_key_arns=model_data_kms_key_arns,
            bucket_owner=expected_bucket_owner or stack.account,
        )
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            statements=[iam.PolicyStatement.from_json(s) for s in planned.statements],
        )
        for resource, reason in planned.acknowledged().items():
            acknowledge(
                self.policy, "AwsSolutions-IAM5", reason, "Resource::" + nag_text(stack, resource)
            )

    @property
    def role_arn(self) -> str:
        """ARN of the role (a token until deploy time)."""
        return self.role.role_arn
