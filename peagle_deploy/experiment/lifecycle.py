"""Start, read, conclude and abort an experiment on a live endpoint (the SDK functions).

- `start_experiment`: CreateModel (the candidate), CreateEndpointConfig (both variants),
  UpdateEndpoint onto it; waits until both variants serve.
- `experiment_status`: reads only: DescribeEndpoint, the variants' metric lines (Logs) and
  invocation metrics (CloudWatch), then the analysis.
- `conclude_experiment`: the decision rule; UpdateEndpoint back onto the incumbent's config,
  then, for a winning candidate, an ordinary `deploy_peagle` (blue/green with the stage's
  rollout) that records it in the stage manifest.
- `abort_experiment`: UpdateEndpoint back onto the incumbent's config; removes the
  candidate's model and config.
- `watch_experiment`: status every interval; a guardrail breach aborts, a decision concludes.

Every transition is a plain UpdateEndpoint (see `experiment.plan` for why), which SageMaker
performs on a new fleet with no availability loss; a failed start leaves the incumbent
serving and removes what it created. The record (`peagle_deploy.records`, kind
`experiment`) says where an experiment stands; the endpoint's own variants are checked
against it at every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from peagle_deploy.aws import delete_quietly, describe_endpoint_or_none, make_client
from peagle_deploy.errors import DeployError, InputError
from peagle_deploy.experiment.analysis import Analysis, analyse
from peagle_deploy.experiment.fetch import fetch_counts, fetch_lines
from peagle_deploy.experiment.observations import LineObservation
from peagle_deploy.experiment.plan import ExperimentPlan, candidate_spec, experiment_plan
from peagle_deploy.records import (
    OPEN_STATES,
    ExperimentRecord,
    read_record,
    running_experiment,
    write_record,
)
from peagle_deploy.redaction import SecretValues
from peagle_deploy.sdk.waiter import IN_PROGRESS, use_progress, wait_for_endpoint
from peagle_deploy.spec.models import DeploymentSpec

UPDATE_MARGIN_S = 600
CFN_STACK_TAG = "aws:cloudformation:stack-name"

Action = Literal["promoted", "kept", "aborted"]


class ExperimentError(DeployError):
    """An experiment step SageMaker refused, or one the endpoint's state does not allow."""


@dataclass
class _Clients:
    region: str
    session: Any
    sm: Any = field(init=False)

    def __post_init__(self) -> None:
        self.sm = make_client("sagemaker", region=self.region, boto_session=self.session)

    def client(self, service: str) -> Any:
        return make_client(service, region=self.region, boto_session=self.session)


def _now() -> datetime:
    return datetime.now(UTC)


def _say(progress: bool, text: str) -> None:
    if progress:
        from peagle_deploy.terminal import plain_console

        plain_console(stderr=True).print(text, highlight=False)


# --- status -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ExperimentStatus:
    """Where an experiment stands, and (once both variants serve) what it shows."""

    record: ExperimentRecord
    endpoint_status: str
    analysis: Analysis | None
    observations: list[LineObservation] = field(default_factory=list, repr=False)
    read_at: datetime = field(default_factory=_now)

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            "endpoint_name": r.endpoint_name,
            "stage": r.stage,
            "state": r.state,
            "endpoint_status": self.endpoint_status,
            "mode": r.settings.mode,
            "variants": {"incumbent": r.incumbent_variant, "candidate": r.candidate_variant},
            "started_at": r.started_at.isoformat() if r.started_at else None,
            "ended_at": r.ended_at.isoformat() if r.ended_at else None,
            "read_at": self.read_at.isoformat(),
            "analysis": self.analysis.to_json() if self.analysis else None,
            "outcome": r.outcome,
        }


def _record_or_refuse(stage: str, endpoint_name: str, clients: _Clients) -> ExperimentRecord:
    record = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    if record is None:
        raise ExperimentError(
            f"no experiment on {endpoint_name} in stage {stage} (start one with "
            f"`peagle experiment start {endpoint_name} --file SPEC`)"
        )
    return record


def _settle_start(record: ExperimentRecord, desc: dict[str, Any] | None, ssm: Any) -> None:
    """A start that did not wait: once the endpoint serves the experiment's config, the
    experiment runs from the moment it did."""
    if record.state != "starting" or not desc:
        return
    if desc.get("EndpointStatus") == "InService" and (
        desc.get("EndpointConfigName") == record.experiment_config
    ):
        started = desc.get("LastModifiedTime")
        record.started_at = started if isinstance(started, datetime) else _now()
        record.state = "running"
        write_record(ssm, record)


