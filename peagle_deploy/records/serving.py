"""What the endpoint itself says it runs: the other half of the truth a record is
checked against. Reads a DescribeEndpoint response only (no call of its own)."""

from __future__ import annotations

from typing import Any

ALL_TRAFFIC = "AllTraffic"
"""The variant a peagle endpoint serves from: `plan.render.VARIANT_NAME`, spelled here
so that reading the records does not import the planner (a test keeps the two equal)."""


def running_experiment(description: dict[str, Any] | None) -> str | None:
    """Why an endpoint is in an experiment, from DescribeEndpoint alone (None when not):
    a shadow variant, or more than one production variant."""
    if not description:
        return None
    shadows = description.get("ShadowProductionVariants") or []
    production = description.get("ProductionVariants") or []
    pending = description.get("PendingDeploymentSummary") or {}
    if shadows or pending.get("ShadowProductionVariants"):
        names = [v.get("VariantName") for v in shadows or pending["ShadowProductionVariants"]]
        return f"it runs the shadow variant {', '.join(str(n) for n in names)}"
    if len(production) > 1 or len(pending.get("ProductionVariants") or []) > 1:
        names = [v.get("VariantName") for v in production]
        return f"it splits its traffic over variants {', '.join(str(n) for n in names)}"
    return None


def current_instances(description: dict[str, Any] | None, variant: str = ALL_TRAFFIC) -> int | None:
    """How many instances `variant` runs or is moving to, from DescribeEndpoint alone
    (DesiredInstanceCount, else CurrentInstanceCount); None when it does not say. An
    autoscaled variant's count is its scaling's, not its config's initial count."""
    for summary in (description or {}).get("ProductionVariants") or []:
        if summary.get("VariantName") != variant:
            continue
        for key in ("DesiredInstanceCount", "CurrentInstanceCount"):
            value = summary.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None
