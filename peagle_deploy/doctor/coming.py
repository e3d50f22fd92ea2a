"""The run that comes after the doctor, and the AWS calls it will make.

`caller.permissions` (doctor/caller.py) asks IAM's policy simulator whether the caller
may make these calls. They are the calls the call ledger records for the same run
(tests/infra/test_infra_call_ledger.py checks that every recorded action of a deploy, a
promotion and an experiment is one of them), as botocore operations with their
parameters, so that `catalog.iam_calls` turns each into every IAM request it needs:

- `deploy`: what `deploy_peagle` sends for the plan (sdk/deploy.py, records/store.py),
  given the endpoint as it is now;
- `promotion`: the target's deploy, and the reads of the source stage the promotion
  makes before it (its manifest, its endpoint, config and tags, the gates' requests and
  log reads: promote/runner.py, promote/store.py, promote/measure.py);
- `experiment`: what `peagle experiment start` sends and what ending it will send
  (experiment/start.py, shadow.py, split.py, scaling.py, end.py): an experiment the
  caller could start but not end would keep the candidate's fleet;
- `cdk`: `peagle doctor --stage`, before `cdk deploy`, which CloudFormation carries out
  with CDK's bootstrap roles (docs/cdk.md): no call of the caller is asked about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from peagle_deploy.naming import endpoint_log_group_name
from peagle_deploy.plan import Plan
from peagle_deploy.plan.experiment_requests import ExperimentRequests

Call = tuple[str, str, Mapping[str, Any]]
Kind = Literal["deploy", "promotion", "experiment", "cdk"]


@dataclass(frozen=True)
class PromotionSource:
    """The stage a promotion measures: what the target reads of it."""

    stage: str
    endpoint_name: str
    endpoint_config_name: str
    region: str
    found_by_listing: bool = False
    """The source endpoint was found by listing the stage's records (no `--name`)."""


@dataclass(frozen=True)
class ComingRun:
    """What runs after the doctor."""

    kind: Kind = "deploy"
    source: PromotionSource | None = None
    """A promotion's source."""
    experiment: ExperimentRequests | None = None
    """An experiment's requests (the incumbent is the doctor's plan)."""
    candidate: Plan | None = None
    """An experiment's candidate as its own plan (what a concluding promotion deploys)."""

    @property
    def label(self) -> str:
        """How the pass line names the run."""
        return {
            "deploy": "the deploy",
            "promotion": "the promotion",
            "experiment": "the experiment (start and end)",
            "cdk": "the CDK deploy",
        }[self.kind]


DEPLOY = ComingRun()
CDK_DEPLOY = ComingRun(kind="cdk")


def _arn(plan: Plan, account: str, resource: str) -> str:
    """A SageMaker resource's ARN in the plan's region."""
    from peagle_deploy.validation.aws_shapes import partition_of

    return f"arn:{partition_of(plan.region)}:sagemaker:{plan.region}:{account}:{resource}"


