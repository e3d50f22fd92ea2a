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

SageMaker assumes a role of the experiment's own to do that (`RoleArn`): it gets what
an update of this endpoint onto a config of its two models needs, and the reads of
those models' data and images, on this stage's names only (`experiment_role_statements`,
a pure function the tests judge with an IAM evaluator).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import CfnTag, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sm
from constructs import Construct

from infra.execution_policy import ExecutionPolicy, Where, image_part, kms_part, s3_part
from infra.nag import acknowledge, nag_text
from infra.role import sagemaker_role
from peagle_deploy.access import endpoint_grants
from peagle_deploy.errors import PeagleError
from peagle_deploy.naming import EXPERIMENT_STAGE_TAG, STAGE_TAG

EXPERIMENT_ROLE_TAG = ("peagle:role", "experiment")
"""The experiment role says what it is, and carries no `peagle:stage` tag: a stage's CI
role passes a role tagged with its stage as a model's execution role
(infra/deploy_policy.py), which this one must never be. It carries
`peagle:experiment-stage=<stage>` instead, which only its own stage's CI role may pass
(as an InferenceExperiment's RoleArn: docs/ci.md, "Experiments from CI")."""


def experiment_role_statements(
    where: Where,
    endpoint_name: str,
    stage: str,
    *,
    model_access: Mapping[str, Any],
    key_arn: str | None = None,
    data_keys: Sequence[str] = (),
    bucket_owner: str,
) -> list[dict[str, Any]]:
    """The experiment role's grants, the stage's own names only.

    SageMaker assumes it "to access model artifacts and container images, and manage
    ... endpoints" (botocore's text for CreateInferenceExperiment.RoleArn): it updates
    this endpoint onto a config of this endpoint's models that it makes, and back,
    reads the two models, their data and images. The name SageMaker gives its config is
    in no source read (docs/platform-facts.md), so the config grants name no config:
    a config may be created only of this endpoint's models (`sagemaker:ModelArn`, each
    variant's), and a config tagged for another stage may be neither deleted nor put on
    the endpoint (`aws:ResourceTag/peagle:stage`; SageMaker's own config carries no tag
    that any source names, so the tag is asked only where it exists). UpdateEndpoint
    needs the endpoint and the config (the Service Authorization Reference).
    `model_access`: the CreateModel request whose data and images the role may read (the
    incumbent's and the candidate's, `infra.endpoint.role_request`).
    """
    grants = endpoint_grants(endpoint_name)
    configs = where.arn("sagemaker", "endpoint-config/*")
    own_stage = {"StringEqualsIfExists": {f"aws:ResourceTag/{STAGE_TAG}": stage}}
    statements: list[dict[str, Any]] = [
        {
            "Sid": "UpdateThisEndpoint",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"],
            "Resource": [grants.endpoint.arn(where.partition, where.region, where.account)],
        },
        {
            "Sid": "OntoConfigsOfThisStage",
            "Effect": "Allow",
            "Action": ["sagemaker:DeleteEndpointConfig", "sagemaker:UpdateEndpoint"],
            "Resource": [configs],
            "Condition": own_stage,
        },
        {
            "Sid": "ConfigsOfThisEndpointsModels",
            "Effect": "Allow",
            "Action": ["sagemaker:CreateEndpointConfig"],
            "Resource": [configs],
            "Condition": {
                "ArnLikeIfExists": {
                    "sagemaker:ModelArn": grants.models.arn(
                        where.partition, where.region, where.account
                    )
                }
            },
        },
        {
            "Sid": "ReadConfigs",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeEndpointConfig"],
            "Resource": [configs],
        },
        {
            "Sid": "ReadThisEndpointsModels",
            "Effect": "Allow",
            "Action": ["sagemaker:DescribeModel"],
            "Resource": [grants.models.arn(where.partition, where.region, where.account)],
        },
    ]
    access = ExecutionPolicy()
    s3_part(access, model_access, where, bucket_owner)
    image_part(access, model_access, where)
    kms_part(access, key_arn, data_keys, where)
    return statements + access.statements


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


def _wildcards(model_access: Mapping[str, Any], where: Where) -> dict[str, str]:
    """The S3 prefixes and the ECR token grant, acknowledged as the execution role's."""
    access = ExecutionPolicy()
    s3_part(access, model_access, where, where.account)
    image_part(access, model_access, where)
    return access.acknowledged()


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
        model_access: Mapping[str, Any],
        key_arn: str | None = None,
        data_keys: Sequence[str] = (),
        bucket_owner: str | None = None,
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
        self._role_and_policy(request, model_access, key_arn, data_keys, bucket_owner)
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

    def _role_and_policy(
        self,
        request: Mapping[str, Any],
        model_access: Mapping[str, Any],
        key_arn: str | None,
        data_keys: Sequence[str],
        bucket_owner: str | None,
    ) -> None:
        stack = Stack.of(self)
        endpoint_name = str(request["EndpointName"])
        stage = next(
            (t["Value"] for t in request.get("Tags", []) if t["Key"] == STAGE_TAG), "default"
        )
        self.role = sagemaker_role(
            self, "Role", f"SageMaker runs the shadow experiment on {endpoint_name} (peagle-deploy)"
        )
        # Not an execution role of the stage (those are tagged with it); its own stage's
        # experiment role (EXPERIMENT_ROLE_TAG).
        Tags.of(self.role).remove(STAGE_TAG, priority=1000)
        Tags.of(self.role).add(*EXPERIMENT_ROLE_TAG, priority=1000)
        Tags.of(self.role).add(EXPERIMENT_STAGE_TAG, stage, priority=1000)
        where = Where(stack.partition, stack.region, stack.account)
        statements = experiment_role_statements(
            where,
            endpoint_name,
            stage,
            model_access=model_access,
            key_arn=key_arn,
            data_keys=data_keys,
            bucket_owner=bucket_owner or stack.account,
        )
        self.policy = iam.Policy(
            self, "Policy", statements=[iam.PolicyStatement.from_json(s) for s in statements]
        )
        self.policy.attach_to_role(self.role)
        configs = statements[1]["Resource"][0]
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5",
            "SageMaker names the endpoint config an InferenceExperiment makes (no source "
            "says how): configs may be created only of this endpoint's models "
            "(sagemaker:ModelArn), deleted or served only when not tagged for another "
            "stage; the endpoint and its models are named.",
            "Resource::" + nag_text(stack, configs),
        )
        for resource, reason in _wildcards(model_access, where).items():
            acknowledge(
                self.policy, "AwsSolutions-IAM5", reason, "Resource::" + nag_text(stack, resource)
            )
