"""One customer-managed KMS key per stack: endpoint storage volume and log group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class EndpointKey(Construct):
    """A rotating KMS key the endpoint's log group and (where allowed) volume use.

    The key policy lets CloudWatch Logs use the key only for the named log groups
    (`log_group_names`: the stack's own, matched exactly on the `aws:logs:arn`
    encryption context as AWS documents for encrypted log groups), or, without names,
    for log groups of this account and region; everything else goes through IAM (the
    account root statement CDK adds), so the execution role's own `kms:Decrypt` grant
    is what lets SageMaker use it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        log_group_names: Sequence[str] = (),
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

        def log_group_arn(name: str) -> str:
            return stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )

        condition: dict[str, dict[str, Any]]
        if log_group_names:
            condition = {
                "ArnEquals": {
                    "kms:EncryptionContext:aws:logs:arn": [
                        log_group_arn(n) for n in sorted(set(log_group_names))
                    ]
                }
            }
        else:
            condition = {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_group_arn("*")}}
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsUseForTheStacksLogGroups"
                if log_group_names
                else "CloudWatchLogsUseForThisAccountsLogGroups",
                principals=[logs_principal],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions=condition,
            )
        )

    @property
    def key_arn(self) -> str:
        """ARN of the key (a token until deploy time)."""
        return self.key.key_arn
