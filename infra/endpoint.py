"""PeagleEndpoint: model (custom resource), endpoint config and endpoint (native).

The endpoint config and endpoint are rendered from the plan's CreateEndpointConfig /
UpdateEndpoint dictionaries field by field. A field CloudFormation cannot express is
refused at synth time with its name, instead of being dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import CfnTag, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sm
from constructs import Construct

from infra.experiment import ShadowExperiment
from infra.model import PeagleModel
from infra.role import ExecutionRole
from peagle_deploy.access import s3_reads
from peagle_deploy.catalog import get_instance
from peagle_deploy.errors import InputError, PeagleError
from peagle_deploy.experiment.plan import ExperimentPlan
from peagle_deploy.plan import Plan
from peagle_deploy.spec.models import CFN_ROUTING_STRATEGIES

MAX_ROLLBACK_ALARMS = 10

# API field -> CfnEndpointConfig.ProductionVariantProperty keyword (scalars).
_VARIANT_SCALARS = {
    "VariantName": "variant_name",
    "ModelName": "model_name",
    "InstanceType": "instance_type",
    "InitialInstanceCount": "initial_instance_count",
    "InitialVariantWeight": "initial_variant_weight",
    "ModelDataDownloadTimeoutInSeconds": "model_data_download_timeout_in_seconds",
    "ContainerStartupHealthCheckTimeoutInSeconds": (
        "container_startup_health_check_timeout_in_seconds"
    ),
    "VolumeSizeInGB": "volume_size_in_gb",
    "InferenceAmiVersion": "inference_ami_version",
    "EnableSSMAccess": "enable_ssm_access",
    "VariantInstanceProvisionTimeoutInSeconds": "variant_instance_provision_timeout_in_seconds",
}


class NotExpressibleError(PeagleError):
    """The plan asks for something CloudFormation's SageMaker resources cannot say."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(
            f"{where}: {detail}; CloudFormation cannot express it, deploy this spec with "
            "`peagle deploy` (the SDK) instead of `cdk deploy`"
        )


def check_cdk_expressible(plan: Plan) -> None:
    """Refuse, before building any resource, a plan the CDK path cannot deploy.

    The foundation lists what CloudFormation cannot express (`plan.cdk_incompatibilities`,
    e.g. routing_strategy KV_AWARE); the field mapping below is the backstop for
    anything it does not know about.
    """
    if plan.cdk_incompatibilities:
        first = plan.cdk_incompatibilities[0]
        raise InputError(
            first.field,
            f"{first.message}; CloudFormation cannot express it, deploy this spec with "
            "`peagle deploy` instead of `cdk deploy`",
        )


def volume_kms_allowed(instance_type: str) -> bool:
    """Whether the instance's ML storage volume is EBS and so takes a KMS key.

    Families with local NVMe storage only (g6e, g7e, p5, ...) reject KmsKeyId; an
    instance the catalog does not know gets no key (safe: SageMaker then encrypts with
    an AWS-managed key, while a wrong key fails CreateEndpointConfig).
    """
    instance = get_instance(instance_type)
    return bool(instance is not None and instance.ebs_volume.value)


def role_request(plan: Plan, experiment: ExperimentPlan | None) -> dict[str, Any]:
    """What the execution role must serve: the incumbent's CreateModel, plus, with an
    experiment, the candidate's data sources the incumbent does not already read (a
    candidate with another drafter) as a second container of the same request."""
    request = dict(plan.create_model)
    if experiment is None:
        return request

    def locations(container: Mapping[str, Any]) -> set[tuple[str, str]]:
        return {(r.bucket, r.key) for r in s3_reads({"PrimaryContainer": container})}

    known = locations(plan.create_model["PrimaryContainer"])
    candidate = dict(experiment.create_candidate_model["PrimaryContainer"])
    extra = [
        source
        for source in candidate.get("AdditionalModelDataSources") or []
        if not locations({"ModelDataSource": source}) <= known
    ]
    if not extra:
        return request
    request["Containers"] = [{"Image": candidate["Image"], "AdditionalModelDataSources": extra}]
    return request


