"""`start_experiment`: the candidate beside the incumbent, by mode.

The spec is planned (`experiment.plan`: both variants' requests and the design checks)
before any call; the record is written before the first create, so an interrupted start
is resumed by running it again with the same spec, not repeated. Then the candidate's
model and, by mode, a shadow InferenceExperiment (`experiment.shadow`) or a split endpoint
config and UpdateEndpoint (`experiment.split`); it waits until both variants serve. A
failed start leaves the incumbent serving and removes what it created.
"""

from __future__ import annotations

from typing import Any

from peagle_deploy.aws import describe_endpoint_or_none
from peagle_deploy.errors import InputError
from peagle_deploy.experiment import common, scaling, shadow, split
from peagle_deploy.experiment.common import (
    UPDATE_MARGIN_S,
    Clients,
    ExperimentError,
    record_end,
    say,
)
from peagle_deploy.experiment.plan import ExperimentPlan, experiment_plan
from peagle_deploy.experiment.status import ExperimentStatus, new_record, settle_start, waiting_note
from peagle_deploy.plan.experiment_requests import PLACEHOLDER_EXPERIMENT_ROLE_ARN
from peagle_deploy.records import (
    OPEN_STATES,
    ExperimentRecord,
    read_record,
    running_experiment,
    write_record,
)
from peagle_deploy.sdk.waiter import IN_PROGRESS, Interrupted, use_progress, wait_for_endpoint
from peagle_deploy.spec.models import DeploymentSpec


def _experiment_spec(
    spec: DeploymentSpec | None,
    spec_file: str | None,
    endpoint_name: str | None,
    *,
    stage: str | None,
    region: str | None,
    role_arn: str | None,
    boto_session: Any,
) -> DeploymentSpec:
    """The spec with the experiment: given, or the one the stage manifest records; with
    `role_arn` as its execution role when given."""
    from peagle_deploy.spec import load_spec, spec_with

    if spec is not None and spec_file is not None:
        raise InputError("spec", "give either spec= or spec_file=, not both")
    if spec_file is not None:
        overrides = {"stage": stage, "region": region, "execution_role_arn": role_arn}
        spec = load_spec(spec_file, file_field="--file", **overrides)
    elif spec is None:
        spec = _manifest_spec(endpoint_name, stage, region, boto_session)
    if role_arn is not None and spec.execution_role_arn != role_arn:
        spec = spec_with(spec, execution_role_arn=role_arn)
    if spec.experiment is None:
        raise InputError(
            "experiment", "the spec has no experiment block", "see docs/experiments.md"
        )
    return spec


def _manifest_spec(
    endpoint_name: str | None, stage: str | None, region: str | None, boto_session: Any
) -> DeploymentSpec:
    if endpoint_name is None:
        raise InputError("ENDPOINT", "is required without a spec file")
    from peagle_deploy.records import read_manifest

    manifest = read_manifest(
        stage or "dev", endpoint_name, region=region, boto_session=boto_session
    )
    if manifest is None:
        raise InputError(
            "--file",
            f"no spec given and no manifest for {endpoint_name} in stage {stage or 'dev'}",
            "a spec file with an experiment block",
        )
    return manifest.spec


def _check_ready(xp: ExperimentPlan, endpoint_name: str | None, role_flag: str) -> None:
    """What can be refused from the plan alone, before any AWS call."""
    from peagle_deploy.sdk.deploy import check_deployable_role

    check_deployable_role(xp.incumbent)
    inc = xp.incumbent
    if endpoint_name is not None and endpoint_name != inc.endpoint_name:
        raise InputError(
            "ENDPOINT", f"{endpoint_name} is not the spec's endpoint", inc.endpoint_name
        )
    create = xp.requests.create_inference_experiment
    if create is not None and create["RoleArn"] == PLACEHOLDER_EXPERIMENT_ROLE_ARN:
        raise InputError(
            role_flag,
            "is required for a shadow experiment: SageMaker runs it as an InferenceExperiment "
            "and assumes this role to create its endpoint config and update the endpoint",
            "the ARN of a role SageMaker can assume (docs/experiments.md#roles)",
        )


