"""What the experiment's steps share: the AWS clients, the error, progress lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.aws import make_client
from peagle_deploy.errors import DeployError

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
    it is sent, as deploy does)."""
    request: dict[str, Any] = xp.create_candidate_model
    if not xp.incumbent.secret_refs:
        return request
    from peagle_deploy.plan.render import with_secret_values
    from peagle_deploy.sdk.secrets import read_secret_values

    values = read_secret_values(clients.client("secretsmanager"), xp.incumbent.secret_refs)
    return with_secret_values(request, values)
