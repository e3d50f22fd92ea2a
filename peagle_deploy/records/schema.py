"""What each kind of record holds (its body), as pydantic models.

Every record carries who it is about (`stage`, `endpoint_name`, `region`); the codec
stores those in the envelope and the rest as the body. Unknown fields are refused
(`extra="forbid"`): a field this peagle-deploy does not know is not silently dropped.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from peagle_deploy.records.paths import Kind, RecordPath
from peagle_deploy.spec.models import DeploymentSpec, ExperimentSpec, without_retired_fields

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan

IDENTITY: tuple[str, ...] = ("stage", "endpoint_name", "region")
"""The fields the envelope carries: which deployment a record is about."""


class StoredRecord(BaseModel):
    """The base of every record kind: which endpoint, stage and region it is about."""

    model_config = ConfigDict(extra="forbid")

    KIND: ClassVar[Kind]
    REFUSAL_HINT: ClassVar[str]
    """What to do about a record of this kind that cannot be trusted (`{stage}`, `{name}`)."""

    endpoint_name: str
    stage: str
    region: str
    spec: DeploymentSpec

    @model_validator(mode="before")
    @classmethod
    def _read_older_experiment_blocks(cls, value: Any) -> Any:
        # A spec stored before issue 30 may carry an experiment block with knobs since
        # retired; the record stays readable (to conclude or abort that experiment).
        spec = value.get("spec") if isinstance(value, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("experiment"), dict):
            block = without_retired_fields(spec["experiment"])
            return {**value, "spec": {**spec, "experiment": block}}
        return value

    @model_validator(mode="after")
    def _spec_is_of_this_stage(self) -> StoredRecord:
        # The spec decides what a promotion or an experiment deploys: it must be the
        # stage's own, not one carried over from another stage.
        if self.spec.stage != self.stage:
            raise ValueError(f"its spec is for stage {self.spec.stage}, not {self.stage}")
        if self.spec.endpoint_name not in (None, self.endpoint_name):
            raise ValueError(f"its spec names endpoint {self.spec.endpoint_name}")
        return self

    @property
    def path(self) -> RecordPath:
        return RecordPath(self.stage, self.endpoint_name, self.KIND)

    @property
    def parameter_name(self) -> str:
        return self.path.name


class DeploymentManifest(StoredRecord):
    """What one endpoint serves, where it came from, and the gates that let it in."""

    KIND: ClassVar[Kind] = "manifest"
    REFUSAL_HINT: ClassVar[str] = (
        "redeploy {stage} to rewrite it (peagle deploy ... --stage {stage})"
    )

    content_hash: str
    """The plan's content hash (also the endpoint's `peagle:spec-hash` tag)."""
    model_name: str
    endpoint_config_name: str
    image_uri: str
    model_data_uri: str
    drafter_uri: str | None = None
    instance_type: str
    num_speculative_tokens: int | None = None
    git_commit: str | None = None
    """HEAD of the git repository the deploy ran in, if any (`-dirty` if uncommitted changes)."""
    deployed_at: datetime
    deployed_by: str | None = None
    """Free text: who or what deployed (CI job, `peagle promote dev->staging`, ...)."""
    promoted_from: str | None = None
    """`<stage>/<endpoint>` of the source when this deployment is a promotion."""
    gate_results: list[dict[str, Any]] = Field(default_factory=list)
    """The promotion record: the gate verdicts and benchmark levels `peagle promote`
    measured before deploying this configuration (empty for a direct deploy). Kept in the
    manifest, written in one PutParameter with it, so the next promotion's baseline always
    describes the configuration that serves (`peagle_deploy.promote.store` reads it)."""
    experiment: dict[str, Any] | None = None
    """The last experiment concluded or aborted on this deployment (`peagle experiment`):
    its decision, and whether the candidate was promoted or the incumbent kept."""

    @classmethod
    def from_plan(
        cls,
        plan: Plan,
        *,
        deployed_by: str | None = None,
        promoted_from: str | None = None,
        gate_results: list[dict[str, Any]] | None = None,
        git_commit: str | None = None,
    ) -> DeploymentManifest:
        """The manifest of a plan that is now serving."""
        return cls(
            endpoint_name=plan.endpoint_name,
            stage=plan.spec.stage,
            region=plan.region,
            content_hash=plan.content_hash,
            spec=plan.spec,
            model_name=plan.model_name,
            endpoint_config_name=plan.endpoint_config_name,
            image_uri=plan.image_uri,
            model_data_uri=plan.model_data_uri,
            drafter_uri=plan.drafter_uri,
            instance_type=plan.instance_type,
            num_speculative_tokens=plan.num_speculative_tokens,
            git_commit=git_commit if git_commit is not None else current_git_commit(),
            deployed_at=datetime.now(UTC),
            deployed_by=deployed_by,
            promoted_from=promoted_from,
            gate_results=list(gate_results or []),
        )


State = Literal["starting", "running", "concluded", "aborted", "failed"]
OPEN_STATES: frozenset[str] = frozenset({"starting", "running"})


class ExperimentRecord(StoredRecord):
    """An experiment on an endpoint: written by `start`, closed by `conclude`/`abort`.

    The endpoint's own variants are the other half of the truth
    (`peagle_deploy.records.serving.running_experiment`)."""

    KIND: ClassVar[Kind] = "experiment"
    REFUSAL_HINT: ClassVar[str] = (
        "delete it to forget that experiment (aws ssm delete-parameter --name {name})"
    )

    state: State
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
    incumbent_instances: int | None = None
    """The incumbent's instances when the experiment started (read from the endpoint):
    the test runs on them and every end leaves the incumbent on them (None: a record
    written before this was kept)."""
    scaling_suspended_before: dict[str, bool] | None = None
    """The incumbent's Application Auto Scaling `SuspendedState` before the experiment
    held its scaling (None: no scalable target). Written before the hold, so any end (a
    conclude, an abort, a failed start, a command run again after one was interrupted)
    gives the target back exactly this."""

    @property
    def settings(self) -> ExperimentSpec:
        """The spec's experiment block (`spec` is the incumbent's, with that block)."""
        assert self.spec.experiment is not None
        return self.spec.experiment


RECORD_TYPES: dict[Kind, type[StoredRecord]] = {
    DeploymentManifest.KIND: DeploymentManifest,
    ExperimentRecord.KIND: ExperimentRecord,
}


def current_git_commit(cwd: str | Path | None = None) -> str | None:
    """HEAD of the repository around `cwd` (suffix `-dirty` when the tree has changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head or None
