"""A split experiment on SageMaker: two weighted production variants in one endpoint config.

Start: CreateModel (the candidate), CreateEndpointConfig (both variants), UpdateEndpoint
onto it. End: UpdateEndpoint back onto the incumbent's config, then the experiment's
config and the candidate's model are deleted. Every update is a plain UpdateEndpoint
(blue/green, all at once, no availability loss; see `plan.experiment_requests`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from peagle_deploy.aws import delete_quietly, describe_endpoint_or_none
from peagle_deploy.experiment.common import (
    Clients,
    ExperimentError,
    candidate_model_request,
    say,
)
from peagle_deploy.plan.experiment_requests import restore_update
from peagle_deploy.records import ExperimentRecord, running_experiment
from peagle_deploy.sdk.waiter import IN_PROGRESS, wait_for_endpoint

if TYPE_CHECKING:
    from peagle_deploy.experiment.plan import ExperimentPlan


def create(xp: ExperimentPlan, clients: Clients, show: bool) -> list[str]:
    """Create the candidate's model and the experiment's config, then UpdateEndpoint.

    Returns what it created; on a refusal removes it and raises ExperimentError.
    """
    from botocore.exceptions import ClientError

    from peagle_deploy.sdk.existing import ExistingDiffersError, Kind, create_or_adopt

    r = xp.requests
    assert r.create_endpoint_config is not None and r.start_update is not None
    assert r.config_name is not None
    created: list[str] = []
    steps: list[tuple[Kind, dict[str, Any], str]] = [
        ("model", candidate_model_request(xp, clients), r.candidate_model_name),
        ("endpoint-config", r.create_endpoint_config, r.config_name),
    ]
    try:
        for kind, request, name in steps:
            if create_or_adopt(clients.sm, kind, request):  # adopted only if the same
                created.append(f"{kind}:{name}")
                say(show, f"created {kind} {name}")
        clients.sm.update_endpoint(**r.start_update)
    except (ClientError, ExistingDiffersError) as exc:
        endpoint = xp.incumbent.endpoint_name
        removed = remove(clients, endpoint, r.config_name, r.candidate_model_name, created)
        raise ExperimentError(
            f"SageMaker refused the experiment on {endpoint}: {exc}. The incumbent still "
            f"serves; removed {', '.join(removed) or 'nothing'}."
        ) from exc
    say(
        show,
        f"updating {xp.incumbent.endpoint_name}: {xp.incumbent.endpoint_config_name} -> "
        f"{r.config_name} (incumbent + split candidate)",
    )
    return created


def serving(record: ExperimentRecord, desc: dict[str, Any] | None) -> bool:
    """Whether the endpoint serves the experiment's config (both variants)."""
    return bool(
        desc
        and desc.get("EndpointStatus") == "InService"
        and desc.get("EndpointConfigName") == record.experiment_config
    )


def remove(
    clients: Clients,
    endpoint_name: str,
    config: str,
    model: str,
    created: list[str] | None = None,
) -> list[str]:
    """Delete the experiment's config and the candidate's model, unless the endpoint
    serves or targets the config; with `created`, only what this run created."""
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    in_use = {desc.get("EndpointConfigName")} if desc else set()
    pending = (desc or {}).get("PendingDeploymentSummary") or {}
    in_use.add(pending.get("EndpointConfigName"))
    removed: list[str] = []
    if config in in_use:
        return removed
    mine = created is None or f"endpoint-config:{config}" in created
    if mine and delete_quietly(clients.sm.delete_endpoint_config, EndpointConfigName=config):
        removed.append(f"endpoint-config:{config}")
    if (created is None or f"model:{model}" in created) and delete_quietly(
        clients.sm.delete_model, ModelName=model
    ):
        removed.append(f"model:{model}")
    return removed


def restore(
    record: ExperimentRecord, clients: Clients, show: bool, timeout_s: float | None
) -> None:
    """UpdateEndpoint back onto the incumbent's config, keeping the incumbent's instances
    (`restore_update`), and wait until it serves alone (nothing to do when it already
    does)."""
    desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
    if desc is None:
        raise ExperimentError(f"endpoint {record.endpoint_name} does not exist any more")
    if desc.get("EndpointConfigName") == record.incumbent_config and not running_experiment(desc):
        return
    if desc.get("EndpointStatus") in IN_PROGRESS:
        settle(record.endpoint_name, clients, show, timeout_s or 3600.0, "to settle")
    clients.sm.update_endpoint(**restore_update(record.endpoint_name, record.incumbent_config))
    say(show, f"restoring {record.endpoint_name} onto the incumbent {record.incumbent_config}")
    result = settle(record.endpoint_name, clients, show, timeout_s or 4200.0, "restoring")
    serving_now = result.description.get("EndpointConfigName")
    if result.status != "InService" or serving_now != record.incumbent_config:
        raise ExperimentError(
            f"restoring {record.endpoint_name} did not finish: it is {result.status} on "
            f"{serving_now} ({result.description.get('FailureReason') or 'no reason given'}); "
            "run the same command again"
        )


def settle(endpoint: str, clients: Clients, show: bool, timeout_s: float, what: str) -> Any:
    """Wait until the endpoint is no longer in an update."""
    return wait_for_endpoint(
        clients.sm,
        endpoint,
        timeout_s=timeout_s,
        progress=show,
        until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
        label=f"waiting for {endpoint} {what}",
    )
