"""The SageMaker model as a custom resource fed by the renderer's CreateModel request.

CloudFormation's AWS::SageMaker::Model has no AdditionalModelDataSources (cfn-lint's
schemas, aws-cdk-lib's CfnModel; docs/platform-facts.md), so a model with a P-EAGLE
drafter cannot be a native resource. This custom resource runs the project's own Python handler
(infra/model_provider/handler.py) through CDK's Provider framework: CreateModel with the
exact dictionary `peagle_deploy.plan.build_plan` renders for the SDK (only the execution
role differs: it is the stack's own role), retried while IAM propagates that role;
DeleteModel with its physical id (the content-derived model name) on delete. A changed
spec is a new model name, so CloudFormation creates the new model and deletes the old
one after the endpoint has moved to it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack, Stage
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra import provider_bundle
from infra.model_provider import handler
from infra.nag import acknowledge, nag_text
from peagle_deploy.access import endpoint_grants
from peagle_deploy.naming import (
    DIGEST_LEN,
    derived_head,
    derived_name_pattern,
    name_digest,
    provider_log_group_name,
)

MODEL_RESOURCE_TYPE = "Custom::PeagleModel"
# The newest Python runtime aws-cdk-lib 2.275 offers (aws_lambda.Runtime.PYTHON_3_14).
PROVIDER_RUNTIME = lambda_.Runtime.PYTHON_3_14
HANDLER = "handler.on_event"


def create_model_parameters(create_model: Mapping[str, Any], role_arn: str) -> dict[str, Any]:
    """The renderer's CreateModel request with the stack's execution role in it."""
    params = copy.deepcopy(dict(create_model))
    params["ExecutionRoleArn"] = role_arn
    return params


def provider_statements(
    models_arn: str, execution_role_arn: str, secret_refs: Mapping[str, str]
) -> list[dict[str, Any]]:
    """What the model handler may do: create, describe, delete, tag and read the tags of
    (an existing model is adopted only when its stage tag is the stack's) the endpoint's own
    models (`models_arn`, the endpoint's grant: exactly the digest's characters after its
    head, so the old model of a replaced spec stays deletable and `<endpoint>-mirror` or
    another endpoint's models never match), pass the execution role only to SageMaker,
    and read exactly the secrets the spec gives by reference."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ManagePeagleModels",
            "Effect": "Allow",
            "Action": [
                "sagemaker:AddTags",
                "sagemaker:CreateModel",
                "sagemaker:DeleteModel",
                "sagemaker:DescribeModel",
                "sagemaker:ListTags",
            ],
            "Resource": models_arn,
        },
        {
            "Sid": "PassExecutionRoleToSageMaker",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": execution_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        },
    ]
    secret_arns = sorted({":".join(r.split(":")[:7]) for r in secret_refs.values()})
    if secret_arns:
        statements.append(
            {
                "Sid": "ReadTheModelsSecrets",
                "Effect": "Allow",
                "Action": "secretsmanager:GetSecretValue",
                "Resource": secret_arns,
            }
        )
    return statements


class PeagleModel(Construct):
    """CreateModel/DeleteModel through a Provider-framework custom resource.

    One custom resource per model: its construct id ends in the model name's content
    digest, so a changed spec is a new resource (CreateModel with the new name) and
    CloudFormation deletes the old one (DeleteModel with its physical id) once the
    endpoint has moved on. An update of the same resource can only be a change of tags
    (everything else is in the digest), which the handler applies with AddTags.

    Two roles, each with only what it needs: the handler's (`provider_statements`, on
    the endpoint's model grant from `peagle_deploy.access.endpoint_grants`) and the
    framework's, which may only invoke the handler. Both log to one encrypted log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        create_model: Mapping[str, Any],
        execution_role: iam.IRole,
        endpoint_name: str,
        key: kms.IKey,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        secret_refs: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.endpoint_name = endpoint_name
        self.secret_refs = dict(sorted((secret_refs or {}).items()))
        self.execution_role = execution_role
        self.model_name: str = create_model["ModelName"]
        self.parameters = create_model_parameters(create_model, execution_role.role_arn)
        self.model_arn = stack.format_arn(
            service="sagemaker", resource="model", resource_name=self.model_name
        )
        provider_logs = logs.LogGroup(
            self,
            "ProviderLogs",
            log_group_name=provider_log_group_name(endpoint_name),
            encryption_key=key,
            retention=log_retention,
            removal_policy=removal_policy,
        )
        provider_role = self._logging_lambda_role(
            "ProviderRole", "Creates and deletes the P-EAGLE SageMaker model", provider_logs
        )
        models = endpoint_grants(endpoint_name).models
        # A policy of its own (not the custom resource's), so that it outlives a
        # replaced model resource: the old model's DeleteModel runs after the new one.
        self.provider_policy = iam.Policy(
            self,
            "ProviderPolicy",
            roles=[provider_role],
            statements=[
                iam.PolicyStatement.from_json(s)
                for s in provider_statements(
                    models.arn(stack.partition, stack.region, stack.account),
                    execution_role.role_arn,
                    self.secret_refs,
                )
            ],
        )
        self.on_event = self._handler_function(provider_role, provider_logs)
        framework_role = self._logging_lambda_role(
            "FrameworkRole", "Runs the CDK provider framework of the P-EAGLE model", provider_logs
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.on_event,
            framework_on_event_role=framework_role,
            log_group=provider_logs,
        )
        self.resource = self.add_model(create_model)
        acknowledge(
            framework_role.node.find_child("DefaultPolicy"),
            "AwsSolutions-IAM5",
            "The CDK provider framework (Provider.addPermissions -> grantInvoke) lets its "
            "function invoke the model handler and the handler's versions and aliases "
            "(`<handler arn>:*`); that is one function, not a wildcard over functions.",
            "Resource::" + nag_text(stack, f"{self.on_event.function_arn}:*"),
        )

    def add_model(self, create_model: Mapping[str, Any]) -> CustomResource:
        """One more model on this provider (an experiment's candidate): same role, same
        name head, same secrets by reference, its own resource (named by its digest, so
        a change replaces it)."""
        name = str(create_model["ModelName"])
        if not derived_name_pattern(self.endpoint_name, "m").fullmatch(name):
            raise ValueError(f"model name {name!r} is not a model name of {self.endpoint_name!r}")
        parameters = create_model_parameters(create_model, self.execution_role.role_arn)
        # A cut endpoint name's head changed with its identity (issue 29): its models get
        # new resources (CreateModel of the new names), never an in-place rename, which
        # the handler refuses; a name that fits keeps the id it always had.
        cut = derived_head(self.endpoint_name) != self.endpoint_name
        resource = CustomResource(
            self,
            f"Model{name_digest(self.endpoint_name) if cut else ''}{name[-DIGEST_LEN:]}",
            service_token=self.provider.service_token,
            resource_type=MODEL_RESOURCE_TYPE,
            # JSON, so that CloudFormation passes booleans and numbers through unchanged
            # (it turns every other property value into a string).
            properties={
                handler.PROPERTY: Stack.of(self).to_json_string(parameters),
                # References only (ARNs): the framework logs these properties whole.
                **(
                    {handler.SECRETS_PROPERTY: json.dumps(self.secret_refs, sort_keys=True)}
                    if self.secret_refs
                    else {}
                ),
            },
            removal_policy=RemovalPolicy.DESTROY,
        )
        resource.node.add_dependency(self.provider_policy)
        return resource

    def _logging_lambda_role(self, construct_id: str, what: str, log: logs.ILogGroup) -> iam.Role:
        """A role for one of the model's Lambda functions that may write only to `log`."""
        role = iam.Role(
            self,
            construct_id,
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{what} (peagle-deploy)",
        )
        log.grant_write(role)
        return role

    def _handler_function(self, role: iam.IRole, log: logs.ILogGroup) -> lambda_.Function:
        """The project's handler (infra/model_provider/handler.py) from the bundled asset."""
        stage = Stage.of(self)
        if stage is None:
            raise ValueError("PeagleModel must be inside a CDK App or Stage")
        return lambda_.Function(
            self,
            "OnEvent",
            description=f"Creates and deletes SageMaker model {self.model_name} (peagle-deploy)",
            runtime=PROVIDER_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(provider_bundle.stage(stage.outdir))),
            timeout=Duration.seconds(handler.LAMBDA_TIMEOUT_S),
            memory_size=256,
            role=role,
            log_group=log,
            logging_format=lambda_.LoggingFormat.JSON,
        )
