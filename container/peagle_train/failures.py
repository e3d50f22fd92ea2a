"""The one exception the driver turns into SageMaker's FailureReason."""

from __future__ import annotations


class DriverError(Exception):
    """A job failure with one line that says why; the driver writes it to
    /opt/ml/output/failure (SageMaker shows it as FailureReason) and exits non-zero."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