def _analyse(
    record: ExperimentRecord, clients: _Clients, *, final: bool, now: datetime
) -> tuple[Analysis, list[LineObservation]]:
    assert record.started_at is not None
    start_ms = int(record.started_at.timestamp() * 1000)
    now_ms = int(now.timestamp() * 1000)
    lines = fetch_lines(
        clients.client("logs"), record.endpoint_name, start_ms=start_ms, end_ms=now_ms
    )
    variants = (record.incumbent_variant, record.candidate_variant)
    cw = clients.client("cloudwatch")
    counts = fetch_counts(cw, record.endpoint_name, variants, start=record.started_at, end=now)
    window_s = record.settings.guardrails.window_minutes * 60
    recent_start = max(record.started_at.timestamp(), now.timestamp() - window_s)
    recent = fetch_counts(
        cw,
        record.endpoint_name,
        variants,
        start=datetime.fromtimestamp(recent_start, UTC),
        end=now,
    )
    analysis = analyse(
        lines,
        counts,
        recent,
        experiment=record.settings,
        incumbent=record.incumbent_variant,
        candidate=record.candidate_variant,
        started_ms=start_ms,
        now_ms=now_ms,
        final=final,
    )
    return analysis, lines


def _record_from_spec(
    spec: DeploymentSpec, endpoint_name: str, desc: dict[str, Any] | None
) -> ExperimentRecord:
    """The record of an experiment some other tool started (a CDK stage carrying it):
    from its spec and the endpoint; it runs from when the endpoint last became InService
    on the experiment's config. Not stored."""
    xp = experiment_plan(spec)
    inc = xp.incumbent
    if inc.endpoint_name != endpoint_name:
        raise InputError(
            "ENDPOINT", f"{endpoint_name} is not the spec's endpoint", inc.endpoint_name
        )
    seen = desc or {}
    serving = (
        seen.get("EndpointConfigName") == xp.config_name
        and seen.get("EndpointStatus") == "InService"
    )
    started = seen.get("LastModifiedTime") if serving else None
    return ExperimentRecord(
        endpoint_name=endpoint_name,
        stage=inc.spec.stage,
        region=inc.region,
        state="running" if serving else "starting",
        spec=spec,
        incumbent_variant=xp.incumbent_variant,
        candidate_variant=xp.candidate_variant,
        incumbent_config=inc.endpoint_config_name,
        incumbent_model=inc.model_name,
        candidate_model=xp.candidate_model_name,
        experiment_config=xp.config_name,
        requested_at=started if isinstance(started, datetime) else _now(),
        started_at=started if isinstance(started, datetime) else None,
    )


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
    clients = _Clients(region or _region(boto_session), boto_session)
    stored = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    if stored is None and spec is not None and spec.experiment is not None:
        record = _record_from_spec(spec, endpoint_name, desc)
    else:
        record = stored if stored is not None else _record_or_refuse(stage, endpoint_name, clients)
        _settle_start(record, desc, clients.client("ssm"))
    status = str(desc.get("EndpointStatus")) if desc else "absent"
    if record.state != "running" or record.started_at is None:
        return ExperimentStatus(record, status, None)
    at = now or _now()
    analysis, lines = _analyse(record, clients, final=final, now=at)
    return ExperimentStatus(record, status, analysis, lines, at)


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
    boto_session: Any,
) -> DeploymentSpec:
    """The spec with the experiment: given, or the one the stage manifest records."""
    from peagle_deploy.spec import load_spec

    if spec is not None and spec_file is not None:
        raise InputError("spec", "give either spec= or spec_file=, not both")
    if spec_file is not None:
        overrides = {"stage": stage, "region": region}
        spec = load_spec(spec_file, file_field="--file", **overrides)
    if spec is None:
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
        spec = manifest.spec
    if spec.experiment is None:
        raise InputError(
            "experiment", "the spec has no experiment block", "see docs/experiments.md"
        )
    return spec


