"""What CloudFormation cannot express about a spec (the CDK path refuses these)."""

from __future__ import annotations

from typing import Any

from peagle_deploy.findings import CdkIncompatibility, PlanWarning
from peagle_deploy.spec.models import CFN_ROUTING_STRATEGIES, DeploymentSpec


def cdk_incompatibilities(spec_or_plan: DeploymentSpec | Any) -> list[CdkIncompatibility]:
    """What CloudFormation cannot express about a spec (or a Deployment or Plan of it).

    The CDK side reads `plan.cdk_incompatibilities` and refuses when the list is not
    empty, naming `.field`; the SDK path can deploy such specs.
    """
    spec: DeploymentSpec = getattr(spec_or_plan, "spec", spec_or_plan)
    problems = []
    if spec.routing_strategy is not None and spec.routing_strategy not in CFN_ROUTING_STRATEGIES:
        problems.append(
            CdkIncompatibility(
                "routing_strategy",
                f"{spec.routing_strategy} is not supported by AWS::SageMaker::EndpointConfig "
                f"(allowed: {', '.join(CFN_ROUTING_STRATEGIES)})",
            )
        )
    return problems


def cdk_warnings(problems: list[CdkIncompatibility]) -> list[PlanWarning]:
    """The incompatibilities, as plan warnings (the SDK path works)."""
    return [
        PlanWarning(p.field, f"{p}; the CDK path will refuse it (the SDK path works)")
        for p in problems
    ]
