"""A shadow experiment a stage's spec carries: AWS::SageMaker::InferenceExperiment.

The planner's CreateInferenceExperiment (`plan.experiment_requests`, the request
`peagle experiment start` sends) rendered field by field as the L1 resource, beside the
endpoint, which keeps the incumbent's config and its blue/green DeploymentConfig:
SageMaker itself puts the candidate beside the incumbent when the experiment starts. A
field CloudFormation cannot express is refused at synth with its name.

How the stack ends it follows AWS's published handler (docs/platform-facts.md,
"CloudFormation and the InferenceExperiment"): deleting a running experiment stops it
with `Retain` for both variants, so removing the resource would leave the candidate's
fleet on the endpoint. The stage's `experiment_state` (completed, cancelled) stops it in
place instead: `DesiredState` with `ModelVariants` reduced to the incumbent's, which the
handler's update turns into a StopInferenceExperiment that retains the incumbent and
removes the candidate (the endpoint reverts). The resource is then removed by a later
deploy, when deleting it only deletes its metadata. Create-only fields (`Name` is derived
from the experiment's content) never change in place: a running experiment is changed by
ending it first (`peagle doctor --stage` refuses the deploy otherwise).

Ordering: running, the experiment is created after the endpoint (it names it); stopping,
the endpoint waits for the stop, so a change to the endpoint in the same deploy never
runs while the experiment is live. `EndpointName` is the plan's literal name, not the
endpoint's attribute, so that the dependency can point either way.

SageMaker assumes a role of the experiment's own to do that (`RoleArn`). The pages read
name no action list for it (the console asks for a role with AmazonSageMakerFullAccess;
docs/platform-facts.md); this role gets what an update of this endpoint onto a config
of its two models needs, on this endpoint and these models only
(`experiment_role_statements`, a pure function the tests judge with an IAM evaluator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnTag, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sm
from constructs import Construct

from infra.nag import acknowledge, nag_text
from infra.role import sagemaker_role
from peagle_deploy.access import endpoint_grants
from peagle_deploy.errors import PeagleError


def experiment_role_statements(
    partition: str, region: str, account: str, endpoint_name: str
) -> list[dict[str, Any]]:
    """The experiment role's grants: update this endpoint onto a config SageMaker makes
    of this endpoint's models, read them, and delete that config afterwards."""
    arn = f"arn:{partition}:sagemaker:{region}:{account}"
    grants = endpoint_grants(endpoint_name)
    models = grants.models.arn(partition, region, account)
    return [
        {
            "Sid": "UpdateThisEndpoint",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"],
            "Resource": [
                grants.endpoint.arn(partition, region, account),
                f"{arn}:endpoint-config/*",
            ],
        },
        {
            "Sid": "ExperimentEndpointConfigs",
            "Effect": "Allow",
            "Action": [
                "sagemaker:CreateEndpointConfig",
                "sagemaker:DescribeEndpointConfig",
                "sagemaker:DeleteEndpointConfig",
            ],
            "Resource": [f"{arn}:endpoint-config/*"],
        },
        {
            "Sid": "ReadThisEndpointsModels",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeModel"],
            "Resource": [models],
        },
    ]


def _variant(v: Mapping[str, Any]) -> sm.CfnInferenceExperiment.ModelVariantConfigProperty:
    infra = v["InfrastructureConfig"]
    rt = infra["RealTimeInferenceConfig"]
    return sm.CfnInferenceExperiment.ModelVariantConfigProperty(
        model_name=v["ModelName"],
        variant_name=v["VariantName"],
        infrastructure_config=sm.CfnInferenceExperiment.ModelInfrastructureConfigProperty(
            infrastructure_type=infra["InfrastructureType"],
            real_time_inference_config=sm.CfnInferenceExperiment.RealTimeInferenceConfigProperty(
                instance_type=rt["InstanceType"], instance_count=rt["InstanceCount"]
            ),
        ),
    )