def start_experiment(
    endpoint_name: str | None = None,
    *,
    spec: DeploymentSpec | None = None,
    spec_file: str | None = None,
    stage: str | None = None,
    region: str | None = None,
    boto_session: Any = None,
    wait: bool = True,
    timeout_s: float | None = None,
    poll_interval_s: float = 2.0,
    progress: bool | None = None,
    doctor: bool = True,
) -> ExperimentStatus:
    """Put the spec's candidate beside the incumbent that serves `endpoint_name`.

    The spec (or the one the stage manifest records) must be the one the endpoint serves:
    its plan's endpoint config is the endpoint's current one. InputError before any AWS
    call for a bad spec; ExperimentError when the endpoint is not ready for it. `doctor`
    runs `peagle doctor`'s read-only checks first (the capacity check counts both fleets).
    """
    the_spec = _experiment_spec(
        spec, spec_file, endpoint_name, stage=stage, region=region, boto_session=boto_session
    )
    xp = experiment_plan(the_spec)
    from peagle_deploy.sdk.deploy import check_deployable_role

    check_deployable_role(xp.incumbent)
    inc = xp.incumbent
    if endpoint_name is not None and endpoint_name != inc.endpoint_name:
        raise InputError(
            "ENDPOINT", f"{endpoint_name} is not the spec's endpoint", inc.endpoint_name
        )
    show = use_progress(progress)
    if doctor:  # read-only; a failing check stops here, before any create call
        from peagle_deploy.doctor import require_healthy
        from peagle_deploy.plan import build_plan

        require_healthy(build_plan(the_spec), boto_session=boto_session)
    clients = _Clients(inc.region, boto_session)
    ssm = clients.client("ssm")
    desc = describe_endpoint_or_none(clients.sm, inc.endpoint_name)
    _check_startable(
        xp, desc, read_record(ssm, ExperimentRecord, inc.spec.stage, inc.endpoint_name)
    )
    record = ExperimentRecord(
        endpoint_name=inc.endpoint_name,
        stage=inc.spec.stage,
        region=inc.region,
        state="starting",
        spec=the_spec,
        incumbent_variant=xp.incumbent_variant,
        candidate_variant=xp.candidate_variant,
        incumbent_config=inc.endpoint_config_name,
        incumbent_model=inc.model_name,
        candidate_model=xp.candidate_model_name,
        experiment_config=xp.config_name,
        requested_at=_now(),
    )
    created = _create_and_update(xp, clients, show)
    write_record(ssm, record, tags=inc.tags)
    if not wait:
        return ExperimentStatus(record, "Updating", None)
    limit = timeout_s or float(
        inc.model_data_download_timeout_s
        + inc.container_startup_health_check_timeout_s
        + UPDATE_MARGIN_S
    )
    result = wait_for_endpoint(
        clients.sm,
        inc.endpoint_name,
        timeout_s=limit,
        poll_interval_s=poll_interval_s,
        progress=show,
        until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
        label=f"starting the experiment on {inc.endpoint_name}",
    )
    serving = result.description.get("EndpointConfigName")
    if result.status != "InService" or serving != xp.config_name:
        removed = _remove(
            clients, inc.endpoint_name, xp.config_name, [xp.candidate_model_name], created
        )
        record.state = "failed"
        record.ended_at = _now()
        record.outcome = {
            "action": "failed",
            "reason": str(result.description.get("FailureReason") or result.status),
        }
        write_record(ssm, record)
        raise ExperimentError(
            f"the experiment on {inc.endpoint_name} did not start: the endpoint is "
            f"{result.status} on {serving} ({record.outcome['reason']}); it still serves the "
            f"incumbent. Removed {', '.join(removed) or 'nothing'}."
        )
    record.state = "running"
    record.started_at = _now()
    write_record(ssm, record)
    _say(show, f"[green]{inc.endpoint_name}: experiment running[/] ({xp.settings.mode})")
    return ExperimentStatus(record, "InService", None)


def _check_startable(
    xp: ExperimentPlan, desc: dict[str, Any] | None, record: ExperimentRecord | None
) -> None:
    name = xp.incumbent.endpoint_name
    if desc is None:
        raise ExperimentError(f"endpoint {name} does not exist: deploy the incumbent first")
    if record is not None and record.state in OPEN_STATES:
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


def _create_and_update(xp: ExperimentPlan, clients: _Clients, show: bool) -> list[str]:
    """Create the candidate's model and the experiment's config, then UpdateEndpoint.

    Returns what it created; on a refusal removes it and raises ExperimentError. The
    values of the spec's secrets are read just before the candidate's CreateModel and
    masked in any error that leaves (a ValidationException quotes the environment).
    """
    from peagle_deploy.sdk.secrets import create_model_with_secrets

    values = SecretValues()
    with values:
        candidate = create_model_with_secrets(
            xp.create_candidate_model,
            xp.incumbent.secret_refs,
            lambda: clients.client("secretsmanager"),
            values,
        )
        return _create_candidate(xp, candidate, clients, show)


