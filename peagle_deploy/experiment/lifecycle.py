"""Start, read, conclude and abort an experiment on a live endpoint (the SDK functions).

- `start_experiment`: the candidate's model, then by mode a shadow InferenceExperiment
  (`experiment.shadow`) or a split endpoint config and UpdateEndpoint
  (`experiment.split`); waits until both variants serve. A start interrupted while it
  waits is resumed by running it again with the same spec.
- `experiment_status`: reads only: the endpoint (and its InferenceExperiment), the
  variants' observations (`experiment.fetch`), then the analysis.
- `conclude_experiment`: the decision rule; the endpoint back on the incumbent alone
  (StopInferenceExperiment, or UpdateEndpoint for a split), then, for a winning
  candidate, an ordinary `deploy_peagle` (blue/green with the stage's rollout) that
  records it in the stage manifest.
- `abort_experiment`: the endpoint back on the incumbent alone; the candidate removed.
- `watch_experiment`: status every interval; a guardrail breach aborts, a decision concludes.

A failed start leaves the incumbent serving and removes what it created. The record
(`peagle_deploy.records`, kind `experiment`) says where an experiment stands; the
endpoint's own variants are checked against it at every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from peagle_deploy.aws import describe_endpoint_or_none
from peagle_deploy.errors import InputError
from peagle_deploy.experiment import shadow, split
from peagle_deploy.experiment.analysis import Analysis, analyse
from peagle_deploy.experiment.common import UPDATE_MARGIN_S, Clients, ExperimentError, say
from peagle_deploy.experiment.fetch import Observed, fetch_observations
from peagle_deploy.experiment.observations import VariantSample
from peagle_deploy.experiment.plan import (
    ExperimentPlan,
    candidate_spec,
    experiment_plan,
    observation_source,
)
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

__all__ = [
    "ExperimentError",
    "ExperimentOutcome",
    "ExperimentStatus",
    "abort_experiment",
    "conclude_experiment",
    "experiment_status",
    "start_experiment",
    "watch_experiment",
]

CFN_STACK_TAG = "aws:cloudformation:stack-name"

Action = Literal["promoted", "kept", "aborted"]


def _now() -> datetime:
    return datetime.now(UTC)


# --- status -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ExperimentStatus:
    """Where an experiment stands, and (once both variants serve) what it shows."""

    record: ExperimentRecord
    endpoint_status: str
    analysis: Analysis | None
    observations: list[VariantSample] = field(default_factory=list, repr=False)
    read_at: datetime = field(default_factory=_now)
    note: str | None = None
    """Why there is nothing to compare yet, and what to do about it."""

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            "endpoint_name": r.endpoint_name,
            "stage": r.stage,
            "state": r.state,
            "endpoint_status": self.endpoint_status,
            "mode": r.settings.mode,
            "variants": {"incumbent": r.incumbent_variant, "candidate": r.candidate_variant},
            "inference_experiment": r.inference_experiment,
            "started_at": r.started_at.isoformat() if r.started_at else None,
            "ended_at": r.ended_at.isoformat() if r.ended_at else None,
            "read_at": self.read_at.isoformat(),
            "analysis": self.analysis.to_json() if self.analysis else None,
            "note": self.note,
            "outcome": r.outcome,
        }


def _record_or_refuse(stage: str, endpoint_name: str, clients: Clients) -> ExperimentRecord:
    record = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    if record is None:
        raise ExperimentError(
            f"no experiment on {endpoint_name} in stage {stage} (start one with "
            f"`peagle experiment start {endpoint_name} --file SPEC`)"
        )
    return record


def _serving_since(
    record: ExperimentRecord, clients: Clients, desc: dict[str, Any] | None
) -> datetime | None:
    """When both variants started serving (None while they do not)."""
    if not desc or desc.get("EndpointStatus") != "InService":
        return None
    if record.inference_experiment is not None:
        now, _, ie = shadow.state(record, clients)
        if now != "running" or not running_experiment(desc):
            return None
        config = (ie.get("EndpointMetadata") or {}).get("EndpointConfigName")
        record.experiment_config = str(config or desc.get("EndpointConfigName") or "")
    elif not split.serving(record, desc):
        return None
    started = desc.get("LastModifiedTime")
    return started if isinstance(started, datetime) else _now()


def _settle_start(
    record: ExperimentRecord,
    desc: dict[str, Any] | None,
    clients: Clients,
    at: datetime | None = None,
) -> None:
    """Once both variants serve, the experiment runs: from `at` (a start that saw it),
    else from when the endpoint last changed (a start that did not wait)."""
    if record.state != "starting":
        return
    started = _serving_since(record, clients, desc)
    if started is None:
        return
    started = at or started
    record.started_at = started
    record.state = "running"
    if record.inference_experiment is not None:
        shadow.after_start(record, clients, started)
    write_record(clients.client("ssm"), record)


def _analyse(
    record: ExperimentRecord, clients: Clients, *, final: bool, now: datetime
) -> tuple[Analysis, Observed]:
    assert record.started_at is not None
    seen = fetch_observations(
        observation_source(record.spec.image_uri or ""),
        clients,
        record.endpoint_name,
        (record.incumbent_variant, record.candidate_variant),
        start=record.started_at,
        end=now,
    )
    analysis = analyse(
        seen.samples,
        experiment=record.settings,
        incumbent=record.incumbent_variant,
        candidate=record.candidate_variant,
        started_ms=int(record.started_at.timestamp() * 1000),
        now_ms=int(now.timestamp() * 1000),
        final=final,
    )
    return analysis, seen


def _record_from_spec(
    spec: DeploymentSpec, endpoint_name: str, desc: dict[str, Any] | None, clients: Clients
) -> ExperimentRecord:
    """The record of an experiment some other tool started (a CDK stage carrying it):
    from its spec and the endpoint; it runs from when both variants served. Not stored."""
    xp = experiment_plan(spec)
    inc = xp.incumbent
    if inc.endpoint_name != endpoint_name:
        raise InputError(
            "ENDPOINT", f"{endpoint_name} is not the spec's endpoint", inc.endpoint_name
        )
    record = _new_record(xp, spec, state="starting")
    started = _serving_since(record, clients, desc)
    if started is not None:
        record.state, record.started_at, record.requested_at = "running", started, started
    return record


def experiment_status(
    endpoint_name: str,
    *,
    stage: str = "dev",
    region: str | None = None,
    boto_session: Any = None,
    final: bool = False,
    now: datetime | None = None,
    spec: DeploymentSpec | None = None,
) -> ExperimentStatus:
    """Read the experiment on `endpoint_name` (no change to the endpoint).

    Without a stored record (an experiment a CDK stage carries), `spec` (the stage's spec,
    with its experiment block) says what runs.
    """
    clients = Clients(region or _region(boto_session), boto_session)
    stored = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    if stored is None and spec is not None and spec.experiment is not None:
        record = _record_from_spec(spec, endpoint_name, desc, clients)
    else:
        record = stored if stored is not None else _record_or_refuse(stage, endpoint_name, clients)
        _settle_start(record, desc, clients)
    status = str(desc.get("EndpointStatus")) if desc else "absent"
    if record.state != "running" or record.started_at is None:
        return ExperimentStatus(record, status, None, note=_waiting_note(record))
    at = now or _now()
    analysis, seen = _analyse(record, clients, final=final, now=at)
    note = (
        _ended_note(record, clients)
        or _observability_note(record, desc)
        or _traffic_note(record, analysis, seen)
    )
    return ExperimentStatus(record, status, analysis, seen.served, at, note)


def _observability_note(record: ExperimentRecord, desc: dict[str, Any] | None) -> str | None:
    """An image read through detailed observability on a config that has it off (the
    endpoint says so in its MetricsConfig): nothing to compare will come."""
    if observation_source(record.spec.image_uri or "") != "detailed":
        return None
    metrics = (desc or {}).get("MetricsConfig") or {}
    if metrics.get("EnableDetailedObservability") is not False:
        return None
    return (
        f"detailed observability is off on {record.endpoint_name}'s current config "
        f"({(desc or {}).get('EndpointConfigName')}): the variants' vLLM metrics are not "
        "published, so this experiment cannot compare them; abort it"
    )


def _ended_note(record: ExperimentRecord, clients: Clients) -> str | None:
    """A shadow experiment SageMaker ended on its own (its schedule, a failure)."""
    if record.inference_experiment is None:
        return None
    now, why, _ = shadow.state(record, clients)
    if now != "ended":
        return None
    return (
        f"SageMaker ended the inference experiment ({why}); the incumbent serves alone. "
        f"End it here with `peagle experiment conclude {record.endpoint_name} --stage "
        f"{record.stage} --force` or `peagle experiment abort {record.endpoint_name} "
        f"--stage {record.stage}`"
    )


def _waiting_note(record: ExperimentRecord) -> str | None:
    if record.state == "starting":
        return (
            "the variants are not both serving yet; read again with `peagle experiment "
            f"status {record.endpoint_name} --stage {record.stage}`"
        )
    return None


def _traffic_note(record: ExperimentRecord, analysis: Analysis, seen: Observed) -> str | None:
    """What to do when a variant has seen no request, or no observation came back."""
    inc, cand = analysis.incumbent, analysis.candidate
    if inc.invocations + cand.invocations == 0:
        return (
            "no requests yet: the experiment compares the endpoint's live traffic; send "
            f"some (for a trial: `peagle invoke {record.endpoint_name} PROMPT --repeat 50`)"
        )
    if not seen.served:
        return seen.missing or "the containers have reported no finished request yet"
    return None


def _region(boto_session: Any) -> str:
    if boto_session is not None and getattr(boto_session, "region_name", None):
        return str(boto_session.region_name)
    from peagle_deploy.aws import make_session

    return str(make_session(None, None).region_name or "us-east-1")


# --- start ------------------------------------------------------------------------------
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


def _new_record(
    xp: ExperimentPlan, spec: DeploymentSpec, *, state: Literal["starting"] = "starting"
) -> ExperimentRecord:
    inc = xp.incumbent
    return ExperimentRecord(
        endpoint_name=inc.endpoint_name,
        stage=inc.spec.stage,
        region=inc.region,
        state=state,
        spec=spec,
        incumbent_variant=xp.incumbent_variant,
        candidate_variant=xp.candidate_variant,
        incumbent_config=inc.endpoint_config_name,
        incumbent_model=inc.model_name,
        candidate_model=xp.candidate_model_name,
        experiment_config=xp.config_name or "",
        inference_experiment=xp.experiment_name,
        requested_at=_now(),
    )


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


def _check_startable(
    xp: ExperimentPlan, desc: dict[str, Any] | None, record: ExperimentRecord | None
) -> bool:
    """Whether the endpoint can take the experiment; True when this is a start to resume
    (an interrupted start of the same experiment); ExperimentError when it cannot."""
    name = xp.incumbent.endpoint_name
    if desc is None:
        raise ExperimentError(f"endpoint {name} does not exist: deploy the incumbent first")
    if record is not None and record.state in OPEN_STATES:
        if record.state == "starting" and record.candidate_model == xp.candidate_model_name:
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
    first (the capacity check counts both fleets). Run again after an interrupted wait,
    it waits for the same experiment instead of starting another.
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
        from peagle_deploy.plan import build_plan

        require_healthy(build_plan(the_spec), boto_session=boto_session)
    clients = Clients(xp.incumbent.region, boto_session)
    ssm = clients.client("ssm")
    stored = read_record(ssm, ExperimentRecord, xp.incumbent.spec.stage, xp.incumbent.endpoint_name)
    desc = describe_endpoint_or_none(clients.sm, xp.incumbent.endpoint_name)
    resuming = _check_startable(xp, desc, stored)
    record = stored if resuming and stored is not None else _new_record(xp, the_spec)
    if not resuming:
        write_record(ssm, record, tags=xp.incumbent.tags)
        created = _create(xp, record, clients, show)
    else:
        say(show, f"{record.endpoint_name}: resuming the start requested at {record.requested_at}")
        created = [] if _already_sent(xp, clients, desc) else _create(xp, record, clients, show)
    if not wait:
        return ExperimentStatus(record, "Updating", None, note=_waiting_note(record))
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
        _record_end(record, clients, "failed", {"action": "failed", "reason": str(exc)})
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
    _settle_start(record, desc, clients, at=_now())
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
    _record_end(record, clients, "failed", {"action": "failed", "reason": why})
    raise ExperimentError(
        f"the experiment on {record.endpoint_name} did not start ({why}); it still serves "
        f"the incumbent. Removed {', '.join(removed) or 'nothing'}."
    )


def _record_end(
    record: ExperimentRecord,
    clients: Clients,
    state: Literal["concluded", "aborted", "failed"],
    outcome: dict[str, Any],
) -> None:
    record.state = state
    record.ended_at = _now()
    record.outcome = outcome
    write_record(clients.client("ssm"), record)


# --- ending -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ExperimentOutcome:
    """How an experiment ended."""

    endpoint_name: str
    action: Action
    reason: str
    decision: dict[str, Any] | None
    removed: list[str]
    manifest_parameter: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint_name": self.endpoint_name,
            "action": self.action,
            "reason": self.reason,
            "decision": self.decision,
            "removed": self.removed,
            "manifest_parameter": self.manifest_parameter,
        }


def _refuse_cloudformation(clients: Clients, record: ExperimentRecord) -> None:
    desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
    if desc is None:
        return
    tags = clients.sm.list_tags(ResourceArn=desc["EndpointArn"]).get("Tags", [])
    stack = next((t["Value"] for t in tags if t.get("Key") == CFN_STACK_TAG), None)
    if stack:
        raise ExperimentError(
            f"{record.endpoint_name} belongs to CloudFormation stack {stack}: end the "
            "experiment there (remove `experiment:` from the stage's spec, and for a promotion "
            "put the candidate's settings in `speculative:`), then `npx cdk deploy`"
        )


def _end(
    record: ExperimentRecord,
    clients: Clients,
    *,
    action: Action,
    reason: str,
    decision: dict[str, Any] | None,
    show: bool,
    timeout_s: float | None,
) -> list[str]:
    """The endpoint back on the incumbent alone, the candidate removed, the end recorded."""
    if record.inference_experiment is not None:
        desired: Literal["Completed", "Cancelled"] = (
            "Cancelled" if action == "aborted" else "Completed"
        )
        shadow.stop(record, clients, desired=desired, reason=reason, show=show, timeout_s=timeout_s)
        removed = shadow.remove(clients, record)
    else:
        split.restore(record, clients, show, timeout_s)
        removed = split.remove(
            clients, record.endpoint_name, record.experiment_config, record.candidate_model
        )
    state: Literal["concluded", "aborted"] = "aborted" if action == "aborted" else "concluded"
    _record_end(record, clients, state, {"action": action, "reason": reason, "decision": decision})
    return removed


def _note_in_manifest(record: ExperimentRecord, clients: Clients) -> str | None:
    from peagle_deploy.records import DeploymentManifest, RecordError

    ssm = clients.client("ssm")
    try:
        manifest = read_record(ssm, DeploymentManifest, record.stage, record.endpoint_name)
    except RecordError:
        return None
    if manifest is None:
        return None
    note = {
        "candidate": record.settings.candidate.model_dump(mode="json", exclude_none=True),
        "mode": record.settings.mode,
        "started_at": record.started_at.isoformat() if record.started_at else None,
        "ended_at": record.ended_at.isoformat() if record.ended_at else None,
        **(record.outcome or {}),
    }
    return write_record(ssm, manifest.model_copy(update={"experiment": note}))


def abort_experiment(
    endpoint_name: str,
    *,
    stage: str = "dev",
    region: str | None = None,
    boto_session: Any = None,
    reason: str = "aborted by the operator",
    progress: bool | None = None,
    timeout_s: float | None = None,
    decision: dict[str, Any] | None = None,
) -> ExperimentOutcome:
    """Restore the incumbent, remove the candidate, record why."""
    show = use_progress(progress)
    clients = Clients(region or _region(boto_session), boto_session)
    record = _record_or_refuse(stage, endpoint_name, clients)
    if record.state not in OPEN_STATES:
        raise ExperimentError(f"the experiment on {endpoint_name} already ended ({record.state})")
    _refuse_cloudformation(clients, record)
    removed = _end(
        record,
        clients,
        action="aborted",
        reason=reason,
        decision=decision,
        show=show,
        timeout_s=timeout_s,
    )
    parameter = _note_in_manifest(record, clients)
    say(show, f"[yellow]{endpoint_name}: experiment aborted[/] ({reason}); the incumbent serves")
    return ExperimentOutcome(endpoint_name, "aborted", reason, decision, removed, parameter)


def conclude_experiment(
    endpoint_name: str,
    *,
    stage: str = "dev",
    region: str | None = None,
    boto_session: Any = None,
    force: bool = False,
    promote: bool = True,
    progress: bool | None = None,
    timeout_s: float | None = None,
) -> ExperimentOutcome:
    """Apply the decision rule now and end the experiment.

    A winning candidate is promoted (`promote=False` keeps the incumbent anyway): the
    endpoint goes back to the incumbent alone, then `deploy_peagle` rolls the candidate's
    spec out blue/green with the stage's rollout and records it in the stage manifest. No
    winner, or a winning incumbent, keeps the incumbent. Before the experiment's minimums
    it refuses, unless `force` (which keeps the incumbent).
    """
    status = experiment_status(
        endpoint_name, stage=stage, region=region, boto_session=boto_session, final=True
    )
    record, analysis = status.record, status.analysis
    if record.state not in OPEN_STATES:
        raise ExperimentError(f"the experiment on {endpoint_name} already ended ({record.state})")
    if analysis is None:
        raise ExperimentError(
            f"the experiment on {endpoint_name} has not started serving yet "
            f"({status.endpoint_status}); wait, or end it with `peagle experiment abort "
            f"{endpoint_name} --stage {record.stage}`"
        )
    if analysis.breaches:
        return abort_experiment(
            endpoint_name,
            stage=stage,
            region=region,
            boto_session=boto_session,
            reason=_guardrail_reason(analysis),
            progress=progress,
            timeout_s=timeout_s,
            decision=analysis.to_json(),
        )
    if analysis.decision.missing and not force:
        raise ExperimentError(
            f"too early to conclude the experiment on {endpoint_name}: it needs "
            f"{', '.join(analysis.decision.missing)}. Wait (`peagle experiment watch "
            f"{endpoint_name} --stage {record.stage}`), or end it now keeping the incumbent "
            f"(`peagle experiment conclude {endpoint_name} --stage {record.stage} --force`)"
        )
    return _conclude(
        record, analysis, boto_session, promote=promote, progress=progress, timeout_s=timeout_s
    )


def _conclude(
    record: ExperimentRecord,
    analysis: Analysis,
    boto_session: Any,
    *,
    promote: bool,
    progress: bool | None,
    timeout_s: float | None,
) -> ExperimentOutcome:
    """End a decided experiment; deploy a winning candidate."""
    show = use_progress(progress)
    clients = Clients(record.region, boto_session)
    _refuse_cloudformation(clients, record)
    decision, summary = analysis.decision, analysis.to_json()
    winner = decision.winner
    action: Action = "promoted" if winner == "candidate" and promote else "kept"
    reason = (
        decision.reason
        if action == "promoted" or winner != "candidate"
        else (decision.reason + "; promotion declined (promote=False)")
    )
    removed = _end(
        record,
        clients,
        action=action,
        reason=reason,
        decision=summary,
        show=show,
        timeout_s=timeout_s,
    )
    name = record.endpoint_name
    if action == "promoted":
        from peagle_deploy.sdk.deploy import deploy_peagle

        say(show, f"promoting the candidate on {name} (blue/green)")
        deploy_peagle(
            spec=candidate_spec(record.spec),
            boto_session=boto_session,
            progress=progress,
            deployed_by=f"peagle experiment conclude {name}",
        )
    parameter = _note_in_manifest(record, clients)
    say(show, f"[green]{name}: experiment concluded[/]: {action} ({reason})")
    return ExperimentOutcome(name, action, reason, summary, removed, parameter)


def _guardrail_reason(analysis: Analysis) -> str:
    return "guardrail: " + "; ".join(b.detail for b in analysis.breaches)


def watch_experiment(
    endpoint_name: str,
    *,
    stage: str = "dev",
    region: str | None = None,
    boto_session: Any = None,
    interval_s: float = 60.0,
    act: bool = True,
    progress: bool | None = None,
    on_status: Callable[[ExperimentStatus], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ExperimentOutcome | ExperimentStatus:
    """Read the experiment every `interval_s`: a guardrail breach aborts it, a decision
    (or the maximum duration) concludes it. With `act=False`, stop at the first of these
    and return the status instead of acting."""
    where = {"stage": stage, "region": region, "boto_session": boto_session}
    while True:
        status = experiment_status(endpoint_name, **where)
        if on_status is not None:
            on_status(status)
        analysis = status.analysis
        if status.record.state not in OPEN_STATES:
            return status
        if analysis is not None and (analysis.breaches or analysis.decision.verdict != "running"):
            if not act:
                return status
            if analysis.breaches:
                return abort_experiment(
                    endpoint_name,
                    **where,
                    reason=_guardrail_reason(analysis),
                    progress=progress,
                    decision=analysis.to_json(),
                )
            return conclude_experiment(endpoint_name, **where, progress=progress)
        sleep(interval_s)
