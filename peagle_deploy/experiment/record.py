"""The experiment record: what runs on an endpoint, kept in SSM beside the stage manifest.

`/peagle-deploy/<stage>/<endpoint>/experiment`, one JSON document (a SecureString, like
the manifest: the spec may carry secrets in its environment). Written by `start`, read
by `status`, closed by `conclude` and `abort`; the endpoint itself (its config's
variants) is the other half of the truth, and `running_experiment` reads that one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from peagle_deploy.errors import PeagleError
from peagle_deploy.spec.models import DeploymentSpec, ExperimentSpec

RECORD_SCHEMA_VERSION = 1

State = Literal["starting", "running", "concluded", "aborted", "failed"]
OPEN_STATES: frozenset[str] = frozenset({"starting", "running"})


class RecordError(PeagleError):
    """An experiment record that exists but cannot be read."""


class ExperimentRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    endpoint_name: str
    stage: str
    region: str
    state: State
    spec: DeploymentSpec
    """The incumbent's spec with its experiment block (the candidate is derived from it)."""
    incumbent_variant: str
    candidate_variant: str
    incumbent_config: str
    incumbent_model: str
    candidate_model: str
    experiment_config: str
    """A split experiment's endpoint config; a shadow experiment's is SageMaker's (the
    InferenceExperiment's, known once it runs; empty before)."""
    inference_experiment: str | None = None
    """A shadow experiment's InferenceExperiment."""
    requested_at: datetime
    started_at: datetime | None = None
    """When the endpoint was InService with both variants: the analysis starts here."""
    ended_at: datetime | None = None
    outcome: dict[str, Any] | None = None
    """How it ended: the decision, the action taken, and why."""

    @property
    def settings(self) -> ExperimentSpec:
        assert self.spec.experiment is not None
        return self.spec.experiment

    @property
    def parameter_name(self) -> str:
        return record_parameter_name(self.stage, self.endpoint_name)


def record_parameter_name(stage: str, endpoint_name: str) -> str:
    from peagle_deploy.sdk.manifest import PARAMETER_ROOT

    return f"{PARAMETER_ROOT}/{stage}/{endpoint_name}/experiment"


def write_record(
    record: ExperimentRecord, ssm: Any, tags: list[dict[str, str]] | None = None
) -> str:
    value = record.model_dump_json()
    ssm.put_parameter(
        Name=record.parameter_name,
        Value=value,
        Type="SecureString",
        Overwrite=True,
        Tier="Standard" if len(value.encode()) <= 4096 else "Advanced",
        Description=f"peagle-deploy experiment on {record.endpoint_name} ({record.stage})",
    )
    if tags:
        ssm.add_tags_to_resource(
            ResourceType="Parameter", ResourceId=record.parameter_name, Tags=tags
        )
    return record.parameter_name


def read_record(stage: str, endpoint_name: str, ssm: Any) -> ExperimentRecord | None:
    """The stored record, None when there is none; RecordError when unreadable."""
    from botocore.exceptions import ClientError

    from peagle_deploy.documents import DocumentError, parse_document

    name = record_parameter_name(stage, endpoint_name)
    try:
        value = ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return None
        raise
    try:
        doc = parse_document(value, name, "its value", "json")
    except DocumentError as exc:
        raise RecordError(f"{name} is not JSON peagle-deploy reads: {exc.problem}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise RecordError(f"{name} is not an experiment record this peagle-deploy reads")
    try:
        return ExperimentRecord.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise RecordError(f"{name} is invalid at {where or '(root)'}: {first['msg']}") from None


def running_experiment(description: dict[str, Any] | None) -> str | None:
    """Why an endpoint is in an experiment, from DescribeEndpoint alone (None when not):
    a shadow variant, or more than one production variant."""
    if not description:
        return None
    shadows = description.get("ShadowProductionVariants") or []
    production = description.get("ProductionVariants") or []
    pending = description.get("PendingDeploymentSummary") or {}
    if shadows or pending.get("ShadowProductionVariants"):
        names = [v.get("VariantName") for v in shadows or pending["ShadowProductionVariants"]]
        return f"it runs the shadow variant {', '.join(str(n) for n in names)}"
    if len(production) > 1 or len(pending.get("ProductionVariants") or []) > 1:
        names = [v.get("VariantName") for v in production]
        return f"it splits its traffic over variants {', '.join(str(n) for n in names)}"
    return None