def uses_stack_volume_key(plan: Plan) -> bool:
    """Whether the endpoint config gets the stack's key as its storage-volume KmsKeyId:
    when the spec names no key and every variant's family attaches an EBS volume."""
    request = plan.create_endpoint_config
    return request.get("KmsKeyId") is None and all(
        volume_kms_allowed(v["InstanceType"]) for v in request["ProductionVariants"]
    )  # a candidate variant has the incumbent's instance type


def _tags(tags: Sequence[Mapping[str, str]]) -> list[CfnTag]:
    return [CfnTag(key=t["Key"], value=t["Value"]) for t in tags]


def production_variant_property(
    variant: Mapping[str, Any], where: str
) -> sm.CfnEndpointConfig.ProductionVariantProperty:
    """One ProductionVariants entry of the request as the L1 property, field by field."""
    kwargs: dict[str, Any] = {}
    for key, value in variant.items():
        if key in _VARIANT_SCALARS:
            kwargs[_VARIANT_SCALARS[key]] = value
        elif key == "RoutingConfig":
            unknown = set(value) - {"RoutingStrategy"}
            if unknown:
                raise NotExpressibleError(f"{where}.RoutingConfig", f"fields {sorted(unknown)}")
            strategy = value["RoutingStrategy"]
            if strategy not in CFN_ROUTING_STRATEGIES:
                raise InputError(
                    "routing_strategy",
                    f"{strategy} is not supported by AWS::SageMaker::EndpointConfig; "
                    "deploy it with `peagle deploy`",
                    CFN_ROUTING_STRATEGIES,
                )
            kwargs["routing_config"] = sm.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy=strategy
            )
        elif key == "ManagedInstanceScaling":
            kwargs["managed_instance_scaling"] = (
                sm.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status=value.get("Status"),
                    min_instance_count=value.get("MinInstanceCount"),
                    max_instance_count=value.get("MaxInstanceCount"),
                )
            )
        else:
            raise NotExpressibleError(f"{where}.{key}", "field not mapped to CloudFormation")
    return sm.CfnEndpointConfig.ProductionVariantProperty(**kwargs)


def metrics_config_property(
    metrics: Mapping[str, Any] | None,
) -> sm.CfnEndpointConfig.MetricsConfigProperty | None:
    """The plan's MetricsConfig (detailed observability) as the L1 property."""
    if metrics is None:
        return None
    unknown = set(metrics) - {"EnableDetailedObservability"}
    if unknown:
        raise NotExpressibleError("MetricsConfig", f"fields {sorted(unknown)}")
    return sm.CfnEndpointConfig.MetricsConfigProperty(
        enable_detailed_observability=metrics["EnableDetailedObservability"]
    )


def deployment_config_property(
    deployment_config: Mapping[str, Any], alarm_names: Sequence[str]
) -> sm.CfnEndpoint.DeploymentConfigProperty:
    """The plan's blue/green DeploymentConfig, rolled back by `alarm_names`."""
    unknown = set(deployment_config) - {"BlueGreenUpdatePolicy", "AutoRollbackConfiguration"}
    if unknown:
        raise NotExpressibleError("DeploymentConfig", f"fields {sorted(unknown)}")
    if not 1 <= len(alarm_names) <= MAX_ROLLBACK_ALARMS:
        raise InputError(
            "rollout.alarms",
            f"{len(alarm_names)} rollback alarms including the stack's own",
            f"1..{MAX_ROLLBACK_ALARMS} in total",
        )
    bg = deployment_config["BlueGreenUpdatePolicy"]
    routing = bg["TrafficRoutingConfiguration"]

    def size(key: str) -> sm.CfnEndpoint.CapacitySizeProperty | None:
        value = routing.get(key)
        if value is None:
            return None
        return sm.CfnEndpoint.CapacitySizeProperty(type=value["Type"], value=value["Value"])

    return sm.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sm.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=sm.CfnEndpoint.TrafficRoutingConfigProperty(
                type=routing["Type"],
                wait_interval_in_seconds=routing.get("WaitIntervalInSeconds"),
                canary_size=size("CanarySize"),
                linear_step_size=size("LinearStepSize"),
            ),
            termination_wait_in_seconds=bg.get("TerminationWaitInSeconds"),
            maximum_execution_timeout_in_seconds=bg.get("MaximumExecutionTimeoutInSeconds"),
        ),
        auto_rollback_configuration=sm.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sm.CfnEndpoint.AlarmProperty(alarm_name=name) for name in alarm_names]
        ),
    )


