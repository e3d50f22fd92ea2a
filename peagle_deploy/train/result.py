"""What a training plan is and what a finished training gives back (shared by the
planner, the runtime, the CLI and the emulator's rehearsal)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrainingCost:
    """The most a job can cost, in instance-hours (MaxRuntime x count; spot adds
    nothing to the hours, only to the wait)."""

    instance_type: str
    instance_count: int
    max_runtime_hours: float
    instance_hours: float
    spot: bool
    usd_per_instance_hour: float | None = None
    """On-demand list price when the catalog knows it (with its source), else None."""
    price_source: str | None = None

    @property
    def usd(self) -> float | None:
        if self.usd_per_instance_hour is None:
            return None
        return self.instance_hours * self.usd_per_instance_hour


@dataclass(frozen=True)
class TrainingPlan:
    """One checked training job: the exact CreateTrainingJob request and what it yields."""

    job_name: str
    request: dict[str, Any]
    """CreateTrainingJob keyword arguments, valid for botocore's SageMaker model."""
    drafter_uri: str
    """Where the drafter lands (peagle_train.contract.drafter_uri): `custom.drafter_uri`."""
    num_speculative_tokens: int
    """K the drafter is trained for: the deployment's `num_speculative_tokens` default."""
    cost: TrainingCost
    warnings: tuple[str, ...] = ()
    target: dict[str, Any] = field(default_factory=dict)
    """What the plan read of the target (model_type, hidden_size, num_hidden_layers,
    vocab_size, chat_template, mask_token_id and where it comes from)."""


@dataclass(frozen=True)
class TrainedDrafter:
    """A finished job's drafter, read back from its metadata file (peagle_train.contract)."""

    job_name: str
    status: str
    drafter_uri: str
    num_speculative_tokens: int
    acceptance_per_position: tuple[float, ...] = ()
    """Share of draft tokens accepted at each position 1..K on the held-out prompts."""
    mean_accepted_per_step: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    drafter_kind: str = "p-eagle"
