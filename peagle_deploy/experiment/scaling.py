"""The incumbent's capacity during an experiment: kept, and its autoscaling held.

An autoscaled endpoint runs as many instances as its scaling policy last asked for, not
its config's initial count. The experiment keeps that count (read from DescribeEndpoint
before the start; every UpdateEndpoint retains it, `plan.experiment_requests`), and holds
the incumbent's Application Auto Scaling for the test (`SuspendedState`: scale-in,
scale-out and scheduled actions suspended), so the candidate's fixed fleet and the
incumbent's carry the same load per instance from start to end. The state the target
had before is in the record, written before the hold; every end (conclude, abort, a
failed start, a command run again after an interrupted one) calls `give_back`, which
puts the incumbent back on its instances and the target back in that state. Each step
is a no-op once done. docs/platform-facts.md, "Experiments on autoscaled endpoints".
"""

from __future__ import annotations

from typing import Any

from peagle_deploy.experiment.common import Clients, ExperimentError, say
from peagle_deploy.plan.experiment_requests import (
    SUSPEND_ALL,
    describe_scaling,
    keep_instances,
    scalable_resource,
    scaling_suspension,
)
from peagle_deploy.records import ExperimentRecord, current_instances

SUSPENSION_KEYS = tuple(SUSPEND_ALL)


def _aas(clients: Clients) -> Any:
    return clients.client("application-autoscaling")


def _short(exc: Exception) -> str:
    error = (getattr(exc, "response", None) or {}).get("Error", {})
    return str(error.get("Code") or type(exc).__name__)


def read_suspension(clients: Clients, endpoint: str) -> dict[str, bool] | None:
    """The incumbent's scalable target's SuspendedState (all False when it says none);
    None when the variant is not a scalable target. ExperimentError (nothing changed)
    when it cannot be read."""
    try:
        found = _aas(clients).describe_scalable_targets(**describe_scaling(endpoint))
    except Exception as exc:
        raise ExperimentError(
            f"could not read the autoscaling of {scalable_resource(endpoint)} ({_short(exc)}); "
            "the experiment holds it for the test: grant "
            "application-autoscaling:DescribeScalableTargets. Nothing was changed"
        ) from exc
    targets = found.get("ScalableTargets") or []
    if not targets:
        return None
    state = targets[0].get("SuspendedState") or {}
    return {key: bool(state.get(key, False)) for key in SUSPENSION_KEYS}


def _set_suspension(clients: Clients, endpoint: str, state: dict[str, bool], what: str) -> None:
    try:
        _aas(clients).register_scalable_target(**scaling_suspension(endpoint, state))
    except Exception as exc:
        raise ExperimentError(
            f"could not {what} the autoscaling of {scalable_resource(endpoint)} "
            f"({_short(exc)}): grant application-autoscaling:RegisterScalableTarget on it, "
            "then run the same command again"
        ) from exc


def hold(record: ExperimentRecord, clients: Clients, show: bool) -> None:
    """Suspend the incumbent's scaling for the test (nothing when it has no target)."""
    if record.scaling_suspended_before is None:
        return
    _set_suspension(clients, record.endpoint_name, SUSPEND_ALL, "suspend")
    say(show, f"holding the autoscaling of {record.endpoint_name} for the experiment")


def give_back(
    record: ExperimentRecord, clients: Clients, show: bool, timeout_s: float | None
) -> None:
    """The incumbent back on the instances it ran before the experiment, then its
    scaling back in the state it had (what the record says)."""
    _keep_capacity(record, clients, show, timeout_s)
    before = record.scaling_suspended_before
    if before is not None:
        _set_suspension(clients, record.endpoint_name, before, "restore")
        say(show, f"gave {record.endpoint_name} its autoscaling back")


def _keep_capacity(
    record: ExperimentRecord, clients: Clients, show: bool, timeout_s: float | None
) -> None:
    """UpdateEndpointWeightsAndCapacities when the incumbent is not on its instances (an
    end that reverted the endpoint to its config's initial count) and wait for it."""
    from peagle_deploy.aws import describe_endpoint_or_none
    from peagle_deploy.experiment.split import settle

    wanted = record.incumbent_instances
    desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
    if wanted is None or desc is None or current_instances(desc) in (None, wanted):
        return
    if desc.get("EndpointStatus") != "InService":
        desc = settle(record.endpoint_name, clients, show, timeout_s or 3600.0, "to settle")
        desc = desc.description
        if current_instances(desc) in (None, wanted):
            return
    clients.sm.update_endpoint_weights_and_capacities(
        **keep_instances(record.endpoint_name, wanted)
    )
    say(show, f"putting {record.endpoint_name}'s incumbent back on {wanted} instances")
    result = settle(record.endpoint_name, clients, show, timeout_s or 3600.0, "to resize")
    if current_instances(result.description) != wanted:
        raise ExperimentError(
            f"{record.endpoint_name}'s incumbent did not return to {wanted} instances "
            f"({result.status}); run the same command again"
        )
