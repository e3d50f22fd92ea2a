"""A variant's instance count as SageMaker and Application Auto Scaling move it.

moto keeps a variant's DesiredInstanceCount and CurrentInstanceCount but nothing moves
them after a create: every UpdateEndpoint takes the new config's initial counts, and a
registered scalable target never scales. The emulator adds (docs/platform-facts.md,
"Experiments on autoscaled endpoints"):

- `Retention`: UpdateEndpoint's `RetainAllVariantProperties` (a variant the new config
  names too keeps its latest instance count and weight, whatever the config says) and
  `ExcludeRetainedVariantProperties` (`DesiredInstanceCount` / `DesiredWeight` taken from
  the config after all);
- `type_change_refused`: an UpdateEndpoint that would change the instance type of a
  variant that is a scalable target fails ("the update fails"; the wording of the error
  is the emulator's, no page read quotes SageMaker's);
- `autoscale`: what a scaling policy does to a registered variant: the count moved to
  what the policy asks, within the target's MinCapacity and MaxCapacity, and not at all
  while the target's `SuspendedState` suspends that direction (scale-out for a larger
  count, scale-in for a smaller one). Tests call it in place of a policy's alarm.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

COUNT = ("DesiredInstanceCount", "CurrentInstanceCount")
WEIGHT = ("DesiredWeight", "CurrentWeight")
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


@dataclass(frozen=True)
class Retention:
    """Which of a variant's properties an UpdateEndpoint keeps from before it."""

    counts: bool
    weights: bool

    @classmethod
    def of(cls, retain_all: Any, exclude: Iterable[Any] | None) -> Retention | None:
        """From UpdateEndpoint's parameters; None when nothing is retained (the default)."""
        if not retain_all or str(retain_all).lower() == "false":
            return None
        excluded = {str((e or {}).get("VariantPropertyType")) for e in exclude or []}
        return cls(
            counts="DesiredInstanceCount" not in excluded,
            weights="DesiredWeight" not in excluded,
        )

    def apply(self, before: list[dict[str, Any]] | None, after: list[dict[str, Any]]) -> None:
        """Carry the retained properties of same-named variants from `before` to `after`."""
        old = {v.get("VariantName"): v for v in before or []}
        for variant in after:
            previous = old.get(variant.get("VariantName"))
            if previous is None:
                continue
            for keep, keys in ((self.counts, COUNT), (self.weights, WEIGHT)):
                if keep and all(k in previous for k in keys):
                    variant.update({k: previous[k] for k in keys})


def _target(account: str, region: str, endpoint: str, variant: str) -> Any:
    from moto.applicationautoscaling.models import applicationautoscaling_backends

    backend = applicationautoscaling_backends[account][region]
    resource = f"endpoint/{endpoint}/variant/{variant}"
    return backend.targets.get(DIMENSION, {}).get(resource)


def type_change_refused(
    account: str,
    region: str,
    endpoint: str,
    before: list[dict[str, Any]] | None,
    after: list[dict[str, Any]],
) -> str | None:
    """Why UpdateEndpoint fails when a variant that is a scalable target would change its
    instance type (`before`: the serving config's variants, `after`: the new one's);
    None when no such variant changes."""
    old = {v.get("VariantName"): v.get("InstanceType") for v in before or []}
    for variant in after:
        name = variant.get("VariantName")
        was = old.get(name)
        if was is None or was == variant.get("InstanceType"):
            continue
        if _target(account, region, endpoint, str(name)) is not None:
            return (
                f"variant {name} of endpoint {endpoint} is a target for auto scaling: its "
                f"instance type cannot change from {was} to {variant.get('InstanceType')} "
                "until it is deregistered (DeregisterScalableTarget)"
            )
    return None


def autoscale(
    account: str, region: str, endpoint: str, count: int, variant: str = "AllTraffic"
) -> int:
    """Move `variant` towards `count` instances as its scaling policy would; returns the
    count it runs after. LookupError when the endpoint, the variant or its scalable
    target is missing (a policy acts only on a registered target)."""
    from moto.sagemaker.models import sagemaker_backends

    found = sagemaker_backends[account][region].endpoints.get(endpoint)
    summary = next(
        (v for v in (found.production_variants if found else []) if v["VariantName"] == variant),
        None,
    )
    target = _target(account, region, endpoint, variant)
    if summary is None or target is None:
        raise LookupError(f"no scalable target for {endpoint}/{variant}")
    now = int(summary.get("DesiredInstanceCount") or 0)
    suspended = target.suspended_state or {}
    wanted = max(int(target.min_capacity or 0), min(count, int(target.max_capacity or count)))
    if wanted > now and suspended.get("DynamicScalingOutSuspended"):
        return now
    if wanted < now and suspended.get("DynamicScalingInSuspended"):
        return now
    summary.update({k: wanted for k in COUNT})
    return wanted
