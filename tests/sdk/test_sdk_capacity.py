"""An autoscaled endpoint through `deploy_peagle`: it keeps the instances its scaling gave
it, and an instance-type change takes its scaling off and puts it back in SageMaker's
documented order (docs/platform-facts.md, "Deploying onto an autoscaled endpoint").

The emulator moves a registered variant as its policy would (`autoscale`) and, as
SageMaker does, fails an update that changes a scalable target's instance type.
"""

from __future__ import annotations

from typing import Any

import pytest
from sdk_testkit import MODEL, ROLE, AwsEnv

from peagle_deploy.errors import DeployError, InputError
from peagle_deploy.plan import STAGE_TAG
from peagle_deploy.sdk import PeagleEndpoint, deploy_peagle

NAME = "peagle-qwen3-coder-30b-a3b-instruct-dev"
RESOURCE = f"endpoint/{NAME}/variant/AllTraffic"
SCALING = {"min_instances": 1, "max_instances": 8, "target_invocations_per_instance": 20}
OTHER_TYPE = "ml.g7e.4xlarge"


def _deploy(aws: AwsEnv, **kwargs: Any) -> PeagleEndpoint:
    kwargs.setdefault("role_arn", ROLE)
    kwargs.setdefault("progress", False)
    kwargs.setdefault("scaling", SCALING)
    return deploy_peagle(MODEL, boto_session=aws.session, **kwargs)


def _instances(aws: AwsEnv) -> int:
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)
    (variant,) = desc["ProductionVariants"]
    assert variant["DesiredInstanceCount"] == variant["CurrentInstanceCount"]
    return int(variant["CurrentInstanceCount"])


def _instance_type(aws: AwsEnv) -> str:
    sm = aws.client("sagemaker")
    config = sm.describe_endpoint(EndpointName=NAME)["EndpointConfigName"]
    (variant,) = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
    return str(variant["InstanceType"])


def _scaling(aws: AwsEnv) -> tuple[list[tuple[int, int]], list[tuple[str, float]]]:
    """(min, max) of the variant's target, and (name, target value) of its policies."""
    aas = aws.client("application-autoscaling")
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[RESOURCE])
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=RESOURCE)
    return (
        [(t["MinCapacity"], t["MaxCapacity"]) for t in targets["ScalableTargets"]],
        [
            (p["PolicyName"], p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"])
            for p in policies["ScalingPolicies"]
        ],
    )


def _scaled_to_six(aws: AwsEnv) -> None:
    first = _deploy(aws).deployment
    assert first is not None and first.action == "create"
    assert aws.ext.autoscale(NAME, 6) == 6


OWN = ([(1, 8)], [(f"{NAME}-invocations", 20.0)])


def test_a_deploy_of_a_new_k_keeps_the_instances_scaling_gave_the_endpoint(aws: AwsEnv) -> None:
    """Its config says 1; scaling moved it to 6: the update keeps 6, and the target and
    its policy are as they were (the scaling acts on after it)."""
    _scaled_to_six(aws)
    second = _deploy(aws, num_speculative_tokens=5).deployment
    assert second is not None and second.action == "update"
    assert _instances(aws) == 6
    assert _scaling(aws) == OWN
    assert aws.ext.autoscale(NAME, 7) == 7


def test_without_scaling_a_deploy_takes_the_specs_count(aws: AwsEnv) -> None:
    """A stage with no `scaling:` states its count: the update takes the config's."""
    _deploy(aws, scaling=None)
    aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=NAME,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 3}],
    )
    _deploy(aws, scaling=None, num_speculative_tokens=5)
    assert _instances(aws) == 1


def test_an_instance_type_change_deregisters_the_scaling_and_registers_it_after(
    aws: AwsEnv,
) -> None:
    """SageMaker fails the change while the variant is a scalable target: the deploy
    deletes the policy and deregisters the target first, updates, registers both again,
    and the variant runs the 6 instances it ran before, now of the new type."""
    _scaled_to_six(aws)
    aws.calls.clear()
    registered: list[dict[str, Any]] = []
    aws.on(
        "before-parameter-build.application-autoscaling.RegisterScalableTarget",
        lambda params, **_: registered.append(dict(params)),
    )
    outcome = _deploy(aws, instance_type=OTHER_TYPE).deployment
    assert outcome is not None and outcome.action == "update"
    assert _instance_type(aws) == OTHER_TYPE
    assert _instances(aws) == 6
    assert _scaling(aws) == OWN
    order = [c for c in aws.mutating_calls() if "Scal" in c or c == "UpdateEndpoint"]
    assert order[:3] == ["DeleteScalingPolicy", "DeregisterScalableTarget", "UpdateEndpoint"]
    assert order[3:] == ["RegisterScalableTarget", "PutScalingPolicy"]
    # the new target is tagged with its stage (the stage's CI role registers only so)
    assert [r["Tags"] for r in registered] == [{STAGE_TAG: "dev"}]


def test_the_dry_run_says_the_scaling_comes_off_and_changes_nothing(aws: AwsEnv) -> None:
    _scaled_to_six(aws)
    aws.calls.clear()
    handle = _deploy(aws, instance_type=OTHER_TYPE, dry_run=True)
    assert handle.deployment is not None
    assert any("deregistered for the update" in w for w in handle.deployment.warnings)
    assert aws.mutating_calls() == []
    assert _scaling(aws) == OWN