def _create_candidate(
    xp: ExperimentPlan, candidate: dict[str, Any], clients: _Clients, show: bool
) -> list[str]:
    from botocore.exceptions import ClientError

    from peagle_deploy.sdk.existing import ExistingDiffersError, Kind, check_existing

    created: list[str] = []
    steps: list[tuple[Kind, Callable[..., Any], dict[str, Any], str]] = [
        ("model", clients.sm.create_model, candidate, xp.candidate_model_name),
        (
            "endpoint-config",
            clients.sm.create_endpoint_config,
            xp.create_experiment_config,
            xp.config_name,
        ),
    ]
    try:
        for kind, call, request, name in steps:
            try:
                call(**request)
                created.append(f"{kind}:{name}")
                _say(show, f"created {kind} {name}")
            except ClientError as exc:
                if "already exist" not in str(exc).lower():
                    raise
                check_existing(clients.sm, kind, request)  # adopted only if the same
        clients.sm.update_endpoint(**xp.start_update)
    except (ClientError, ExistingDiffersError) as exc:
        removed = _remove(
            clients,
            xp.incumbent.endpoint_name,
            xp.config_name,
            [xp.candidate_model_name],
            created,
        )
        raise ExperimentError(
            f"SageMaker refused the experiment on {xp.incumbent.endpoint_name}: {exc}. The "
            f"incumbent still serves; removed {', '.join(removed) or 'nothing'}."
        ) from exc
    _say(
        show,
        f"updating {xp.incumbent.endpoint_name}: {xp.incumbent.endpoint_config_name} -> "
        f"{xp.config_name} (incumbent + {xp.settings.mode} candidate)",
    )
    return created


