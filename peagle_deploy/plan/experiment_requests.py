"""Two Deployments on one endpoint -> the requests of an experiment, rendered by the planner.

The incumbent is what the endpoint serves (`AllTraffic`, its own model and config,
`render`); the candidate is the incumbent's Deployment with other speculative settings.
The candidate's CreateModel comes from the same render step and naming rule as every
model (`render.render_variants`), with `PEAGLE_VARIANT_NAME=Candidate` in its
environment so its metric lines say which variant they come from. Then, by mode:

- **shadow**: SageMaker's InferenceExperiment (`CreateInferenceExperiment`, type
  `ShadowMode`): both variants as `ModelVariants` (model, instance type and count), the
  incumbent as `SourceModelVariantName`, the candidate as the shadow variant with its
  `SamplingPercentage`. SageMaker creates the endpoint config with both variants itself
  and, when the experiment stops, the endpoint "reverts to the state it was in prior to
  starting the test" (docs/platform-facts.md). `StopInferenceExperiment` ends it with
  `Retain` for the incumbent and `Remove` for the candidate; a winner is then promoted by
  the stage's ordinary blue/green deploy (see `stop_inference_experiment`).
- **split**: one CreateEndpointConfig with both as weighted production variants (the
  same render step as a deployment's config, two variants), and plain UpdateEndpoint
  requests onto it and back (no DeploymentConfig: deployment guardrails need the old
  and new configs' variant names to match, which adding the candidate changes).

Both modes keep the capacity the endpoint has (docs/platform-facts.md, "Experiments on
autoscaled endpoints"): the incumbent runs on as many instances as it had when the
experiment started (`ExperimentLayout.incumbent_instances`, read from DescribeEndpoint;
the candidate is sized from it), every UpdateEndpoint retains the variants' instance
counts (`RetainAllVariantProperties`, the weights excepted), and the incumbent's
Application Auto Scaling is suspended for the test and given back its own state after
(`scaling_suspension`), so both fleets carry the same load per instance throughout.

Pure: no AWS call. The InferenceExperiment is named by content like models and configs
(`render.named_by_content(..., "x", ...)`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from peagle_deploy.deployment import Deployment
from peagle_deploy.plan.render import (
    RETAIN_COUNTS,
    VARIANT_NAME,
    Variant,
    named_by_content,
    render_variants,
)

CANDIDATE_VARIANT = "Candidate"
"""The candidate's variant name (the incumbent keeps `AllTraffic`)."""

PLACEHOLDER_EXPERIMENT_ROLE_ARN = (
    "arn:aws:iam::000000000000:role/peagle-placeholder-set-experiment-role-arn"
)
"""The InferenceExperiment's RoleArn shown by `peagle plan`; `experiment start` refuses it."""

SCHEDULE_GRACE = timedelta(hours=1)
"""SageMaker ends a shadow experiment this long after `max_duration_minutes` if nobody
concluded it (peagle concludes at `max_duration_minutes`; SageMaker's end is the backstop
that leaves no candidate fleet running)."""
MAX_SCHEDULE = timedelta(days=30)
"""The longest an InferenceExperiment may run (SageMaker's shadow-test limit)."""

ExperimentMode = Literal["shadow", "split"]

SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
"""Application Auto Scaling's dimension of a SageMaker variant's instance count."""
SUSPEND_ALL = {
    "DynamicScalingInSuspended": True,
    "DynamicScalingOutSuspended": True,
    "ScheduledScalingSuspended": True,
}
"""Every scaling activity of a target held (botocore's SuspendedState)."""


