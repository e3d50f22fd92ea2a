"""What the endpoint itself says it runs: the other half of the truth a record is
checked against. Reads a DescribeEndpoint response only (no call of its own)."""

from __future__ import annotations

from typing import Any


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