def same_experiment(record: ExperimentRecord, xp: ExperimentPlan, spec: DeploymentSpec) -> bool:
    """Whether an open record is of the experiment `xp` plans, by content: the same spec
    (incumbent, candidate, mode, shares, decision settings) on the same incumbent config,
    whatever state the record reached (a start that a later command saw running)."""

    def content(spec: DeploymentSpec) -> dict[str, Any]:
        return spec.model_dump(mode="json", exclude_none=True)

    return record.incumbent_config == xp.incumbent.endpoint_config_name and content(
        record.spec
    ) == content(spec)


def _check_startable(
    xp: ExperimentPlan,
    the_spec: DeploymentSpec,
    desc: dict[str, Any] | None,
    record: ExperimentRecord | None,
) -> bool:
    """Whether the endpoint can take the experiment; True when the open record is this
    experiment's own (`same_experiment`: an interrupted start to resume, or one that
    runs); ExperimentError when it cannot."""
    name = xp.incumbent.endpoint_name
    if desc is None:
        raise ExperimentError(f"endpoint {name} does not exist: deploy the incumbent first")
    if record is not None and record.state in OPEN_STATES:
        if same_experiment(record, xp, the_spec):
            return True
        raise ExperimentError(
            f"an experiment already runs on {name} (since "
            f"{record.started_at or record.requested_at}): conclude or abort it first"
        )
    why = running_experiment(desc)
    if why:
        raise ExperimentError(f"endpoint {name} is already in an experiment: {why}")
    status = desc.get("EndpointStatus")
    if status != "InService":
        raise ExperimentError(f"endpoint {name} is {status}; an experiment starts on InService")
    serving = desc.get("EndpointConfigName")
    if serving != xp.incumbent.endpoint_config_name:
        raise ExperimentError(
            f"endpoint {name} serves {serving}, not the spec's incumbent "
            f"{xp.incumbent.endpoint_config_name}: deploy the spec (without its experiment "
            "block changing anything else) first"
        )
    return False


def start_experiment(
    endpoint_name: str | None = None,
    *,
    spec: DeploymentSpec | None = None,
    spec_file: str | None = None,
    stage: str | None = None,
    region: str | None = None,
    role_arn: str | None = None,
    experiment_role_arn: str | None = None,
    boto_session: Any = None,
    wait: bool = True,
    timeout_s: float | None = None,
    poll_interval_s: float = 2.0,
    progress: bool | None = None,
    doctor: bool = True,
) -> ExperimentStatus:
    """Put the spec's candidate beside the incumbent that serves `endpoint_name`.

    The spec (or the one the stage manifest records) must be the one the endpoint serves:
    its plan's endpoint config is the endpoint's current one. `role_arn` replaces the
    spec's execution role; `experiment_role_arn` is the role SageMaker assumes to run a
    shadow experiment. InputError before any AWS call for a bad spec; ExperimentError when
    the endpoint is not ready for it. `doctor` runs `peagle doctor`'s read-only checks
    first (the capacity check counts both fleets). Run again with the same spec (after
    an interrupted wait, or once it runs), it continues or reports the same experiment
    instead of starting another. The incumbent keeps the instances it runs now, and its
    autoscaling is held for the test (`experiment.scaling`).
    """
    the_spec = _experiment_spec(
        spec,
        spec_file,
        endpoint_name,
        stage=stage,
        region=region,
        role_arn=role_arn,
        boto_session=boto_session,
    )
    xp = experiment_plan(the_spec, experiment_role_arn=experiment_role_arn)
    _check_ready(xp, endpoint_name, "--experiment-role-arn")
    show = use_progress(progress)
    if doctor:  # read-only; a failing check stops here, before any create call
        from peagle_deploy.doctor import require_healthy
        from peagle_deploy.doctor.coming import ComingRun
        from peagle_deploy.plan import build_plan

        coming = ComingRun("experiment", experiment=xp.requests, candidate=xp.candidate)
        require_healthy(build_plan(the_spec), boto_session=boto_session, coming=coming)
    clients = Clients(xp.incumbent.region, boto_session)
    xp, record, created = _begin(the_spec, xp, clients, experiment_role_arn, show)
    if not wait:
        return ExperimentStatus(record, "Updating", None, note=waiting_note(record))
    limit = timeout_s or float(
        xp.incumbent.model_data_download_timeout_s
        + xp.incumbent.container_startup_health_check_timeout_s
        + UPDATE_MARGIN_S
    )
    return _await_start(
        xp,
        record,
        clients,
        created=created,
        show=show,
        limit=limit,
        poll_interval_s=poll_interval_s,
    )


