"""A shadow experiment on SageMaker: an InferenceExperiment of type ShadowMode.

Start: CreateModel (the candidate), then CreateInferenceExperiment (both variants, the
candidate sampled at `sampling_percent`); SageMaker creates the two-variant endpoint
config and updates the endpoint, and the experiment goes Creating -> Created -> Starting
-> Running. Once it runs, UpdateInferenceExperiment sets its end (SageMaker's own
backstop, `plan.experiment_requests.schedule_end`). End: StopInferenceExperiment with
`Retain` for the incumbent and `Remove` for the candidate (Completed, or Cancelled for an
abort); the endpoint reverts to its config from before the experiment, and is updated
back onto the incumbent's config should SageMaker have left it on another. The
candidate's model is deleted once the experiment no longer runs. The experiment's record
in SageMaker (its metadata) stays until a later start of the same experiment replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from peagle_deploy.aws import delete_quietly, describe_endpoint_or_none, is_not_found
from peagle_deploy.experiment import split
from peagle_deploy.experiment.common import (
    Clients,
    ExperimentError,
    candidate_model_request,
    say,
)
from peagle_deploy.plan.experiment_requests import (
    stop_inference_experiment,
    update_schedule,
)
from peagle_deploy.records import ExperimentRecord
from peagle_deploy.sdk import waiter
from peagle_deploy.terminal import escaped

if TYPE_CHECKING:
    from peagle_deploy.experiment.plan import ExperimentPlan

TERMINAL = frozenset({"Completed", "Cancelled"})
"""InferenceExperiment states after which nothing runs (botocore's InferenceExperimentStatus)."""


def describe(sm: Any, name: str) -> dict[str, Any] | None:
    """DescribeInferenceExperiment, or None when there is none of that name."""
    try:
        desc = dict(sm.describe_inference_experiment(Name=name))
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    desc.pop("ResponseMetadata", None)
    return desc


def _replace_stale(sm: Any, name: str, endpoint: str) -> None:
    """A finished experiment of the same name (an earlier run of this spec) is deleted
    (its metadata only: DeleteInferenceExperiment deletes no endpoint or variant), so the
    name can be used again; one that still runs is refused."""
    old = describe(sm, name)
    if old is None:
        return
    if old.get("Status") not in TERMINAL:
        raise ExperimentError(
            f"inference experiment {name} is {old.get('Status')} on "
            f"{(old.get('EndpointMetadata') or {}).get('EndpointName')}: end it first "
            f"(`peagle experiment abort {endpoint}`)"
        )
    delete_quietly(sm.delete_inference_experiment, Name=name)


def create(xp: ExperimentPlan, clients: Clients, show: bool) -> list[str]:
    """Create the candidate's model and the InferenceExperiment. Returns what it
    created; on a refusal removes it and raises ExperimentError."""
    from botocore.exceptions import ClientError

    from peagle_deploy.sdk.existing import ExistingDiffersError, create_or_adopt

    r = xp.requests
    assert r.create_inference_experiment is not None and r.experiment_name is not None
    endpoint = xp.incumbent.endpoint_name
    created: list[str] = []
    try:
        request = candidate_model_request(xp, clients)
        if create_or_adopt(clients.sm, "model", request):  # adopted only if the same
            created.append(f"model:{r.candidate_model_name}")
            say(show, f"created model {r.candidate_model_name}")
        _replace_stale(clients.sm, r.experiment_name, endpoint)
        clients.sm.create_inference_experiment(**r.create_inference_experiment)
        created.append(f"inference-experiment:{r.experiment_name}")
    except (ClientError, ExperimentError, ExistingDiffersError) as exc:
        removed = _delete_model(clients, r.candidate_model_name, created)
        raise ExperimentError(
            f"SageMaker refused the shadow experiment on {endpoint}: {exc}. The incumbent "
            f"still serves; removed {', '.join(removed) or 'nothing'}."
        ) from exc
    say(
        show,
        f"created inference experiment {r.experiment_name} on {endpoint}: the candidate "
        f"as a shadow variant sampling {xp.settings.sampling_percent or 100}% of the requests",
    )
    return created


def _delete_model(clients: Clients, model: str, created: list[str] | None) -> list[str]:
    if created is not None and f"model:{model}" not in created:
        return []
    if delete_quietly(clients.sm.delete_model, ModelName=model):
        return [f"model:{model}"]
    return []


State = Literal["pending", "running", "ended"]


def state(record: ExperimentRecord, clients: Clients) -> tuple[State, str, dict[str, Any]]:
    """Where the experiment stands: (pending | running | ended, why, its description)."""
    assert record.inference_experiment is not None
    desc = describe(clients.sm, record.inference_experiment)
    if desc is None:
        return "ended", f"inference experiment {record.inference_experiment} is gone", {}
    status = str(desc.get("Status"))
    if status in TERMINAL:
        return "ended", str(desc.get("StatusReason") or status), desc
    endpoint = desc.get("EndpointMetadata") or {}
    if status == "Running" and endpoint.get("EndpointStatus", "InService") == "InService":
        return "running", status, desc
    return "pending", status, desc


def after_start(record: ExperimentRecord, clients: Clients, started: datetime) -> None:
    """SageMaker's own end of the experiment, after peagle's maximum duration."""
    assert record.inference_experiment is not None
    clients.sm.update_inference_experiment(
        **update_schedule(
            record.inference_experiment, started, record.settings.max_duration_minutes
        )
    )


def wait(
    record: ExperimentRecord,
    clients: Clients,
    *,
    until: Callable[[State], bool],
    timeout_s: float,
    poll_interval_s: float,
    show: bool,
) -> tuple[State, str, dict[str, Any]]:
    """Poll the experiment until `until(state)`; Ctrl-C says how to resume."""
    start = waiter._clock()
    seen = ""
    try:
        while True:
            now, why, desc = state(record, clients)
            if why != seen:
                say(show, f"{record.endpoint_name}: inference experiment {escaped(why)}")
                seen = why
            if until(now):
                return now, why, desc
            if waiter._clock() - start >= timeout_s:
                return now, f"still {why} after {timeout_s:.0f} s", desc
            waiter._sleep(poll_interval_s)
    except KeyboardInterrupt:
        raise waiter.Interrupted(
            record.endpoint_name,
            f"stopped watching the shadow experiment on {record.endpoint_name} ({seen}). "
            "SageMaker carries on; nothing was cancelled or deleted. Resume with "
            f"`peagle experiment start {record.endpoint_name} --stage {record.stage} "
            "--file SPEC` (the same spec: it waits for the experiment instead of starting "
            f"another), or end it with `peagle experiment abort {record.endpoint_name} "
            f"--stage {record.stage}`.",
        ) from None


def stop(
    record: ExperimentRecord,
    clients: Clients,
    *,
    desired: Literal["Completed", "Cancelled"],
    reason: str,
    show: bool,
    timeout_s: float | None,
) -> None:
    """Stop the experiment (the candidate removed, the incumbent retained), wait until it
    stopped, and make sure the endpoint serves the incumbent's config alone."""
    assert record.inference_experiment is not None
    desc = describe(clients.sm, record.inference_experiment)
    if desc is not None and desc.get("Status") not in TERMINAL:
        if desc.get("Status") != "Stopping":
            clients.sm.stop_inference_experiment(
                **stop_inference_experiment(
                    record.inference_experiment,
                    candidate_variant=record.candidate_variant,
                    state=desired,
                    reason=reason,
                )
            )
        say(show, f"stopping inference experiment {record.inference_experiment} ({desired})")
        now, why, _ = wait(
            record,
            clients,
            until=lambda s: s == "ended",
            timeout_s=timeout_s or 3600.0,
            poll_interval_s=2.0,
            show=show,
        )
        if now != "ended":
            raise ExperimentError(
                f"inference experiment {record.inference_experiment} did not stop ({why}); "
                "run the same command again"
            )
    if describe_endpoint_or_none(clients.sm, record.endpoint_name) is not None:
        split.restore(record, clients, show, timeout_s)


def remove(
    clients: Clients, record: ExperimentRecord, created: list[str] | None = None
) -> list[str]:
    """Delete the candidate's model once the experiment no longer runs."""
    assert record.inference_experiment is not None
    desc = describe(clients.sm, record.inference_experiment)
    if desc is not None and desc.get("Status") not in TERMINAL:
        return []
    return _delete_model(clients, record.candidate_model, created)