def deploy_calls(
    plan: Plan,
    endpoint: Mapping[str, Any] | None,
    account: str,
    serving_type: str | None = None,
) -> list[Call]:
    """The calls a deploy of `plan` makes (sdk/deploy.py, sdk/existing.py, records), given
    the endpoint as it is now: what exists under the planned names is read before it is
    created (adopted only when equal), the manifest is written and tagged; an update
    retags the endpoint and removes the old config and the model it served (a model of
    the endpoint's names: the plan's stands for it, under the same grant). An update
    that changes an autoscaled variant's instance type (`serving_type`, what it runs
    now) takes its scaling off and puts it back (`scaling_swap_calls`)."""
    from peagle_deploy.naming import name_contains
    from peagle_deploy.records import manifest_parameter_name

    name = plan.endpoint_name
    parameter = manifest_parameter_name(plan.spec.stage, name)
    calls: list[Call] = [
        ("sagemaker", "DescribeEndpoint", {"EndpointName": name}),
        ("sagemaker", "DescribeModel", {"ModelName": plan.model_name}),
        ("sagemaker", "CreateModel", plan.create_model),
        ("sagemaker", "DescribeEndpointConfig", {"EndpointConfigName": plan.endpoint_config_name}),
        ("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config),
        ("ssm", "GetParameter", {"Name": parameter, "WithDecryption": True}),
        ("ssm", "PutParameter", {"Name": parameter, "Type": "SecureString", "Overwrite": True}),
        ("ssm", "AddTagsToResource", {"ResourceId": parameter, "Tags": plan.tags}),
        *_secret_calls(plan),
    ]
    if endpoint is None:
        calls.append(("sagemaker", "CreateEndpoint", plan.create_endpoint))
    else:
        endpoint_arn = _arn(plan, account, f"endpoint/{name}")
        old_config = str(endpoint.get("EndpointConfigName") or plan.endpoint_config_name)
        calls += [
            ("sagemaker", "ListTags", {"ResourceArn": endpoint_arn}),
            ("sagemaker", "UpdateEndpoint", plan.update_endpoint),
            ("sagemaker", "AddTags", {"ResourceArn": endpoint_arn, "Tags": plan.tags}),
            ("sagemaker", "DeleteEndpointConfig", {"EndpointConfigName": old_config}),
            ("sagemaker", "DeleteModel", {"ModelName": plan.model_name}),
            ("sagemaker", "ListEndpointConfigs", {"NameContains": name_contains(name)}),
            ("sagemaker", "ListModels", {"NameContains": name_contains(name)}),
        ]
    if plan.autoscaling:
        calls.append(
            (
                "application-autoscaling",
                "RegisterScalableTarget",
                plan.autoscaling["register_scalable_target"],
            )
        )
        calls.append(
            ("application-autoscaling", "PutScalingPolicy", plan.autoscaling["put_scaling_policy"])
        )
        if endpoint is not None and serving_type not in (None, plan.instance_type):
            calls += scaling_swap_calls(plan)
    return calls


def scaling_swap_calls(plan: Plan) -> list[Call]:
    """What a deploy sends around an update that changes an autoscaled variant's
    instance type (sdk/capacity.py): the target's reads, the stage's policy deleted and
    the target deregistered, then (besides the register and policy every scaling deploy
    sends) the instance count the variant ran set back."""
    from peagle_deploy.plan.experiment_requests import describe_scaling, keep_instances, target_key
    from peagle_deploy.plan.render import scaling_policy_name

    name = plan.endpoint_name
    return [
        ("application-autoscaling", "DescribeScalableTargets", describe_scaling(name)),
        ("application-autoscaling", "DescribeScalingPolicies", target_key(name)),
        ("application-autoscaling", "DescribeScheduledActions", target_key(name)),
        (
            "application-autoscaling",
            "DeleteScalingPolicy",
            target_key(name, PolicyName=scaling_policy_name(name)),
        ),
        ("application-autoscaling", "DeregisterScalableTarget", target_key(name)),
        ("sagemaker", "UpdateEndpointWeightsAndCapacities", keep_instances(name, 1)),
    ]


def source_calls(source: PromotionSource, account: str) -> list[Call]:
    """What a promotion reads of its source before any gate, and what the gates send:
    its manifest, its endpoint, config and tags (never its models: promote/store.py), the
    smoke chat and the benchmark's requests, the benchmark's log reads."""
    from peagle_deploy.access import endpoint_grants
    from peagle_deploy.records import manifest_parameter_name
    from peagle_deploy.records.paths import PARAMETER_ROOT
    from peagle_deploy.validation.aws_shapes import partition_of

    name = source.endpoint_name
    endpoint_arn = endpoint_grants(name).endpoint.arn(
        partition_of(source.region), source.region, account
    )
    calls: list[Call] = [
        (
            "ssm",
            "GetParameter",
            {"Name": manifest_parameter_name(source.stage, name), "WithDecryption": True},
        ),
        ("sagemaker", "DescribeEndpoint", {"EndpointName": name}),
        ("sagemaker", "ListTags", {"ResourceArn": endpoint_arn}),
        (
            "sagemaker",
            "DescribeEndpointConfig",
            {"EndpointConfigName": source.endpoint_config_name},
        ),
        ("sagemaker-runtime", "InvokeEndpoint", {"EndpointName": name}),
        ("sagemaker-runtime", "InvokeEndpointWithResponseStream", {"EndpointName": name}),
        ("logs", "FilterLogEvents", {"logGroupName": endpoint_log_group_name(name)}),
    ]
    if source.found_by_listing:
        path = f"{PARAMETER_ROOT}/{source.stage}/"
        calls.insert(0, ("ssm", "GetParametersByPath", {"Path": path, "Recursive": True}))
    return calls


def experiment_calls(
    plan: Plan, requests: ExperimentRequests, candidate: Plan | None, account: str
) -> list[Call]:
    """What `peagle experiment start` sends for `requests` on the endpoint `plan` serves,
    and what ending it sends (stop or restore, the candidate removed, the incumbent's
    instances and scaling given back, a winner deployed with the stage's rollout)."""
    from peagle_deploy.plan.experiment_requests import (
        SUSPEND_ALL,
        describe_scaling,
        keep_instances,
        scaling_suspension,
    )
    from peagle_deploy.records import ExperimentRecord, RecordPath

    name = plan.endpoint_name
    record = RecordPath(plan.spec.stage, name, ExperimentRecord.KIND).name
    calls: list[Call] = [
        ("ssm", "GetParameter", {"Name": record, "WithDecryption": True}),
        ("ssm", "PutParameter", {"Name": record, "Type": "SecureString", "Overwrite": True}),
        ("ssm", "AddTagsToResource", {"ResourceId": record, "Tags": plan.tags}),
        ("sagemaker", "DescribeEndpoint", {"EndpointName": name}),
        ("sagemaker", "DescribeEndpointConfig", {"EndpointConfigName": plan.endpoint_config_name}),
        ("application-autoscaling", "DescribeScalableTargets", describe_scaling(name)),
        ("sagemaker", "CreateModel", requests.create_candidate_model),
        ("sagemaker", "DeleteModel", {"ModelName": requests.candidate_model_name}),
        ("sagemaker", "ListTags", {"ResourceArn": _arn(plan, account, f"endpoint/{name}")}),
        *_secret_calls(plan),
        *_mode_calls(requests),
        *status_calls(plan),
    ]
    if plan.autoscaling:  # the incumbent's scaling held for the test, then given back
        calls.append(
            (
                "application-autoscaling",
                "RegisterScalableTarget",
                scaling_suspension(name, SUSPEND_ALL),
            )
        )
        calls.append(("sagemaker", "UpdateEndpointWeightsAndCapacities", keep_instances(name, 1)))
    if candidate is not None:  # a winner is deployed as the stage deploys
        calls += deploy_calls(candidate, {"EndpointName": name}, account)
    return calls


def status_calls(plan: Plan) -> list[Call]:
    """What reading the experiment reads (`peagle experiment status`, and conclude and
    watch before they act): SageMaker's per-variant metrics, and the variants' own
    figures, from the container's metric lines or from detailed observability."""
    return [
        ("cloudwatch", "GetMetricData", {}),
        ("logs", "FilterLogEvents", {"logGroupName": endpoint_log_group_name(plan.endpoint_name)}),
        ("cloudwatch", "QueryMetrics", {}),  # PromQL (catalog.iam_calls.HTTP_APIS)
    ]


def _mode_calls(requests: ExperimentRequests) -> list[Call]:
    """The shadow experiment's InferenceExperiment, or the split experiment's config and
    endpoint updates."""
    if requests.create_inference_experiment is not None:
        named = {"Name": requests.experiment_name}
        return [
            ("sagemaker", "DescribeInferenceExperiment", named),
            ("sagemaker", "DeleteInferenceExperiment", named),  # a finished one of that name
            ("sagemaker", "CreateInferenceExperiment", requests.create_inference_experiment),
            ("sagemaker", "UpdateInferenceExperiment", named),
            ("sagemaker", "StopInferenceExperiment", named),
        ]
    assert requests.create_endpoint_config is not None
    assert requests.start_update is not None and requests.restore_update is not None
    return [
        ("sagemaker", "CreateEndpointConfig", requests.create_endpoint_config),
        ("sagemaker", "UpdateEndpoint", requests.start_update),
        ("sagemaker", "UpdateEndpoint", requests.restore_update),
        ("sagemaker", "DeleteEndpointConfig", {"EndpointConfigName": requests.config_name}),
    ]


def _secret_calls(plan: Plan) -> list[Call]:
    return [
        ("secretsmanager", "GetSecretValue", {"SecretId": ":".join(ref.split(":")[:7])})
        for ref in plan.secret_refs.values()
    ]


def coming_calls(
    coming: ComingRun,
    plan: Plan,
    endpoint: Mapping[str, Any] | None,
    account: str,
    serving_type: str | None = None,
) -> list[Call]:
    """Every call of the coming run (none for a CDK deploy); `serving_type`: the
    instance type the endpoint's variant runs now, when it exists."""
    if coming.kind == "cdk":
        return []
    if coming.kind == "experiment":
        assert coming.experiment is not None
        return experiment_calls(plan, coming.experiment, coming.candidate, account)
    calls = deploy_calls(plan, endpoint, account, serving_type)
    if coming.source is not None:
        calls = source_calls(coming.source, account) + calls
    return calls
