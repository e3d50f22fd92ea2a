"""A shadow experiment a stage's spec carries: AWS::SageMaker::InferenceExperiment.

The planner's CreateInferenceExperiment (`plan.experiment_requests`, the request
`peagle experiment start` sends) rendered field by field as the L1 resource, beside the
endpoint, which keeps the incumbent's config and its blue/green DeploymentConfig:
SageMaker itself puts the candidate beside the incumbent when the experiment starts, and
reverts the endpoint when it ends (removing `experiment:` from the stage deletes the
resource, which stops the experiment). A field CloudFormation cannot express is refused
at synth with its name.

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


class ShadowExperiment(Construct):
    """The InferenceExperiment and the role SageMaker assumes to run it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        request: Mapping[str, Any],
        endpoint: sm.CfnEndpoint,
    ) -> None:
        super().__init__(scope, construct_id)
        unknown = set(request) - KNOWN
        if unknown:
            raise PeagleError(
                f"CreateInferenceExperiment: fields {sorted(unknown)}; CloudFormation cannot "
                "express it, start the experiment with `peagle experiment start` instead"
            )
        stack = Stack.of(self)
        endpoint_name = str(request["EndpointName"])
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
        self.resource = sm.CfnInferenceExperiment(
            self,
            "Resource",
            name=request["Name"],
            type=request["Type"],
            role_arn=self.role.role_arn,
            endpoint_name=endpoint.attr_endpoint_name,
            model_variants=[_variant(v) for v in request["ModelVariants"]],
            shadow_mode_config=_shadow_mode(request["ShadowModeConfig"]),
            kms_key=request.get("KmsKey"),
            description=request.get("Description"),
            desired_state="Running",
            tags=[CfnTag(key=t["Key"], value=t["Value"]) for t in request.get("Tags", [])],
        )
        self.resource.node.add_dependency(self.policy)
