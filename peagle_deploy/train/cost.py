"""The most a training job can cost: instance-hours (MaxRuntime x instance count).

Spot changes how long a job may wait for capacity (MaxWaitTimeInSeconds), not how long
it runs, so the bound in instance-hours is the same with and without spot. No price is
attached: the catalog records no sourced SageMaker training price (catalog/training.py),
and a price without a source would be invented, so `usd` stays None.
"""

from __future__ import annotations

from peagle_deploy.train.resolve import ResolvedTraining
from peagle_deploy.train.result import TrainingCost


def training_cost(job: ResolvedTraining) -> TrainingCost:
    """Instance-hours of the whole job at its maximum runtime."""
    spec = job.spec
    hours = job.max_runtime_s / 3600
    return TrainingCost(
        instance_type=spec.instance_type,
        instance_count=spec.instance_count,
        max_runtime_hours=hours,
        instance_hours=hours * spec.instance_count,
        spot=spec.spot.enabled,
    )
