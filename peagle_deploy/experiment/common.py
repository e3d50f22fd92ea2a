"""What the experiment's steps share: the AWS clients, the error, progress lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from peagle_deploy.aws import make_client
from peagle_deploy.errors import DeployError, InputError
from peagle_deploy.records import (
    MAX_PARAMETER_BYTES,
    ExperimentRecord,
    encoded_size,
    write_record,
)
from peagle_deploy.redaction import SecretValues

UPDATE_MARGIN_S = 600
"""Beyond the model download and health-check timeouts, how long an update may take."""
REASON_LIMIT = 1024
"""Characters of a stated reason: StopInferenceExperiment's `Reason` holds at most 1024
(botocore's InferenceExperimentStatusReason), and the record must fit SSM's limit."""


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
    """One progress line on stderr (rich markup), when progress is shown. What comes
    from a user or an account goes in through `terminal.escaped`."""
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


def check_reason(reason: str, flag: str = "reason") -> None:
    """A reason the end can record and send: one line of at most `REASON_LIMIT`
    characters (InputError before any AWS call)."""
    if len(reason) > REASON_LIMIT:
        raise InputError(
            flag, f"is {len(reason)} characters long", f"at most {REASON_LIMIT} characters"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in reason):
        raise InputError(flag, "holds a control character", "one line of plain text")


def _compact(outcome: dict[str, Any]) -> dict[str, Any]:
    """An outcome without the decision's detail: its verdict and reason only."""
    decision = outcome.get("decision")
    if not isinstance(decision, dict):
        return outcome
    kept = (decision.get("decision") or {}) if isinstance(decision.get("decision"), dict) else {}
    brief = {k: kept[k] for k in ("verdict", "reason") if k in kept}
    return {**outcome, "decision": brief or None, "decision_detail": "left out: over SSM's limit"}


Ended = Literal["concluded", "aborted", "failed"]


def ended_record(
    record: ExperimentRecord, state: Ended, outcome: dict[str, Any]
) -> ExperimentRecord:
    """The record as the end will write it, built and measured before anything acts: an
    end whose record could not be written would leave an endpoint back on its incumbent
    under a record that says `running`. A decision too long to keep is kept as its verdict
    and reason; a record that cannot fit even so is refused here (ExperimentError)."""
    if isinstance(outcome.get("reason"), str):
        outcome = {**outcome, "reason": outcome["reason"][:REASON_LIMIT]}
    ended = record.model_copy(update={"state": state, "ended_at": now(), "outcome": outcome})
    if encoded_size(ended) > MAX_PARAMETER_BYTES:
        ended = ended.model_copy(update={"outcome": _compact(outcome)})
    size = encoded_size(ended)
    if size > MAX_PARAMETER_BYTES:
        raise ExperimentError(
            f"the end of the experiment on {record.endpoint_name} could not be recorded "
            f"({size} bytes, over SSM's {MAX_PARAMETER_BYTES}-byte limit); nothing was changed"
        )
    return ended


def write_end(record: ExperimentRecord, ended: ExperimentRecord, clients: Clients) -> None:
    """Store `ended` (from `ended_record`) and carry it into `record`. A write that fails
    after the endpoint changed says so, and that the same command finishes it (every end
    step is a no-op once done)."""
    try:
        write_record(clients.client("ssm"), ended)
    except Exception as exc:
        raise ExperimentError(
            f"the experiment on {record.endpoint_name} ended on the endpoint, but its "
            f"record {record.parameter_name} still says {record.state}: writing it failed "
            f"({_short(exc)}). Run the same command again to record the end"
        ) from exc
    for key in ("state", "ended_at", "outcome"):
        setattr(record, key, getattr(ended, key))


def _short(exc: BaseException) -> str:
    error = (getattr(exc, "response", None) or {}).get("Error", {})
    return str(error.get("Code") or exc).splitlines()[0][:200]


def record_end(
    record: ExperimentRecord, clients: Clients, state: Ended, outcome: dict[str, Any]
) -> None:
    """Record the end (`ended_record`, then `write_end`)."""
    write_end(record, ended_record(record, state, outcome), clients)