_UPDATE_FIELDS = frozenset(
    {
        "EndpointName",
        "EndpointConfigName",
        "DeploymentConfig",
        "RetainAllVariantProperties",
        "ExcludeRetainedVariantProperties",
    }
)
"""What the plan's UpdateEndpoint may say: the endpoint's own properties carry each."""


def retention_properties(update_endpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's retention of variant properties as CfnEndpoint keywords (none when the
    plan retains nothing): a stage with `scaling:` keeps, through every update the stack
    makes, the instances its scaling gave the endpoint, as the SDK's update does
    (`plan.render.update_endpoint`; docs/platform-facts.md, "Deploying onto an
    autoscaled endpoint")."""
    unknown = set(update_endpoint) - _UPDATE_FIELDS
    if unknown:
        raise NotExpressibleError("UpdateEndpoint", f"fields {sorted(unknown)}")
    if not update_endpoint.get("RetainAllVariantProperties"):
        return {}
    excluded = update_endpoint.get("ExcludeRetainedVariantProperties") or []
    return {
        "retain_all_variant_properties": True,
        "exclude_retained_variant_properties": [
            sm.CfnEndpoint.VariantPropertyProperty(variant_property_type=e["VariantPropertyType"])
            for e in excluded
        ]
        or None,
    }


class PeagleEndpoint(Construct):
    """A P-EAGLE SageMaker endpoint exactly as `deploy_peagle()` would create it.

    Owns its execution role (least privilege), the model custom resource, the endpoint
    config (KmsKeyId on the storage volume only where the instance attaches EBS) and
    the endpoint with a blue/green DeploymentConfig that rolls back on
    `rollback_alarm_names` (the stack's own alarms plus the spec's `rollout.alarms`). On
    a stage that scales, the endpoint retains its variant's instance count through every
    update (`retention_properties`): a changed config does not drop an endpoint its
    scaling moved to 6 back to `initial_instance_count`.

    With an `experiment` (the stage's spec carries one), the candidate's model joins
    the incumbent's on the same provider. A shadow experiment is an InferenceExperiment
    beside the endpoint (`infra.experiment`), which keeps the incumbent's config and
    rollout; `experiment_state` (the stage's) keeps it running or stops it in place. A
    split experiment's config is the experiment's (both variants, `experiment.plan`), and
    the endpoint has no DeploymentConfig: SageMaker's blue/green guardrails need the old
    and new configs' variant names to match, which adding the candidate changes
    (docs/platform-facts.md); without one the update is blue/green all at once, with no
    availability loss.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: Plan,
        key: kms.IKey,
        rollback_alarm_names: Sequence[str],
        log_group: logs.ILogGroup | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        experiment: ExperimentPlan | None = None,
        experiment_state: str = "running",
    ) -> None:
        super().__init__(scope, construct_id)
        check_cdk_expressible(plan)
        self.experiment_state = experiment_state
        self.experiment = experiment
        self.plan = plan
        self.endpoint_name = plan.endpoint_name
        variants = plan.create_endpoint_config["ProductionVariants"]
        self.variant_name: str = variants[0]["VariantName"]

        self._role_and_model(plan, key, removal_policy)
        self.candidate_model: Any = None
        config_request = plan.create_endpoint_config
        split = experiment is not None and experiment.requests.create_endpoint_config is not None
        if experiment is not None:
            self.candidate_model = self.model.add_model(experiment.create_candidate_model)
            self.candidate_model.node.add_dependency(self.execution_role.policy)
            config_request = experiment.requests.create_endpoint_config or config_request

        self.endpoint_config = self._endpoint_config(plan, key, config_request)
        self.endpoint_config.node.add_dependency(self.model.resource)
        deployment_config = (
            None
            if split
            else deployment_config_property(
                plan.update_endpoint["DeploymentConfig"],
                [*rollback_alarm_names, *plan.spec.rollout.alarms],
            )
        )
        self.endpoint = sm.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=plan.create_endpoint["EndpointName"],
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            deployment_config=deployment_config,
            tags=_tags(plan.create_endpoint["Tags"]),
            **retention_properties(plan.update_endpoint),
        )
        self.endpoint.node.add_dependency(self.model.resource)
        if log_group is not None:
            self.endpoint.node.add_dependency(log_group)
        self.shadow: ShadowExperiment | None = None
        if experiment is not None:
            self._wire_experiment(experiment, split=split)

    def _role_and_model(self, plan: Plan, key: kms.IKey, removal_policy: RemovalPolicy) -> None:
        """The execution role, and the model the provider creates with it."""
        # Decrypt on the stack key only where the storage volume uses it (the execution
        # role's and the experiment role's grant alike).
        self.volume_key_arn = key.key_arn if uses_stack_volume_key(plan) else None
        experiment = self.experiment
        self.execution_role = ExecutionRole(
            self,
            "ExecutionRole",
            create_model=role_request(plan, experiment),
            endpoint_name=plan.endpoint_name,
            # Decrypt on the stack key only where the storage volume uses it; on
            # local-NVMe families it encrypts only the log groups, which CloudWatch Logs
            # uses through the key policy (writers need no KMS permission).
            key=key if uses_stack_volume_key(plan) else None,
            model_data_kms_key_arns=plan.spec.model_data_kms_key_arns,
            expected_bucket_owner=plan.spec.expected_bucket_owner,
        )
        self.model = PeagleModel(
            self,
            "Model",
            create_model=plan.create_model,
            execution_role=self.execution_role.role,
            endpoint_name=plan.endpoint_name,
            key=key,
            removal_policy=removal_policy,
            secret_refs=plan.secret_refs,
        )
        # The role's policy must exist before CreateModel: SageMaker checks that the
        # role can read the model data when the model is created.
        self.model.resource.node.add_dependency(self.execution_role.policy)

    def _wire_experiment(self, experiment: ExperimentPlan, *, split: bool) -> None:
        """A split's config names the candidate's model; a shadow experiment is its own
        resource beside the endpoint, created once the endpoint and the model exist."""
        if split:
            self.endpoint_config.node.add_dependency(self.candidate_model)
            self.endpoint.node.add_dependency(self.candidate_model)
            return
        request = experiment.requests.create_inference_experiment
        assert request is not None
        self.shadow = ShadowExperiment(
            self,
            "ShadowExperiment",
            request=request,
            endpoint=self.endpoint,
            model_access=role_request(self.plan, experiment),
            key_arn=self.volume_key_arn,
            data_keys=self.plan.spec.model_data_kms_key_arns,
            bucket_owner=self.plan.spec.expected_bucket_owner,
            state=self.experiment_state,
            reason=f"experiment_state: {self.experiment_state} (the stage's CloudFormation stack)",
        )
        self.shadow.resource.node.add_dependency(self.candidate_model)

    def _endpoint_config(
        self, plan: Plan, key: kms.IKey, request: Mapping[str, Any]
    ) -> sm.CfnEndpointConfig:
        known = {
            "EndpointConfigName",
            "ProductionVariants",
            "ShadowProductionVariants",
            "KmsKeyId",
            "MetricsConfig",
            "Tags",
        }
        unknown = set(request) - known
        if unknown:
            raise NotExpressibleError("CreateEndpointConfig", f"fields {sorted(unknown)}")
        variants = request["ProductionVariants"]
        shadows = request.get("ShadowProductionVariants") or []
        kms_key_id = request.get("KmsKeyId")
        if uses_stack_volume_key(plan):
            kms_key_id = key.key_arn
        return sm.CfnEndpointConfig(
            self,
            "Config",
            endpoint_config_name=request["EndpointConfigName"],
            production_variants=[
                production_variant_property(v, f"ProductionVariants[{i}]")
                for i, v in enumerate(variants)
            ],
            shadow_production_variants=[
                production_variant_property(v, f"ShadowProductionVariants[{i}]")
                for i, v in enumerate(shadows)
            ]
            or None,
            kms_key_id=kms_key_id,
            metrics_config=metrics_config_property(request.get("MetricsConfig")),
            tags=_tags(request["Tags"]),
        )
