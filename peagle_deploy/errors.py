"""Errors the CLI turns into one clear line (no traceback) and a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterable

from peagle_deploy.redaction import safe_message


class PeagleError(Exception):
    """Base of every error peagle-deploy raises on purpose."""

    exit_code = 1


class InputError(PeagleError):
    """Input of any kind (a spec field, a flag, a file, an environment variable) refused
    before any AWS call.

    `field` is the dotted path of the offending field (`speculative.num_speculative_tokens`),
    `allowed` says what would have been accepted. The message (`str()`) cuts each part to
    a short, credential-free, one-line excerpt (`redaction.safe_message`): it echoes a
    value only as context, so a pasted file or token never comes back whole.
    """

    exit_code = 2

    def __init__(self, field: str, problem: str, allowed: str | Iterable[str] | None = None):
        self.field = field
        self.problem = problem
        if allowed is not None and not isinstance(allowed, str):
            allowed = ", ".join(str(a) for a in allowed)
        self.allowed = allowed
        text = f"{safe_message(field, 120)}: {safe_message(problem)}"
        if allowed:
            text += f" (allowed: {safe_message(allowed, 1200)})"
        super().__init__(text)


class DeployError(PeagleError):
    """A deployment that did not reach its goal; the message says what state it left."""


class EndpointFailedError(DeployError):
    """SageMaker put the endpoint in Failed; carries FailureReason and recent log lines."""

    def __init__(self, endpoint_name: str, failure_reason: str, log_tail: list[str] | None = None):
        self.endpoint_name = endpoint_name
        self.failure_reason = failure_reason
        self.log_tail = list(log_tail or [])
        text = f"endpoint {endpoint_name} failed: {failure_reason}"
        if self.log_tail:
            text += "\nlast log lines:\n  " + "\n  ".join(self.log_tail)
        super().__init__(text)
