"""PeagleStack: one stage's endpoint with its key, logs, alarms, scaling and dashboard."""

from __future__ import annotations

import os

from aws_cdk import Annotations, CfnOutput, Environment, RemovalPolicy, Stack, Tags
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.encryption import EndpointKey
from infra.endpoint import PeagleEndpoint
from infra.monitoring import AcceptanceMetrics, AlarmThresholds, EndpointAlarms, EndpointDashboard
from infra.scaling import EndpointAutoscaling
from infra.stages import StageConfig, check_stage_experiment
from infra.training import TrainingRole
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.plan import experiment_plan
from peagle_deploy.naming import endpoint_log_group_name, provider_log_group_name
from peagle_deploy.plan import Plan

# RetentionDays members in declaration order, and the days each one stands for.
_DAYS: tuple[int, ...] = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731)
_DAYS += (1096, 1827, 2192, 2557, 2922, 3288, 3653)
_RETENTION = dict(
    zip(_DAYS, [r for r in logs.RetentionDays if r is not logs.RetentionDays.INFINITE], strict=True)
)


def retention_days(days: int, where: str) -> logs.RetentionDays:
    """The CloudWatch Logs retention setting for a number of days."""
    try:
        return _RETENTION[days]
    except KeyError:
        raise InputError(
            where, f"{days} days is not a CloudWatch Logs retention", [str(d) for d in _DAYS]
        ) from None