def _remove(
    clients: _Clients,
    endpoint_name: str,
    config: str,
    models: list[str],
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
    for model in models:
        if (created is None or f"model:{model}" in created) and delete_quietly(
            clients.sm.delete_model, ModelName=model
        ):
            removed.append(f"model:{model}")
    return removed


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


def _refuse_cloudformation(
    clients: _Clients, desc: dict[str, Any], record: ExperimentRecord
) -> None:
    tags = clients.sm.list_tags(ResourceArn=desc["EndpointArn"]).get("Tags", [])
    stack = next((t["Value"] for t in tags if t.get("Key") == CFN_STACK_TAG), None)
    if stack:
        raise ExperimentError(
            f"{record.endpoint_name} belongs to CloudFormation stack {stack}: end the "
            "experiment there (remove `experiment:` from the stage's spec, and for a promotion "
            "put the candidate's settings in `speculative:`), then `npx cdk deploy`"
        )


def _restore(
    record: ExperimentRecord, clients: _Clients, show: bool, timeout_s: float | None
) -> None:
    """UpdateEndpoint back onto the incumbent's config and wait until it serves alone."""
    desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
    if desc is None:
        raise ExperimentError(f"endpoint {record.endpoint_name} does not exist any more")
    if desc.get("EndpointConfigName") == record.incumbent_config and not running_experiment(desc):
        return
    if desc.get("EndpointStatus") in IN_PROGRESS:
        wait_for_endpoint(
            clients.sm,
            record.endpoint_name,
            timeout_s=timeout_s or 3600.0,
            progress=show,
            until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
            label=f"waiting for {record.endpoint_name} to settle",
        )
    clients.sm.update_endpoint(
        EndpointName=record.endpoint_name, EndpointConfigName=record.incumbent_config
    )
    _say(show, f"restoring {record.endpoint_name} onto the incumbent {record.incumbent_config}")
    result = wait_for_endpoint(
        clients.sm,
        record.endpoint_name,
        timeout_s=timeout_s or 3600.0 + UPDATE_MARGIN_S,
        progress=show,
        until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
        label=f"restoring {record.endpoint_name}",
    )
    serving = result.description.get("EndpointConfigName")
    if result.status != "InService" or serving != record.incumbent_config:
        raise ExperimentError(
            f"restoring {record.endpoint_name} did not finish: it is {result.status} on "
            f"{serving} ({result.description.get('FailureReason') or 'no reason given'}); "
            "run the same command again"
        )


def _close(
    record: ExperimentRecord,
    clients: _Clients,
    action: Action,
    reason: str,
    decision: dict[str, Any] | None,
) -> list[str]:
    """Record the end, remove the experiment's resources, note it in the stage manifest."""
    removed = _remove(
        clients, record.endpoint_name, record.experiment_config, [record.candidate_model]
    )
    record.state = "aborted" if action == "aborted" else "concluded"
    record.ended_at = _now()
    record.outcome = {"action": action, "reason": reason, "decision": decision}
    ssm = clients.client("ssm")
    write_record(ssm, record)
    return removed


def _note_in_manifest(record: ExperimentRecord, clients: _Clients) -> str | None:
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
    clients = _Clients(region or _region(boto_session), boto_session)
    record = _record_or_refuse(stage, endpoint_name, clients)
    if record.state not in OPEN_STATES:
        raise ExperimentError(f"the experiment on {endpoint_name} already ended ({record.state})")
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    if desc is not None:
        _refuse_cloudformation(clients, desc, record)
    _restore(record, clients, show, timeout_s)
    removed = _close(record, clients, "aborted", reason, decision)
    parameter = _note_in_manifest(record, clients)
    _say(show, f"[yellow]{endpoint_name}: experiment aborted[/] ({reason}); the incumbent serves")
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
    endpoint goes back to the incumbent's config, then `deploy_peagle` rolls the
    candidate's spec out blue/green with the stage's rollout and records it in the stage
    manifest. No winner, or a winning incumbent, keeps the incumbent. Before the
    experiment's minimums it refuses, unless `force` (which keeps the incumbent).
    """
    show = use_progress(progress)
    status = experiment_status(
        endpoint_name, stage=stage, region=region, boto_session=boto_session, final=True
    )
    record = status.record
    if record.state not in OPEN_STATES:
        raise ExperimentError(f"the experiment on {endpoint_name} already ended ({record.state})")
    analysis = status.analysis
    if analysis is None:
        raise ExperimentError(
            f"the experiment on {endpoint_name} has not started serving yet "
            f"({status.endpoint_status}); wait, or abort it"
        )
    decision = analysis.decision
    summary = analysis.to_json()
    if analysis.breaches:
        return abort_experiment(
            endpoint_name,
            stage=stage,
            region=region,
            boto_session=boto_session,
            reason=_guardrail_reason(analysis),
            progress=progress,
            timeout_s=timeout_s,
            decision=summary,
        )
    if decision.missing and not force:
        raise ExperimentError(
            f"too early to conclude the experiment on {endpoint_name}: it needs "
            f"{', '.join(decision.missing)}. Wait (`peagle experiment watch`), or end it now "
            "keeping the incumbent (--force)"
        )
    clients = _Clients(record.region, boto_session)
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    if desc is not None:
        _refuse_cloudformation(clients, desc, record)
    winner = decision.winner
    action: Action = "promoted" if winner == "candidate" and promote else "kept"
    reason = (
        decision.reason
        if action == "promoted" or winner != "candidate"
        else (decision.reason + "; promotion declined (promote=False)")
    )
    _restore(record, clients, show, timeout_s)
    removed = _close(record, clients, action, reason, summary)
    if action == "promoted":
        from peagle_deploy.sdk.deploy import deploy_peagle

        _say(show, f"promoting the candidate on {endpoint_name} (blue/green)")
        deploy_peagle(
            spec=candidate_spec(record.spec),
            boto_session=boto_session,
            progress=progress,
            deployed_by=f"peagle experiment conclude {endpoint_name}",
        )
    parameter = _note_in_manifest(record, clients)
    _say(show, f"[green]{endpoint_name}: experiment concluded[/]: {action} ({reason})")
    return ExperimentOutcome(endpoint_name, action, reason, summary, removed, parameter)


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
    while True:
        status = experiment_status(
            endpoint_name, stage=stage, region=region, boto_session=boto_session
        )
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
                    stage=stage,
                    region=region,
                    boto_session=boto_session,
                    reason=_guardrail_reason(analysis),
                    progress=progress,
                    decision=analysis.to_json(),
                )
            return conclude_experiment(
                endpoint_name,
                stage=stage,
                region=region,
                boto_session=boto_session,
                progress=progress,
            )
        sleep(interval_s)