def test_a_rolled_back_type_change_puts_the_scaling_back(aws: AwsEnv) -> None:
    _scaled_to_six(aws)
    aws.ext.script_endpoint(
        NAME,
        updating_s=30.0,
        rollback_on_update=True,
        rolling_back_s=10.0,
        rollback_reason="Alarm peagle-5xx went into ALARM",
    )
    with pytest.raises(DeployError) as caught:
        _deploy(aws, instance_type=OTHER_TYPE)
    assert "rolled back" in str(caught.value)
    assert "autoscaling was registered again as it was" in str(caught.value)
    assert _instance_type(aws) == "ml.g7e.2xlarge"
    assert _instances(aws) == 6
    assert _scaling(aws) == OWN


def test_a_scheduled_action_is_not_the_deploys_to_delete(aws: AwsEnv) -> None:
    """Deregistering deletes a target's scheduled actions: a target holding one is
    refused, in one line naming instance_type, before anything changes."""
    _scaled_to_six(aws)
    aws.client("application-autoscaling").put_scheduled_action(
        ServiceNamespace="sagemaker",
        ScheduledActionName="night",
        ResourceId=RESOURCE,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        Schedule="cron(0 22 * * ? *)",
        ScalableTargetAction={"MinCapacity": 1, "MaxCapacity": 2},
    )
    aws.calls.clear()
    with pytest.raises(InputError) as caught:
        _deploy(aws, instance_type=OTHER_TYPE)
    message = str(caught.value)
    assert message.startswith("instance_type: ") and "\n" not in message
    assert "scheduled action night" in message
    assert aws.mutating_calls() == []
    assert _instance_type(aws) == "ml.g7e.2xlarge" and _scaling(aws) == OWN


@pytest.mark.parametrize("aws", ["inprocess"], indirect=True)
def test_an_update_interrupted_after_the_scaling_came_off_is_finished_by_the_same_deploy(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the update runs: the message says the scaling is off; the same
    deploy, run again, joins the update and registers the scaling."""
    from peagle_deploy.sdk import waiter

    _scaled_to_six(aws)
    aws.ext.script_endpoint(NAME, updating_s=60.0)
    real = waiter._sleep

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(waiter, "_sleep", ctrl_c)
    with pytest.raises(KeyboardInterrupt) as caught:
        _deploy(aws, instance_type=OTHER_TYPE)
    assert "was taken off for the instance-type change" in str(caught.value)
    assert _scaling(aws) == ([], [])
    monkeypatch.setattr(waiter, "_sleep", real)
    again = _deploy(aws, instance_type=OTHER_TYPE).deployment
    assert again is not None and again.action == "resume"
    assert _scaling(aws) == OWN
    assert _instance_type(aws) == OTHER_TYPE


def test_an_unchanged_deploy_registers_the_scaling_it_finds_missing(aws: AwsEnv) -> None:
    """A deploy stopped after an instance-type change took the scaling off (or told not
    to wait) left no target: the same deploy, a no-op for the endpoint, registers it."""
    _scaled_to_six(aws)
    outcome = _deploy(aws, instance_type=OTHER_TYPE, wait=False).deployment
    assert outcome is not None and outcome.action == "update"
    assert any("run again once the update has settled" in w for w in outcome.warnings)
    assert _scaling(aws) == ([], [])
    aws.clock.advance(3600)
    again = _deploy(aws, instance_type=OTHER_TYPE).deployment
    assert again is not None and again.action == "noop"
    assert any("had no autoscaling: registered it" in w for w in again.warnings)
    assert _scaling(aws) == OWN


def test_a_policy_on_a_later_page_is_seen_before_the_scaling_comes_off() -> None:
    """Deregistering deletes every policy of the target: one on a second page of
    DescribeScalingPolicies (which pages) must refuse the change as one on the first does."""
    from peagle_deploy.sdk.capacity import find_swap

    pages = {
        "describe_scaling_policies": [
            {"ScalingPolicies": [{"PolicyName": f"{NAME}-invocations"}], "NextToken": "2"},
            {"ScalingPolicies": [{"PolicyName": "someone-elses"}]},
        ],
        "describe_scheduled_actions": [{"ScheduledActions": []}],
    }

    class Paginator:
        def __init__(self, operation: str) -> None:
            self.operation = operation

        def paginate(self, **_: Any) -> list[dict[str, Any]]:
            return pages[self.operation]

    class Aas:
        def describe_scalable_targets(self, **_: Any) -> dict[str, Any]:
            return {"ScalableTargets": [{"ResourceId": RESOURCE}]}

        def get_paginator(self, operation: str) -> Paginator:
            return Paginator(operation)

    class Sm:
        def describe_endpoint_config(self, **_: Any) -> dict[str, Any]:
            return {"ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "x"}]}

    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    plan = build_plan(
        load_spec(None, model=MODEL, stage="dev", scaling=SCALING, execution_role_arn=ROLE)
    )
    with pytest.raises(InputError) as caught:
        find_swap(Sm(), Aas(), plan, {"EndpointConfigName": "c", "EndpointName": NAME})
    assert "policy someone-elses" in str(caught.value)
