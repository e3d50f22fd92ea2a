"""What the experiment's steps share: the AWS clients, the error, progress lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from peagle_deploy.aws import make_client
from peagle_deploy.errors import DeployError
from peagle_deploy.records import ExperimentRecord, write_record
from peagle_deploy.redaction import SecretValues

UPDATE_MARGIN_S = 600
"""Beyond the model download and health-check timeouts, how long an update may take."""


class ExperimentError(DeployError):
    """An experiment step SageMaker refused, or one the endpoint's state does not allow."""


@dataclass
class Clients:
    """The clients of one region and session (SageMaker made once, the others on demand)."""

    region: str
    session: Any
    sm: Any = field(init=False)
    secret_values: SecretValues = field(default_factory=SecretValues, repr=False)
    """The secret values read on this path (the candidate's), masked where they leave."""

    def __post_init__(self) -> None:
        self.sm = make_client("sagemaker", region=self.region, boto_session=self.session)

    def client(self, service: str) -> Any:
        return make_client(service, region=self.region, boto_session=self.session)


def say(progress: bool, text: str) -> None:
    """One progress line on stderr (rich markup), when progress is shown."""
    if progress:
        from peagle_deploy.terminal import plain_console

        plain_console(stderr=True).print(text, highlight=False)


def candidate_model_request(xp: Any, clients: Clients) -> dict[str, Any]:
    """The candidate's CreateModel with the values of the spec's secrets (read just before
    it is sent, as deploy does, and checked against CreateModel's limits). The values join
    `clients.secret_values`, which the start masks in whatever leaves it."""
    from peagle_deploy.sdk.secrets import create_model_with_secrets

    return create_model_with_secrets(
        xp.create_candidate_model,
        xp.incumbent.secret_refs,
        lambda: clients.client("secretsmanager"),
        clients.secret_values,
    )


def now() -> datetime:
    """The time every step records and compares with (tests replace it with a clock)."""
    return datetime.now(UTC)


def record_end(
    record: ExperimentRecord,
    clients: Clients,
    state: Literal["concluded", "aborted", "failed"],
    outcome: dict[str, Any],
) -> None:
    record.state = state
    record.ended_at = now()
    record.outcome = outcome
    write_record(clients.client("ssm"), record)