def _shadow_mode(c: Mapping[str, Any]) -> sm.CfnInferenceExperiment.ShadowModeConfigProperty:
    return sm.CfnInferenceExperiment.ShadowModeConfigProperty(
        source_model_variant_name=c["SourceModelVariantName"],
        shadow_model_variants=[
            sm.CfnInferenceExperiment.ShadowModelVariantConfigProperty(
                shadow_model_variant_name=s["ShadowModelVariantName"],
                sampling_percentage=s["SamplingPercentage"],
            )
            for s in c["ShadowModelVariants"]
        ],
    )


KNOWN = frozenset(
    {
        "Name",
        "Type",
        "RoleArn",
        "EndpointName",
        "ModelVariants",
        "ShadowModeConfig",
        "KmsKey",
        "Description",
        "Tags",
    }
)


STOPPED_STATES = {"completed": "Completed", "cancelled": "Cancelled"}
"""A stage's `experiment_state` -> the DesiredState that stops the experiment in place."""


def stopped_variants(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ModelVariants of a stop in place: the source variant alone. The handler's
    update maps every variant of the experiment it finds in ModelVariants to `Retain` and
    every other to `Remove` (TranslatorForRequest.updateModelVariantActionToStopRequest),
    so the incumbent stays and the candidate's variant and fleet go."""
    source = request["ShadowModeConfig"]["SourceModelVariantName"]
    return [v for v in request["ModelVariants"] if v["VariantName"] == source]


class ShadowExperiment(Construct):
    """The InferenceExperiment and the role SageMaker assumes to run it.

    `state` is the stage's `experiment_state`: `running` keeps it as created;
    `completed` or `cancelled` stops it in place, with `reason` as its StatusReason.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        request: Mapping[str, Any],
        endpoint: sm.CfnEndpoint,
        state: str = "running",
        reason: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        unknown = set(request) - KNOWN
        if unknown:
            raise PeagleError(
                f"CreateInferenceExperiment: fields {sorted(unknown)}; CloudFormation cannot "
                "express it, start the experiment with `peagle experiment start` instead"
            )
        endpoint_name = str(request["EndpointName"])
        self._role_and_policy(endpoint_name)
        stopped = STOPPED_STATES.get(state)
        variants = stopped_variants(request) if stopped else request["ModelVariants"]
        self.resource = sm.CfnInferenceExperiment(
            self,
            "Resource",
            name=request["Name"],
            type=request["Type"],
            role_arn=self.role.role_arn,
            endpoint_name=endpoint_name,
            model_variants=[_variant(v) for v in variants],
            shadow_mode_config=_shadow_mode(request["ShadowModeConfig"]),
            kms_key=request.get("KmsKey"),
            description=request.get("Description"),
            desired_state=stopped or "Running",
            status_reason=reason if stopped else None,
            tags=[CfnTag(key=t["Key"], value=t["Value"]) for t in request.get("Tags", [])],
        )
        self.resource.node.add_dependency(self.policy)
        if stopped:
            endpoint.node.add_dependency(self.resource)  # the stop first, then the endpoint
        else:
            self.resource.node.add_dependency(endpoint)

    def _role_and_policy(self, endpoint_name: str) -> None:
        stack = Stack.of(self)
        self.role = sagemaker_role(
            self, "Role", f"SageMaker runs the shadow experiment on {endpoint_name} (peagle-deploy)"
        )
        statements = experiment_role_statements(
            stack.partition, stack.region, stack.account, endpoint_name
        )
        self.policy = iam.Policy(
            self, "Policy", statements=[iam.PolicyStatement.from_json(s) for s in statements]
        )
        self.policy.attach_to_role(self.role)
        configs = statements[1]["Resource"][0]
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5",
            "SageMaker names the endpoint config an InferenceExperiment makes; the grant is "
            "on endpoint configs of this account and region, the endpoint and its models "
            "are named.",
            "Resource::" + nag_text(stack, configs),
        )