def _begin(
    the_spec: DeploymentSpec,
    xp: ExperimentPlan,
    clients: Clients,
    experiment_role_arn: str | None,
    show: bool,
) -> tuple[ExperimentPlan, ExperimentRecord, list[str]]:
    """A new start (record, scaling held, creates) or the resumed one; returns the plan
    on the incumbent's current instances, the record and what this run created."""
    ssm = clients.client("ssm")
    name = xp.incumbent.endpoint_name
    stored = read_record(ssm, ExperimentRecord, xp.incumbent.spec.stage, name)
    desc = describe_endpoint_or_none(clients.sm, name)
    if _check_startable(xp, the_spec, desc, stored):
        assert stored is not None
        xp = _on_instances(the_spec, xp, experiment_role_arn, stored.incumbent_instances)
        say(show, f"{name}: resuming the start requested at {stored.requested_at}")
        if stored.state == "starting":  # a stop before the hold: held now (a no-op after)
            scaling.hold(stored, clients, show)
        created = [] if _already_sent(xp, clients, desc) else _create(xp, stored, clients, show)
        return xp, stored, created
    xp = _on_instances(the_spec, xp, experiment_role_arn, scaling.current_instances(desc))
    record = new_record(xp, the_spec)
    record.incumbent_instances = xp.incumbent_instances
    record.scaling_suspended_before = scaling.read_suspension(clients, name)
    write_record(ssm, record, tags=xp.incumbent.tags)  # first: a stop can always resume
    try:
        scaling.hold(record, clients, show)
    except ExperimentError as exc:
        _undo_hold(record, clients, show, str(exc))
        raise
    except KeyboardInterrupt:
        raise Interrupted(name, _resume_hint(record, "starting")) from None
    return xp, record, _create(xp, record, clients, show)


def _on_instances(
    the_spec: DeploymentSpec,
    xp: ExperimentPlan,
    experiment_role_arn: str | None,
    instances: int | None,
) -> ExperimentPlan:
    """The plan on the incumbent's current instances (re-planned, with the design checks,
    when they are not the spec's initial count)."""
    if instances is None or instances == xp.incumbent_instances:
        return xp
    return experiment_plan(
        the_spec, experiment_role_arn=experiment_role_arn, incumbent_instances=instances
    )


def _undo_hold(record: ExperimentRecord, clients: Clients, show: bool, why: str) -> None:
    """A start that did not get both variants serving: the incumbent's instances and
    scaling given back, then the start recorded as failed. Should the giving back fail,
    the record stays open (it says what to restore) and `abort` finishes it."""
    try:
        scaling.give_back(record, clients, show, None)
    except ExperimentError as exc:
        raise ExperimentError(
            f"the experiment on {record.endpoint_name} did not start ({why}), and {exc}; "
            f"finish with `peagle experiment abort {record.endpoint_name} --stage "
            f"{record.stage}`"
        ) from exc
    record_end(record, clients, "failed", {"action": "failed", "reason": why})


