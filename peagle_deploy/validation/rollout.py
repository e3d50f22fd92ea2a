"""Blue/green rollout (UpdateEndpoint DeploymentConfig) and its rollback alarms."""

from __future__ import annotations

import math

from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.spec.models import RolloutSpec

MAX_ALARMS = 10
MAX_ALARM_NAME = 255


def check_rollout(dep: Deployment) -> list[PlanWarning]:
    """Alarm limits; warn where SageMaker's step caps make canary/linear doubtful.

    The API reference caps a canary at 50% and a linear step at 10-50% of the variant's
    instances; with one instance that cannot hold, so the update may be refused.
    """
    rollout = dep.rollout
    check_alarms(rollout.alarms)
    warnings = check_rollout_timeout(rollout)
    strategy = rollout.strategy
    if strategy in ("canary", "linear") and dep.spec.initial_instance_count < 2:
        warnings.append(
            PlanWarning(
                "rollout.strategy",
                f"rollout.strategy={strategy} with initial_instance_count=1: SageMaker caps "
                "the first step at 50% of the instances; use all-at-once or 2+ instances",
            )
        )
    return warnings


def check_rollout_timeout(rollout: RolloutSpec) -> list[PlanWarning]:
    """MaximumExecutionTimeoutInSeconds must exceed the rollout's waits.

    botocore's BlueGreenUpdatePolicy documentation: the timeout "should be larger than the
    total waiting time specified in TerminationWaitInSeconds and WaitIntervalInSeconds";
    SageMaker refuses the UpdateEndpoint otherwise (only at update time, i.e. on the
    first changed spec, long after the endpoint was created). A linear rollout waits once
    per step; a timeout below that total is only warned about (the per-step accounting
    is not documented).
    """
    wait, term, limit = (
        rollout.wait_interval_s,
        rollout.termination_wait_s,
        rollout.max_execution_timeout_s,
    )
    if limit <= wait + term:
        raise InputError(
            "rollout.max_execution_timeout_s",
            f"{limit} s is not larger than wait_interval_s + termination_wait_s "
            f"({wait} + {term} s)",
            f"{wait + term + 1}-28800",
        )
    if rollout.strategy == "linear":
        steps = math.ceil(100 / rollout.linear_step_percent)
        total = wait * steps + term
        if limit <= total:
            return [
                PlanWarning(
                    "rollout.max_execution_timeout_s",
                    f"rollout.max_execution_timeout_s={limit} s may end a linear rollout of "
                    f"{steps} steps early: {steps} x wait_interval_s + termination_wait_s "
                    f"= {total} s",
                )
            ]
    return []


def check_alarms(alarms: list[str]) -> None:
    """AutoRollbackConfiguration takes 1-10 alarm names of 1-255 characters."""
    if len(alarms) > MAX_ALARMS:
        raise InputError("rollout.alarms", f"{len(alarms)} alarms given", f"<= {MAX_ALARMS}")
    for i, name in enumerate(alarms):
        # AlarmName pattern `(?!\s*$).+`: not blank, and `.` matches no line break
        if not name.strip() or len(name) > MAX_ALARM_NAME or "\n" in name or "\r" in name:
            raise InputError(
                f"rollout.alarms[{i}]",
                f"{name!r} is not an alarm name",
                f"1-{MAX_ALARM_NAME} characters, not blank, on one line",
            )