@dataclass(frozen=True)
class ExperimentLayout:
    """Where the candidate runs: the mode, its share, its fleet, its name."""

    mode: ExperimentMode
    share_percent: int
    """Shadow: SamplingPercentage (1-100); split: the candidate's weight in percent (1-99)."""
    candidate_instances: int
    candidate_variant: str = CANDIDATE_VARIANT
    experiment_role_arn: str = PLACEHOLDER_EXPERIMENT_ROLE_ARN
    """Shadow: the role SageMaker assumes to run the InferenceExperiment."""
    detailed_observability: bool = False
    """Split: state MetricsConfig.EnableDetailedObservability=true on the config (the
    experiment reads SageMaker's detailed metrics instead of the project's lines)."""
    incumbent_instances: int | None = None
    """The incumbent's instances now (an autoscaled endpoint's may differ from the spec's
    initial_instance_count); None: the spec's."""


@dataclass(frozen=True)
class ExperimentRequests:
    """Everything an experiment sends, by mode (the other mode's fields are None)."""

    candidate_model_name: str
    create_candidate_model: dict[str, Any]
    # shadow
    experiment_name: str | None = None
    create_inference_experiment: dict[str, Any] | None = None
    # split
    config_name: str | None = None
    create_endpoint_config: dict[str, Any] | None = None
    start_update: dict[str, Any] | None = None
    restore_update: dict[str, Any] | None = None


def render_experiment(
    incumbent: Deployment,
    candidate: Deployment,
    layout: ExperimentLayout,
    *,
    tags: list[dict[str, str]],
    incumbent_config_name: str,
) -> ExperimentRequests:
    """The candidate's model and, by mode, the InferenceExperiment or the split config."""
    inc = Variant(incumbent, instances=layout.incumbent_instances)
    cand = Variant(candidate, name=layout.candidate_variant, instances=layout.candidate_instances)
    if layout.mode == "shadow":
        return _shadow(inc, cand, layout, tags)
    share = layout.share_percent / 100
    extra = (
        {"MetricsConfig": {"EnableDetailedObservability": True}}
        if layout.detailed_observability
        else {}
    )
    both = render_variants(
        [replace(inc, weight=round(1 - share, 6)), replace(cand, weight=share)], tags, **extra
    )
    endpoint = incumbent.endpoint_name
    return ExperimentRequests(
        candidate_model_name=both.model_names[1],
        create_candidate_model=both.create_models[1],
        config_name=both.config_name,
        create_endpoint_config=both.create_endpoint_config,
        start_update={
            "EndpointName": endpoint,
            "EndpointConfigName": both.config_name,
            **RETAIN_COUNTS,
        },
        restore_update=restore_update(endpoint, incumbent_config_name),
    )


def restore_update(endpoint: str, incumbent_config_name: str) -> dict[str, Any]:
    """UpdateEndpoint back onto the incumbent's own config, keeping the incumbent's
    instances (its config states the spec's initial count, not what it runs now)."""
    return {"EndpointName": endpoint, "EndpointConfigName": incumbent_config_name, **RETAIN_COUNTS}


def scalable_resource(endpoint: str, variant: str = VARIANT_NAME) -> str:
    """Application Auto Scaling's ResourceId of a SageMaker variant."""
    return f"endpoint/{endpoint}/variant/{variant}"


def target_key(endpoint: str, **extra: Any) -> dict[str, Any]:
    """The parameters naming the scalable target of `endpoint`'s variant, with `extra`."""
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceId": scalable_resource(endpoint),
        "ScalableDimension": SCALABLE_DIMENSION,
        **extra,
    }


def describe_scaling(endpoint: str) -> dict[str, Any]:
    """DescribeScalableTargets of the incumbent's variant."""
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceIds": [scalable_resource(endpoint)],
        "ScalableDimension": SCALABLE_DIMENSION,
    }


def scaling_suspension(endpoint: str, state: dict[str, bool]) -> dict[str, Any]:
    """RegisterScalableTarget on the registered target changing only its SuspendedState
    (parameters left out of an update are not changed: botocore's text)."""
    return {
        "ServiceNamespace": "sagemaker",
        "ResourceId": scalable_resource(endpoint),
        "ScalableDimension": SCALABLE_DIMENSION,
        "SuspendedState": dict(state),
    }


