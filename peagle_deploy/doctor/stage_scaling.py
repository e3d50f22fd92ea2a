"""`peagle doctor --stage`: an instance-type change the stage's stack cannot make.

SageMaker fails an UpdateEndpoint that would change the instance type of a variant that
is an autoscaling target; its guide deregisters the target first and registers it again
after the update (docs/platform-facts.md, "Deploying onto an autoscaled endpoint").
`peagle deploy` does so. A stack cannot: its ScalableTarget is unchanged by the change
and is updated after the endpoint it depends on, so CloudFormation would fail the
endpoint's update and roll the stack back. Synth cannot see what the endpoint runs; this
check reads it (DescribeEndpoint, DescribeEndpointConfig) and whether its variant is a
scalable target (DescribeScalableTargets), and fails such a deploy in one line with the
two deploys that make the change (docs/cdk.md, "An autoscaled stage").
"""

from __future__ import annotations

from typing import Any

from peagle_deploy.doctor.context import could_not_check
from peagle_deploy.doctor.result import CheckResult, failed, passed
from peagle_deploy.plan import Plan
from peagle_deploy.plan.experiment_requests import describe_scaling

CHECK = "stage.scaling"


def check_stage_scaling(session: Any, plan: Plan) -> CheckResult:
    """Whether the stage's deploy changes the instance type of an autoscaled variant."""
    from peagle_deploy.aws import describe_endpoint_or_none, serving_instance_type
    from peagle_deploy.records import current_instances

    endpoint = plan.endpoint_name
    try:
        sm = session.client("sagemaker", region_name=plan.region)
        desc = describe_endpoint_or_none(sm, endpoint)
        running = serving_instance_type(sm, str(desc["EndpointConfigName"])) if desc else None
        if running is None or running == plan.instance_type:
            return passed(CHECK, endpoint, "the deploy keeps the instance type the endpoint runs")
        aas = session.client("application-autoscaling", region_name=plan.region)
        targets = aas.describe_scalable_targets(**describe_scaling(endpoint))["ScalableTargets"]
    except Exception as exc:
        return could_not_check(
            CHECK,
            endpoint,
            exc,
            denied="the endpoint's instance type or autoscaling may not be read",
            fix="allow sagemaker:DescribeEndpoint, sagemaker:DescribeEndpointConfig and "
            "application-autoscaling:DescribeScalableTargets",
            failed="the endpoint's instance type or autoscaling could not be read",
        )
    if not targets:
        return passed(
            CHECK,
            endpoint,
            f"{running} -> {plan.instance_type}: the variant is no autoscaling target",
        )
    count = current_instances(desc) or plan.spec.initial_instance_count
    return failed(
        CHECK,
        endpoint,
        f"instance_type: the endpoint runs {running} on a variant that is an autoscaling "
        f"target; SageMaker refuses its update to {plan.instance_type} until the target is "
        "deregistered, which the stack cannot do first: CloudFormation would roll the "
        "stack back",
        f"deploy the stage without scaling: and with initial_instance_count: {count} (what "
        f"it runs), then with instance_type: {plan.instance_type} and scaling: again "
        "(docs/cdk.md, An autoscaled stage)",
    )