class PeagleStack(Stack):
    """Everything one stage needs to serve its spec, built from that spec's plan.

    Composition: EndpointKey (KMS, rotating) -> endpoint log group (encrypted) ->
    EndpointAlarms -> PeagleEndpoint (role, model custom resource, config, endpoint
    rolled back by those alarms) -> EndpointAutoscaling (when the spec scales) ->
    AcceptanceMetrics (metric filters on the log group) -> EndpointDashboard.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: StageConfig,
        plan: Plan | None = None,
    ) -> None:
        plan = plan if plan is not None else stage.plan()
        super().__init__(
            scope,
            construct_id,
            env=Environment(
                account=stage.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
                region=plan.region,
            ),
            description=(
                f"P-EAGLE SageMaker endpoint {plan.endpoint_name} (stage {stage.name}, "
                f"spec {plan.content_hash}); peagle-deploy"
            ),
            termination_protection=stage.termination_protection,
        )
        self.plan = plan
        removal = RemovalPolicy.RETAIN if stage.retain else RemovalPolicy.DESTROY
        self._tag_and_annotate(plan)
        self._key_and_logs(stage, plan, removal)
        variant_name = plan.create_endpoint_config["ProductionVariants"][0]["VariantName"]
        self.alarms = EndpointAlarms(
            self,
            "Alarms",
            endpoint_name=plan.endpoint_name,
            variant_name=variant_name,
            thresholds=AlarmThresholds(**stage.alarms),
        )
        # The stage's spec may carry an experiment: the candidate's model and the
        # InferenceExperiment (shadow) or the two-variant config (split), exactly as
        # `peagle experiment start` sends them.
        self.experiment = experiment_plan(stage.load_spec()) if plan.spec.experiment else None
        check_stage_experiment(stage, plan)  # also in stage.plan(): a plan given here too
        self.endpoint = PeagleEndpoint(
            self,
            "Endpoint",
            plan=plan,
            key=self.key.key,
            rollback_alarm_names=[a.alarm_name for a in self.alarms.alarms],
            log_group=self.log_group,
            removal_policy=removal,
            experiment=self.experiment,
            experiment_state=stage.experiment_state,
        )
        self._autoscaling(
            plan, running=self.experiment is not None and stage.experiment_state == "running"
        )
        self.acceptance = AcceptanceMetrics(
            # the construct id keeps its first name: it is part of deployed stacks' logical ids
            self,
            "SpecDecodeMetrics",
            log_group=self.log_group,
            endpoint_name=plan.endpoint_name,
        )
        self.dashboard = EndpointDashboard(
            self,
            "Dashboard",
            dashboard_name=plan.endpoint_name,
            alarms=self.alarms,
            acceptance=self.acceptance,
        )
        self._training(stage, plan)
        self._outputs(plan)

    def _training(self, stage: StageConfig, plan: Plan) -> None:
        """The role SageMaker trains the stage's drafters with (the stage's `training:`
        block), using the stack's key for their S3 objects and volumes."""
        self.training: TrainingRole | None = None
        if stage.training is None:
            return
        self.training = TrainingRole(
            self,
            "Training",
            training=stage.training,
            key=self.key.key,
            spec_vpc=plan.create_model.get("VpcConfig"),
        )
        CfnOutput(
            self,
            "TrainingRoleArn",
            value=self.training.role_arn,
            description=f"RoleArn of the stage's training jobs ({stage.training.job_prefix}*)",
        )
        CfnOutput(self, "TrainingKeyArn", value=self.key.key_arn, description="Training KMS key")

    def _autoscaling(self, plan: Plan, *, running: bool) -> None:
        """The scalable target and its policy, suspended while an experiment runs; a
        shadow experiment starts only once the suspension is in place (it is lifted after
        a stop in place, which the endpoint and so the target wait for)."""
        self.autoscaling: EndpointAutoscaling | None = None
        if plan.autoscaling is None:
            return
        self.autoscaling = EndpointAutoscaling(
            self,
            "Autoscaling",
            autoscaling=plan.autoscaling,
            endpoint=self.endpoint.endpoint,
            suspended=running,
        )
        if running and self.endpoint.shadow is not None:
            self.endpoint.shadow.resource.node.add_dependency(self.autoscaling.target)

    def _tag_and_annotate(self, plan: Plan) -> None:
        """The plan's tags (peagle:managed, peagle:stage, peagle:spec-hash, the spec's
        own) on every taggable resource of the stack, as the SDK tags what it creates;
        the plan's warnings as synth warnings."""
        for tag in plan.tags:
            Tags.of(self).add(tag["Key"], tag["Value"])
        for warning in plan.warnings:
            if warning.field == "execution_role_arn":
                continue  # the stack creates its own role
            Annotations.of(self).add_warning_v2("peagle:plan", warning)
        if plan.spec.execution_role_arn:
            Annotations.of(self).add_warning_v2(
                "peagle:role",
                "execution_role_arn in the spec is ignored: the stack creates its own "
                "least-privilege execution role",
            )

    def _key_and_logs(self, stage: StageConfig, plan: Plan, removal: RemovalPolicy) -> None:
        """The stack's key and the endpoint's log group it encrypts."""
        self.key = EndpointKey(
            self,
            "Key",
            description=f"Storage volume and logs of SageMaker endpoint {plan.endpoint_name}",
            removal_policy=removal,
            # CloudWatch Logs may use the key for this stack's two log groups only.
            log_group_names=[
                endpoint_log_group_name(plan.endpoint_name),
                provider_log_group_name(plan.endpoint_name),
            ],
        )
        self.log_group = logs.LogGroup(
            self,
            "EndpointLogs",
            log_group_name=endpoint_log_group_name(plan.endpoint_name),
            encryption_key=self.key.key,
            retention=retention_days(
                stage.log_retention_days, f"peagle:stages.{stage.name}.log_retention_days"
            ),
            removal_policy=removal,
        )

    def _outputs(self, plan: Plan) -> None:
        CfnOutput(self, "EndpointName", value=plan.endpoint_name, description="SageMaker endpoint")
        CfnOutput(
            self,
            "ExecutionRoleArn",
            value=self.endpoint.execution_role.role_arn,
            description="Role SageMaker assumes to load the model",
        )
        CfnOutput(self, "ModelName", value=plan.model_name, description="Current SageMaker model")
        CfnOutput(
            self,
            "EndpointConfigName",
            value=plan.endpoint_config_name,
            description="Current config",
        )
        CfnOutput(self, "LogGroupName", value=self.log_group.log_group_name)
        CfnOutput(self, "DashboardName", value=plan.endpoint_name)
        CfnOutput(self, "SpecHash", value=plan.content_hash, description="peagle:spec-hash tag")
        if self.experiment is not None:
            CfnOutput(
                self,
                "ExperimentCandidateModel",
                value=self.experiment.candidate_model_name,
                description=f"The experiment's candidate ({self.experiment.settings.mode})",
            )
        if self.experiment is not None and self.experiment.experiment_name is not None:
            CfnOutput(
                self,
                "InferenceExperimentName",
                value=self.experiment.experiment_name,
                description="The shadow experiment (peagle experiment status reads it)",
            )
