"""One customer-managed KMS key per stack: endpoint storage volume and log group."""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class EndpointKey(Construct):
    """A rotating KMS key the endpoint's log group and (where allowed) volume use.

    The key policy lets CloudWatch Logs use the key only for log groups of this
    account and region (the `aws:logs:arn` encryption context), as AWS documents for
    encrypted log groups; everything else goes through IAM (the account root
    statement CDK adds), so the execution role's own `kms:Decrypt` grant is what
    lets SageMaker use it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            description=description,
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        logs_principal = iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsUseForThisAccountsLogGroups",
                principals=[logs_principal],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )

    @property
    def key_arn(self) -> str:
        """ARN of the key (a token until deploy time)."""
        return self.key.key_arn
