"""Where an experiment stands: `experiment_status` and what the other steps share of it.

Reads only: the record (`peagle_deploy.records`), the endpoint (and its
InferenceExperiment), the variants' observations (`experiment.fetch`), then the analysis
(`experiment.analysis`, a pure function). `start` and `end` build on `ExperimentStatus`,
the record helpers and `settle_start` here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from peagle_deploy.aws import describe_endpoint_or_none
from peagle_deploy.errors import InputError
from peagle_deploy.experiment import common, shadow, split
from peagle_deploy.experiment.analysis import Analysis, analyse
from peagle_deploy.experiment.common import Clients, ExperimentError
from peagle_deploy.experiment.fetch import Observed, fetch_observations
from peagle_deploy.experiment.observations import VariantSample
from peagle_deploy.experiment.plan import ExperimentPlan, experiment_plan, observation_source
from peagle_deploy.experiment.series_check import VariantSeries
from peagle_deploy.records import ExperimentRecord, read_record, running_experiment, write_record
from peagle_deploy.spec.models import DeploymentSpec


@dataclass(frozen=True)
class ExperimentStatus:
    """Where an experiment stands, and (once both variants serve) what it shows."""

    record: ExperimentRecord
    endpoint_status: str
    analysis: Analysis | None
    observations: list[VariantSample] = field(default_factory=list, repr=False)
    read_at: datetime = field(default_factory=common.now)
    note: str | None = None
    """Why there is nothing to compare yet, and what to do about it."""
    series: list[VariantSeries] | None = None
    """With detailed observability: per variant, the series looked for and not found."""

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
            "detailed_series": (
                None if self.series is None else [s.to_json() for s in self.series]
            ),
        }


def record_or_refuse(stage: str, endpoint_name: str, clients: Clients) -> ExperimentRecord:
    record = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    if record is None:
        raise ExperimentError(
            f"no experiment on {endpoint_name} in stage {stage} (start one with "
            f"`peagle experiment start {endpoint_name} --file SPEC`)"
        )
    return record


def _serving_since(
    record: ExperimentRecord, clients: Clients, desc: dict[str, Any] | None
) -> tuple[datetime, str] | None:
    """When both variants started serving, and the config they serve (None while they
    do not). Reads only."""
    if not desc or desc.get("EndpointStatus") != "InService":
        return None
    config = str(record.experiment_config)
    if record.inference_experiment is not None:
        now, _, ie = shadow.state(record, clients)
        if now != "running" or not running_experiment(desc):
            return None
        config = str(
            (ie.get("EndpointMetadata") or {}).get("EndpointConfigName")
            or desc.get("EndpointConfigName")
            or ""
        )
    elif not split.serving(record, desc):
        return None
    started = desc.get("LastModifiedTime")
    return (started if isinstance(started, datetime) else common.now()), config


def as_read(
    record: ExperimentRecord,
    desc: dict[str, Any] | None,
    clients: Clients,
    at: datetime | None = None,
) -> ExperimentRecord:
    """The record as the endpoint shows it now, in memory: a start whose variants both
    serve reads as running (from `at`, else from when the endpoint last changed). The
    stored record is not touched: only the commands that change things write it."""
    if record.state != "starting":
        return record
    serving = _serving_since(record, clients, desc)
    if serving is None:
        return record
    started, config = serving
    return record.model_copy(
        update={"state": "running", "started_at": at or started, "experiment_config": config}
    )


def settle_start(
    record: ExperimentRecord,
    desc: dict[str, Any] | None,
    clients: Clients,
    at: datetime | None = None,
) -> None:
    """Once both variants serve, the experiment runs: `record` becomes `as_read`'s view,
    SageMaker's own end is set (a shadow experiment) and the record is stored. Only the
    commands that act (start, watch, conclude) call it; status reads `as_read`."""
    seen = as_read(record, desc, clients, at)
    if seen is record:
        return
    if seen.inference_experiment is not None:
        assert seen.started_at is not None
        shadow.after_start(seen, clients, seen.started_at)
    write_record(clients.client("ssm"), seen)
    for key in ("state", "started_at", "experiment_config"):
        setattr(record, key, getattr(seen, key))


def settle_stored(endpoint_name: str, *, stage: str, region: str | None, boto_session: Any) -> None:
    """For a command that acts (watch): a stored start whose variants both serve is
    stored as running, with SageMaker's own end set (`settle_start`)."""
    clients = Clients(region or region_of(boto_session), boto_session)
    stored = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    if stored is not None and stored.state == "starting":
        settle_start(stored, describe_endpoint_or_none(clients.sm, endpoint_name), clients)


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
    record = as_read(new_record(xp, spec, state="starting"), desc, clients)
    if record.started_at is not None:
        record.requested_at = record.started_at
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
    """Read the experiment on `endpoint_name`: no change to the endpoint, SageMaker or
    the stored record (a start whose variants both serve reads as running here; the
    record says so once a command that acts has seen it).

    Without a stored record (an experiment a CDK stage carries), `spec` (the stage's spec,
    with its experiment block) says what runs.
    """
    clients = Clients(region or region_of(boto_session), boto_session)
    stored = read_record(clients.client("ssm"), ExperimentRecord, stage, endpoint_name)
    desc = describe_endpoint_or_none(clients.sm, endpoint_name)
    if stored is None and spec is not None and spec.experiment is not None:
        record = _record_from_spec(spec, endpoint_name, desc, clients)
    else:
        record = stored if stored is not None else record_or_refuse(stage, endpoint_name, clients)
        record = as_read(record, desc, clients)
    status = str(desc.get("EndpointStatus")) if desc else "absent"
    if record.state != "running" or record.started_at is None:
        return ExperimentStatus(record, status, None, note=waiting_note(record))
    at = now or common.now()
    analysis, seen = _analyse(record, clients, final=final, now=at)
    note = (
        _ended_note(record, clients)
        or _left_note(record, desc)
        or _observability_note(record, desc)
        or _traffic_note(record, analysis, seen)
    )
    return ExperimentStatus(record, status, analysis, seen.served, at, note, seen.series)


def _left_note(record: ExperimentRecord, desc: dict[str, Any] | None) -> str | None:
    """A split experiment whose endpoint no longer serves its config (an end whose record
    was not written, or a change made elsewhere): the record is behind the endpoint."""
    if record.inference_experiment is not None or desc is None:
        return None
    if split.serving(record, desc) or desc.get("EndpointStatus") != "InService":
        return None
    return (
        f"{record.endpoint_name} no longer serves the experiment's config "
        f"{record.experiment_config} (it serves {desc.get('EndpointConfigName')}): finish "
        f"the end with `peagle experiment abort {record.endpoint_name} --stage {record.stage}`"
    )


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
    held = (
        " (which also gives the incumbent back its instances and its autoscaling, held until then)"
        if record.scaling_suspended_before is not None
        else ""
    )
    return (
        f"SageMaker ended the inference experiment ({why}); the incumbent serves alone. "
        f"End it here with `peagle experiment conclude {record.endpoint_name} --stage "
        f"{record.stage} --force` or `peagle experiment abort {record.endpoint_name} "
        f"--stage {record.stage}`{held}"
    )


def waiting_note(record: ExperimentRecord) -> str | None:
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


def region_of(boto_session: Any) -> str:
    if boto_session is not None and getattr(boto_session, "region_name", None):
        return str(boto_session.region_name)
    from peagle_deploy.aws import make_session

    return str(make_session(None, None).region_name or "us-east-1")


def new_record(
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
        requested_at=common.now(),
    )
