"""The SageMaker model as a custom resource fed by the renderer's CreateModel request.

CloudFormation's AWS::SageMaker::Model has no AdditionalModelDataSources (docs/platform-facts.md),
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


def provider_log_group_name(endpoint_name: str) -> str:
    """The model provider's log group: a fixed name, so the stack key's policy can name it."""
    return f"/peagle-deploy/{endpoint_name}/model-provider"


def create_model_parameters(create_model: Mapping[str, Any], role_arn: str) -> dict[str, Any]:
    """The renderer's CreateModel request with the stack's execution role in it."""
    params = copy.deepcopy(dict(create_model))
    params["ExecutionRoleArn"] = role_arn
    return params


class PeagleModel(Construct):
    """CreateModel/DeleteModel through an AwsCustomResource with a scoped policy.

    One custom resource per model: its construct id ends in the model name's content
    digest, so a changed spec is a new resource (CreateModel with the new name) and
    CloudFormation deletes the old one (DeleteModel with its physical id) once the
    endpoint has moved on. An update of the same resource can only be a change of
    tags (everything else is in the digest), which AddTags applies; CreateModel is
    never called twice for one name.

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
        log_group_name: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.model_name: str = create_model["ModelName"]
        if not self.model_name.startswith(name_prefix) or self.model_name == name_prefix:
            raise ValueError(f"model name {self.model_name!r} does not extend {name_prefix!r}")
        digest = self.model_name[len(name_prefix) :]
        self.parameters = create_model_parameters(create_model, execution_role.role_arn)
        model_arns = stack.format_arn(
            service="sagemaker", resource="model", resource_name=f"{name_prefix}*"
        )
        model_arn = stack.format_arn(
            service="sagemaker", resource="model", resource_name=self.model_name
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
            log_group_name=log_group_name,
            encryption_key=key,
            retention=log_retention,
            removal_policy=removal_policy,
        )
        provider_logs.grant_write(provider_role)
        # A policy of its own (not the custom resource's), so that it outlives a
        # replaced model resource: the old model's DeleteModel runs after the new one.
        self.provider_policy = iam.Policy(
            self,
            "ProviderPolicy",
            roles=[provider_role],
            statements=[
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
                    conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
                ),
            ],
        )

        self.resource = cr.AwsCustomResource(
            self,
            f"Model{digest}",
            resource_type=MODEL_RESOURCE_TYPE,
            on_create=cr.AwsSdkCall(
                service="SageMaker",
                action="createModel",
                parameters=self.parameters,
                physical_resource_id=cr.PhysicalResourceId.of(self.model_name),
                output_paths=["ModelArn"],
            ),
            on_update=cr.AwsSdkCall(
                service="SageMaker",
                action="addTags",
                parameters={"ResourceArn": model_arn, "Tags": self.parameters["Tags"]},
                physical_resource_id=cr.PhysicalResourceId.of(self.model_name),
            ),
            on_delete=cr.AwsSdkCall(
                service="SageMaker",
                action="deleteModel",
                parameters={"ModelName": cr.PhysicalResourceIdReference()},
                ignore_error_codes_matching=_MISSING_MODEL_ERRORS,
            ),
            role=provider_role,
            log_group=provider_logs,
            # Offline, reproducible: the SDK that Lambda's Node.js runtime bundles.
            install_latest_aws_sdk=False,
            timeout=Duration.minutes(2),
        )
        self.resource.node.add_dependency(self.provider_policy)
        self.model_arn = model_arn

        acknowledge(
            self.provider_policy,
            "AwsSolutions-IAM5",
            "Model names are content-derived (a hash of the spec after a stable prefix); "
            "the provider must create the new model and delete the old one of a replaced "
            "spec, so it is granted the name prefix, not one name.",
            "Resource::" + nag_text(stack, model_arns),
        )
