"""How an experiment ends: `conclude_experiment`, `abort_experiment`, `watch_experiment`.

- conclude: the decision rule; the endpoint back on the incumbent alone
  (StopInferenceExperiment, or UpdateEndpoint for a split), then, for a winning
  candidate, an ordinary `deploy_peagle` (blue/green with the stage's rollout) that
  records it in the stage manifest;
- abort: the endpoint back on the incumbent alone; the candidate removed;
- watch: status every interval; a guardrail breach aborts, a decision concludes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from peagle_deploy.aws import describe_endpoint_or_none
from peagle_deploy.experiment import scaling, shadow, split
from peagle_deploy.experiment.analysis import Analysis
from peagle_deploy.experiment.common import (
    REASON_LIMIT,
    Clients,
    ExperimentError,
    check_reason,
    ended_record,
    say,
    write_end,
)
from peagle_deploy.experiment.plan import candidate_spec
from peagle_deploy.experiment.status import (
    ExperimentStatus,
    experiment_status,
    record_or_refuse,
    region_of,
    settle_stored,
)
from peagle_deploy.records import (
    MAX_PARAMETER_BYTES,
    OPEN_STATES,
    ExperimentRecord,
    encoded_size,
    read_record,
    write_record,
)
from peagle_deploy.sdk.waiter import Interrupted, use_progress
from peagle_deploy.terminal import escaped

CFN_STACK_TAG = "aws:cloudformation:stack-name"

Action = Literal["promoted", "kept", "aborted"]


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
    """A stack's endpoint is ended by the stack (a change made here would drift from it),
    the way docs/experiments.md ("With CDK") gives, by the experiment's mode."""
    desc = describe_endpoint_or_none(clients.sm, record.endpoint_name)
    if desc is None:
        return
    tags = clients.sm.list_tags(ResourceArn=desc["EndpointArn"]).get("Tags", [])
    stack = next((t["Value"] for t in tags if t.get("Key") == CFN_STACK_TAG), None)
    if stack:
        raise ExperimentError(
            f"{record.endpoint_name} belongs to CloudFormation stack {stack}: end the "
            f'experiment there, {cdk_end_steps(record)} (docs/experiments.md, "With CDK")'
        )


PROMOTE_IN_SPEC = "to promote, also put the candidate's settings in `speculative:`"


def cdk_end_steps(record: ExperimentRecord) -> str:
    """How a stage's stack ends its experiment. A shadow experiment is stopped in place
    first (CloudFormation's delete of a running one would keep the candidate's fleet);
    a split experiment is the endpoint's config, which the next update replaces."""
    if record.inference_experiment is None:
        return (
            f"in one deploy: remove `experiment:` from the stage's spec ({PROMOTE_IN_SPEC}), "
            "then `npx cdk deploy`"
        )
    return (
        "in two deploys: set the stage's `experiment_state: completed` (`cancelled` to "
        "abort) and `npx cdk deploy`, which stops it; then remove the `experiment:` block "
        f"from the spec and `experiment_state` from the stage ({PROMOTE_IN_SPEC}) and "
        "`npx cdk deploy` again"
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
    then: Callable[[], None] | None = None,
) -> list[str]:
    """The endpoint back on the incumbent alone, the candidate removed, `then` (a
    promotion), the end recorded.

    The end record is built and measured first (`ended_record`): what will be written is
    known to fit before the endpoint changes. Every step is a no-op once done, so a
    command interrupted or failed half-way is finished by running it again. A promotion
    that fails is recorded as such (the incumbent kept, and why), so the record says what
    the endpoint serves."""
    state: Literal["concluded", "aborted"] = "aborted" if action == "aborted" else "concluded"
    ended = ended_record(record, state, {"action": action, "reason": reason, "decision": decision})
    failed = ended_record(
        record,
        state,
        {"action": "kept", "reason": f"{reason}; the promotion failed", "decision": decision},
    )
    try:
        removed = _back_on_the_incumbent(
            record, clients, action=action, reason=reason, show=show, timeout_s=timeout_s
        )
    except KeyboardInterrupt:
        raise Interrupted(
            record.endpoint_name,
            f"interrupted while ending the experiment on {record.endpoint_name}; SageMaker "
            "carries on with what it was doing. Run the same command again: it finishes "
            "the end (the incumbent alone, on its instances, with its scaling; the record)",
        ) from None
    try:
        if then is not None:
            then()
    except Exception:
        write_end(record, failed, clients)  # the incumbent serves: the record says so
        raise
    write_end(record, ended, clients)
    return removed


def _back_on_the_incumbent(
    record: ExperimentRecord,
    clients: Clients,
    *,
    action: Action,
    reason: str,
    show: bool,
    timeout_s: float | None,
) -> list[str]:
    """The experiment stopped, the candidate removed, the incumbent's instances and
    scaling given back; returns what was removed."""
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
    scaling.give_back(record, clients, show, timeout_s)
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
    noted = manifest.model_copy(update={"experiment": note})
    if encoded_size(noted) > MAX_PARAMETER_BYTES:  # the note without the decision's detail
        brief = {k: v for k, v in note.items() if k not in ("decision", "decision_detail")}
        noted = manifest.model_copy(update={"experiment": brief})
        if encoded_size(noted) > MAX_PARAMETER_BYTES:
            return None  # the experiment's own record keeps the outcome
    return write_record(ssm, noted)


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
    """Restore the incumbent, remove the candidate, record why (`reason`: at most
    1024 characters, one line; InputError before any AWS call otherwise)."""
    check_reason(reason)
    show = use_progress(progress)
    clients = Clients(region or region_of(boto_session), boto_session)
    record = record_or_refuse(stage, endpoint_name, clients)
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
    say(
        show,
        f"[yellow]{endpoint_name}: experiment aborted[/] ({escaped(reason)}); the incumbent serves",
    )
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
    name = record.endpoint_name

    def promotion() -> None:
        from peagle_deploy.sdk.deploy import deploy_peagle

        say(show, f"promoting the candidate on {name} (blue/green)")
        deploy_peagle(
            spec=candidate_spec(record.spec),
            boto_session=boto_session,
            progress=progress,
            deployed_by=f"peagle experiment conclude {name}",
        )

    removed = _end(
        record,
        clients,
        action=action,
        reason=reason,
        decision=summary,
        show=show,
        timeout_s=timeout_s,
        then=promotion if action == "promoted" else None,
    )
    parameter = _note_in_manifest(record, clients)
    say(show, f"[green]{name}: experiment concluded[/]: {action} ({escaped(reason)})")
    return ExperimentOutcome(name, action, reason, summary, removed, parameter)


def _guardrail_reason(analysis: Analysis) -> str:
    text = "guardrail: " + "; ".join(b.detail for b in analysis.breaches)
    return " ".join(text.split())[:REASON_LIMIT]


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
        settle_stored(endpoint_name, **where)  # watch acts: it records what it saw
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