def _create(
    xp: ExperimentPlan, record: ExperimentRecord, clients: Clients, show: bool
) -> list[str]:
    """The mode's create calls; a refusal is recorded as a failed start."""
    try:
        with clients.secret_values:  # a refusal may quote the candidate's environment
            if xp.settings.mode == "shadow":
                return shadow.create(xp, clients, show)
            return split.create(xp, clients, show)
    except ExperimentError as exc:
        _undo_hold(record, clients, False, str(exc))
        raise
    except KeyboardInterrupt:
        raise Interrupted(record.endpoint_name, _resume_hint(record, "creating")) from None


def _already_sent(xp: ExperimentPlan, clients: Clients, desc: dict[str, Any] | None) -> bool:
    """Whether an interrupted start got as far as its last create call (SageMaker has the
    experiment, or the endpoint serves or moves to the split's config)."""
    if xp.experiment_name is not None:
        found = shadow.describe(clients.sm, xp.experiment_name)
        return found is not None and found.get("Status") not in shadow.TERMINAL
    pending = (desc or {}).get("PendingDeploymentSummary") or {}
    targets = {(desc or {}).get("EndpointConfigName"), pending.get("EndpointConfigName")}
    return xp.config_name in targets


def _resume_hint(record: ExperimentRecord, when: str) -> str:
    return (
        f"interrupted while {when} the experiment on {record.endpoint_name}. Resume with "
        f"`peagle experiment start {record.endpoint_name} --stage {record.stage} --file SPEC` "
        "(the same spec: it continues this start), or end it with `peagle experiment "
        f"abort {record.endpoint_name} --stage {record.stage}`."
    )


def _await_start(
    xp: ExperimentPlan,
    record: ExperimentRecord,
    clients: Clients,
    *,
    created: list[str],
    show: bool,
    limit: float,
    poll_interval_s: float,
) -> ExperimentStatus:
    """Wait until both variants serve; a start that fails is undone and recorded."""
    try:
        if record.inference_experiment is not None:
            now, why, _ = shadow.wait(
                record,
                clients,
                until=lambda s: s != "pending",
                timeout_s=limit,
                poll_interval_s=poll_interval_s,
                show=show,
            )
            desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
            ok = now == "running"
        else:
            result = wait_for_endpoint(
                clients.sm,
                record.endpoint_name,
                timeout_s=limit,
                poll_interval_s=poll_interval_s,
                progress=show,
                until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
                label=f"starting the experiment on {record.endpoint_name}",
            )
            desc, ok = result.description, split.serving(record, result.description)
            why = str(desc.get("FailureReason") or desc.get("EndpointStatus"))
    except KeyboardInterrupt:
        raise Interrupted(record.endpoint_name, _resume_hint(record, "starting")) from None
    if not ok:
        _failed_start(xp, record, clients, created=created, why=why, show=show)
    settle_start(record, desc, clients, at=common.now())
    say(show, f"[green]{record.endpoint_name}: experiment running[/] ({xp.settings.mode})")
    return ExperimentStatus(record, "InService", None, note=_running_note(record))


def _running_note(record: ExperimentRecord) -> str:
    return (
        "both variants serve; the comparison reads the endpoint's live traffic (for a trial: "
        f"`peagle invoke {record.endpoint_name} PROMPT --repeat 50`), then `peagle experiment "
        f"status {record.endpoint_name} --stage {record.stage}`"
    )


def _failed_start(
    xp: ExperimentPlan,
    record: ExperimentRecord,
    clients: Clients,
    *,
    created: list[str],
    why: str,
    show: bool,
) -> None:
    """Undo a start that did not reach both variants serving, record it, raise."""
    if record.inference_experiment is not None:
        shadow.stop(record, clients, desired="Cancelled", reason=why, show=show, timeout_s=None)
        removed = shadow.remove(clients, record, created)
    else:
        removed = split.remove(
            clients, record.endpoint_name, record.experiment_config, record.candidate_model, created
        )
    _undo_hold(record, clients, show, why)
    raise ExperimentError(
        f"the experiment on {record.endpoint_name} did not start ({why}); it still serves "
        f"the incumbent. Removed {', '.join(removed) or 'nothing'}."
    )
