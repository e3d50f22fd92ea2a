"""The SageMaker model as a custom resource fed by the renderer's CreateModel request.

CloudFormation's AWS::SageMaker::Model has no AdditionalModelDataSources (FACTS.md 5),
so a model with a P-EAGLE drafter cannot be a native resource. This custom resource
calls CreateModel with the exact dictionary `peagle_deploy.plan.build_plan` renders for
the SDK (only the execution role differs: it is the stack's own role), and DeleteModel
with its physical id on delete. The physical id is the content-derived model name, so
a changed spec creates a new model and CloudFormation deletes the old one after the
endpoint has moved to it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.nag import acknowledge, nag_text

MODEL_RESOURCE_TYPE = "Custom::PeagleModel"
# SageMaker answers DeleteModel of a missing model with ValidationException; a delete
# after a failed create must not block the stack's rollback.
_MISSING_MODEL_ERRORS = "ValidationException"


def create_model_parameters(create_model: Mapping[str, Any], role_arn: str) -> dict[str, Any]:
    """The renderer's CreateModel request with the stack's execution role in it."""
    params = copy.deepcopy(dict(create_model))
    params["ExecutionRoleArn"] = role_arn
    return params


class PeagleModel(Construct):
    """CreateModel/DeleteModel through an AwsCustomResource with a scoped policy.

    The provider function's role may only CreateModel/DeleteModel/AddTags on models
    whose name starts with `name_prefix` (the stable part of the content-derived
    name, so the old model of a replaced spec is still deletable), and pass only the
    execution role, only to SageMaker.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        create_model: Mapping[str, Any],
        execution_role: iam.IRole,
        name_prefix: str,
        key: kms.IKey,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.model_name: str = create_model["ModelName"]
        if not self.model_name.startswith(name_prefix):
            raise ValueError(f"model name {self.model_name!r} does not start with {name_prefix!r}")
        self.parameters = create_model_parameters(create_model, execution_role.role_arn)
        model_arns = stack.format_arn(
            service="sagemaker", resource="model", resource_name=f"{name_prefix}*"
        )

        provider_role = iam.Role(
            self,
            "ProviderRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Creates and deletes the P-EAGLE SageMaker model (peagle-deploy)",
        )
        provider_logs = logs.LogGroup(
            self,
            "ProviderLogs",
            encryption_key=key,
            retention=log_retention,
            removal_policy=removal_policy,
        )
        provider_logs.grant_write(provider_role)

        create_call = cr.AwsSdkCall(
            service="SageMaker",
            action="createModel",
            parameters=self.parameters,
            physical_resource_id=cr.PhysicalResourceId.of(self.model_name),
            output_paths=["ModelArn"],
        )
        self.resource = cr.AwsCustomResource(
            self,
            "Resource",
            resource_type=MODEL_RESOURCE_TYPE,
            on_create=create_call,
            on_update=create_call,
            on_delete=cr.AwsSdkCall(
                service="SageMaker",
                action="deleteModel",
                parameters={"ModelName": cr.PhysicalResourceIdReference()},
                ignore_error_codes_matching=_MISSING_MODEL_ERRORS,
            ),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        sid="ManagePeagleModels",
                        actions=[
                            "sagemaker:AddTags",
                            "sagemaker:CreateModel",
                            "sagemaker:DeleteModel",
                        ],
                        resources=[model_arns],
                    ),
                    iam.PolicyStatement(
                        sid="PassExecutionRoleToSageMaker",
                        actions=["iam:PassRole"],
                        resources=[execution_role.role_arn],
                        conditions={
                            "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
                        },
                    ),
                ]
            ),
            role=provider_role,
            log_group=provider_logs,
            # Offline, reproducible: the SDK that Lambda's Node.js runtime bundles.
            install_latest_aws_sdk=False,
            timeout=Duration.minutes(2),
        )
        self.model_arn = self.resource.get_response_field("ModelArn")

        acknowledge(
            self.resource.node.find_child("CustomResourcePolicy"),
            "AwsSolutions-IAM5",
            "Model names are content-derived (a hash of the spec after a stable prefix); "
            "the provider must create the new model and delete the old one of a replaced "
            "spec, so it is granted the name prefix, not one name.",
            "Resource::" + nag_text(stack, model_arns),
        )
