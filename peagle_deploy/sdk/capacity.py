"""An autoscaled endpoint through a deploy: its instances kept, an instance-type change
made in the order SageMaker documents.

A stage with `scaling:` is updated with `RetainAllVariantProperties`
(`plan.render.update_endpoint`): the variant keeps the instances its scaling gave it.
SageMaker fails an UpdateEndpoint that would change the instance type of a variant that
is a scalable target; its guide's order is to delete the target's scaling policies and
deregister it, update the endpoint, then register the variant again and attach the
policy (docs/platform-facts.md, "Deploying onto an autoscaled endpoint").

`find_swap` reads, before anything changes, whether the coming update is such a change
and what the target holds; it refuses, in one line naming `instance_type`, a target
holding what the deploy could not put back (a policy that is not the stage's own, a
scheduled action: deregistering deletes both). `release` then deletes the policy and
deregisters the target; `put_back` restores both as they were when the update fails or
rolls back; after a successful update the deploy registers the plan's target and policy
(as every deploy of a scaled stage does) and `restore_instances` sets the variant back on
the instances it ran, within the new minimum and maximum, if SageMaker did not keep them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from peagle_deploy.aws import serving_instance_type
from peagle_deploy.errors import DeployError, InputError
from peagle_deploy.naming import STAGE_TAG
from peagle_deploy.plan import Plan
from peagle_deploy.plan.experiment_requests import (
    describe_scaling,
    scalable_resource,
    target_key,
)
from peagle_deploy.plan.render import VARIANT_NAME, scaling_policy_name
from peagle_deploy.records import current_instances

POLICY_FIELDS = (
    "PolicyType",
    "StepScalingPolicyConfiguration",
    "TargetTrackingScalingPolicyConfiguration",
    "PredictiveScalingPolicyConfiguration",
)
"""What PutScalingPolicy takes of a described policy, beside its name and target
(botocore's application-autoscaling model)."""


@dataclass(frozen=True)
class ScalingSwap:
    """The variant's scalable target as it was before an instance-type change."""

    endpoint: str
    stage: str
    from_type: str
    target: dict[str, Any]
    """DescribeScalableTargets' entry."""
    policies: tuple[dict[str, Any], ...]
    """DescribeScalingPolicies' entries (only the stage's own policy: `find_swap`)."""
    instances: int | None
    """What the variant ran before the update."""

    def keyed(self, **extra: Any) -> dict[str, Any]:
        """The parameters naming the target, with `extra`."""
        return target_key(self.endpoint, **extra)


def find_swap(sm: Any, aas: Any, plan: Plan, current: dict[str, Any]) -> ScalingSwap | None:
    """The scaling to take off for the update of `current` (DescribeEndpoint) to `plan`,
    or None: the instance type stays, or the variant is not a scalable target. Reads only;
    InputError (`instance_type`) for a target holding what the deploy could not put back,
    DeployError when the target cannot be read."""
    endpoint = plan.endpoint_name
    # None when the config cannot be read: the update then goes as asked, and SageMaker
    # refuses it if it changes a scaled variant's type (the refused-update error says so).
    from_type = serving_instance_type(sm, str(current["EndpointConfigName"]))
    if from_type is None or from_type == plan.instance_type:
        return None
    try:
        targets = aas.describe_scalable_targets(**describe_scaling(endpoint))["ScalableTargets"]
        if not targets:
            return None
        policies = _all(aas, "describe_scaling_policies", "ScalingPolicies", endpoint)
        scheduled = _all(aas, "describe_scheduled_actions", "ScheduledActions", endpoint)
    except Exception as exc:
        raise DeployError(
            f"could not read the autoscaling of {scalable_resource(endpoint)} ({_short(exc)}), "
            f"which the change from {from_type} to {plan.instance_type} takes off for the "
            "update: grant application-autoscaling:DescribeScalableTargets, "
            "DescribeScalingPolicies and DescribeScheduledActions. Nothing was changed"
        ) from exc
    foreign = [f"policy {p['PolicyName']}" for p in policies if not _own(p, endpoint)]
    foreign += [f"scheduled action {a['ScheduledActionName']}" for a in scheduled]
    if foreign:
        raise InputError(
            "instance_type",
            f"{endpoint} runs {from_type} and its variant is an autoscaling target; SageMaker "
            f"changes the instance type of a scaled variant only once the target is "
            f"deregistered, which deletes its {', '.join(foreign)}: not this stage's to delete",
            f"{from_type}, or {plan.instance_type} once the target holds only "
            f"{scaling_policy_name(endpoint)}",
        )
    return ScalingSwap(
        endpoint=endpoint,
        stage=plan.spec.stage,
        from_type=from_type,
        target=dict(targets[0]),
        policies=tuple(policies),
        instances=current_instances(current),
    )


MAX_PAGES = 20
"""Pages of a target's policies or scheduled actions read (a stage's target holds one
policy; a target with more pages than this is refused, not half read)."""


def _all(aas: Any, operation: str, key: str, endpoint: str) -> list[dict[str, Any]]:
    """Every entry of a paged Describe* of the endpoint's target: a policy or scheduled
    action on a later page must be seen, or deregistering would delete it unseen."""
    out: list[dict[str, Any]] = []
    pages = aas.get_paginator(operation).paginate(**target_key(endpoint))
    for number, page in enumerate(pages, start=1):
        out += page.get(key, [])
        if number >= MAX_PAGES and page.get("NextToken"):
            raise RuntimeError(f"{operation} still paging after {number} pages")
    return out


def _own(policy: dict[str, Any], endpoint: str) -> bool:
    return (
        policy.get("PolicyName") == scaling_policy_name(endpoint)
        and policy.get("PolicyType") == "TargetTrackingScaling"
    )


def release(aas: Any, swap: ScalingSwap) -> None:
    """The documented order: the target's policy deleted, then the target deregistered.
    DeployError when it cannot be done (what was taken off is put back first)."""
    try:
        for policy in swap.policies:
            aas.delete_scaling_policy(**swap.keyed(PolicyName=policy["PolicyName"]))
        aas.deregister_scalable_target(**swap.keyed())
    except Exception as exc:
        problem = put_back(aas, swap)
        raise DeployError(
            f"could not take the autoscaling off {swap.keyed()['ResourceId']} for the change "
            f"from {swap.from_type} ({_short(exc)}): grant application-autoscaling:"
            "DeleteScalingPolicy and DeregisterScalableTarget on it. The endpoint was not "
            f"changed{problem}"
        ) from exc


def put_back(aas: Any, swap: ScalingSwap) -> str:
    """The target and its policy registered again as they were; '' when done, else a
    sentence saying what is missing (for the error the caller raises)."""
    before = swap.target
    try:
        aas.register_scalable_target(
            **swap.keyed(
                MinCapacity=before["MinCapacity"],
                MaxCapacity=before["MaxCapacity"],
                SuspendedState=dict(before.get("SuspendedState") or {}),
                Tags={STAGE_TAG: swap.stage},
            )
        )
        for policy in swap.policies:
            fields = {k: policy[k] for k in POLICY_FIELDS if policy.get(k) is not None}
            aas.put_scaling_policy(**swap.keyed(PolicyName=policy["PolicyName"], **fields))
    except Exception as exc:
        return (
            f"; its autoscaling could not be put back ({_short(exc)}): deploy the same spec "
            "again once the endpoint serves, which registers it"
        )
    return ""


def restore_instances(
    sm: Any,
    plan: Plan,
    swap: ScalingSwap,
    now: dict[str, Any],
    wait: Callable[[], dict[str, Any]],
) -> str | None:
    """After the update (`now`: DescribeEndpoint): the variant back on the instances it
    ran, within the plan's scaling bounds, when SageMaker did not keep them
    (UpdateEndpointWeightsAndCapacities, then `wait` until it settles). Returns a
    warning when that did not happen; the plan's scaling, registered next, sizes the
    variant from there."""
    scaling = (plan.autoscaling or {}).get("register_scalable_target")
    if swap.instances is None or scaling is None:
        return None
    wanted = max(scaling["MinCapacity"], min(swap.instances, scaling["MaxCapacity"]))
    if current_instances(now) == wanted:
        return None
    try:
        sm.update_endpoint_weights_and_capacities(
            EndpointName=plan.endpoint_name,
            DesiredWeightsAndCapacities=[
                {"VariantName": VARIANT_NAME, "DesiredInstanceCount": wanted}
            ],
        )
        now = wait()
        problem = None if current_instances(now) == wanted else str(now.get("EndpointStatus"))
    except Exception as exc:
        problem = _short(exc)
    if problem is None:
        return None
    return (
        f"{plan.endpoint_name} runs {current_instances(now)} instance(s) of "
        f"{plan.instance_type}, not the {wanted} it ran on {swap.from_type} ({problem}); "
        "its scaling sizes it from here"
    )


def _short(exc: Exception) -> str:
    error = (getattr(exc, "response", None) or {}).get("Error", {})
    return str(error.get("Code") or type(exc).__name__)