def keep_instances(endpoint: str, count: int) -> dict[str, Any]:
    """UpdateEndpointWeightsAndCapacities: the incumbent's variant back on `count`
    instances (what it ran before the experiment)."""
    return {
        "EndpointName": endpoint,
        "DesiredWeightsAndCapacities": [
            {"VariantName": VARIANT_NAME, "DesiredInstanceCount": count}
        ],
    }


def _model_variant(name: str, model: str, deployment: Deployment, count: int) -> dict[str, Any]:
    return {
        "ModelName": model,
        "VariantName": name,
        "InfrastructureConfig": {
            "InfrastructureType": "RealTimeInference",
            "RealTimeInferenceConfig": {
                "InstanceType": deployment.instance_type,
                "InstanceCount": count,
            },
        },
    }


def _shadow(
    inc: Variant, cand: Variant, layout: ExperimentLayout, tags: list[dict[str, str]]
) -> ExperimentRequests:
    both = render_variants([inc, replace(cand, shadow=True)], tags)
    incumbent = inc.deployment
    body: dict[str, Any] = {
        "Type": "ShadowMode",
        "RoleArn": layout.experiment_role_arn,
        "EndpointName": incumbent.endpoint_name,
        "ModelVariants": [
            _model_variant(VARIANT_NAME, both.model_names[0], incumbent, inc.instance_count),
            _model_variant(
                cand.name, both.model_names[1], cand.deployment, layout.candidate_instances
            ),
        ],
        "ShadowModeConfig": {
            "SourceModelVariantName": VARIANT_NAME,
            "ShadowModelVariants": [
                {
                    "ShadowModelVariantName": cand.name,
                    "SamplingPercentage": layout.share_percent,
                }
            ],
        },
    }
    if incumbent.spec.kms_key_id is not None:
        body["KmsKey"] = incumbent.spec.kms_key_id
    # The role is left out of the name, as for models (a stack makes its own).
    named = {k: v for k, v in body.items() if k != "RoleArn"}
    name = named_by_content(incumbent.endpoint_name, "x", named)
    return ExperimentRequests(
        candidate_model_name=both.model_names[1],
        create_candidate_model=both.create_models[1],
        experiment_name=name,
        create_inference_experiment={
            "Name": name,
            **body,
            "Description": f"peagle-deploy shadow experiment on {incumbent.endpoint_name}",
            "Tags": list(tags),
        },
    )


def schedule_end(started: datetime, max_duration_minutes: float) -> datetime:
    """When SageMaker ends a shadow experiment that started at `started` on its own."""
    span = min(timedelta(minutes=max_duration_minutes) + SCHEDULE_GRACE, MAX_SCHEDULE)
    return started + span


def update_schedule(name: str, started: datetime, max_duration_minutes: float) -> dict[str, Any]:
    """UpdateInferenceExperiment: a running experiment's end (SageMaker's default is 7
    days after it starts; a running experiment may change only its end time)."""
    return {"Name": name, "Schedule": {"EndTime": schedule_end(started, max_duration_minutes)}}


def stop_inference_experiment(
    name: str,
    *,
    candidate_variant: str = CANDIDATE_VARIANT,
    state: Literal["Completed", "Cancelled"],
    reason: str,
) -> dict[str, Any]:
    """StopInferenceExperiment: the incumbent stays (`Retain`), the candidate goes (`Remove`).

    A winning candidate is not `Promote`d here: SageMaker's promotion leaves the endpoint
    on a config it generated, with the candidate under its shadow variant name, and
    deployment guardrails need a blue/green update's old and new configs to have the same
    variant names (docs/platform-facts.md), so the stage's canary or linear rollout with
    alarm rollback could not run on the next deploy. The winner is deployed by the
    stage's ordinary blue/green update instead (`experiment.lifecycle.conclude`).
    """
    return {
        "Name": name,
        "ModelVariantActions": {VARIANT_NAME: "Retain", candidate_variant: "Remove"},
        "DesiredState": state,
        "Reason": reason[:1024],
    }
