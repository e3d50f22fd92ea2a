"""One training job on SageMaker: create it or adopt it by content, describe it, stop it,
and the request that resumes it from its checkpoints.

The job name comes from the plan's content, so anyone allowed to create a training job
of that name could make it first with other content. "ResourceInUse" is therefore never
taken at its word: the existing job is described (with its tags) and adopted only when
`adoption.difference` finds nothing between it and the request (the same rule the
deployment uses for models and endpoint configs, `peagle_deploy.adoption`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from peagle_deploy.adoption import Resource, difference
from peagle_deploy.errors import DeployError, InputError

RUNNING: Final = frozenset({"InProgress", "Stopping"})
SETTLED: Final = frozenset({"Completed", "Failed", "Stopped"})
RESUMABLE: Final = frozenset({"Failed", "Stopped"})
"""A job that ended without its drafter: a spot interruption past MaxWaitTimeInSeconds
fails it, a StopTrainingJob stops it; its checkpoints are still in S3."""

JOB_NAME: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""TrainingJobName's pattern in botocore's sagemaker model (1-63 characters)."""
RESUME_SUFFIX: Final = re.compile(r"-r(\d{1,3})$")
MAX_RESUMES: Final = 99

TRAINING_JOB: Final = Resource(
    "training job",
    "TrainingJobName",
    (
        # Each changes what runs, where data goes or who gets in; SageMaker never fills it.
        "AlgorithmSpecification.ContainerEntrypoint",
        "AlgorithmSpecification.ContainerArguments",
        "AlgorithmSpecification.TrainingImageConfig",
        "AlgorithmSpecification.AlgorithmName",
        "VpcConfig",
        "OutputDataConfig.KmsKeyId",
        "ResourceConfig.VolumeKmsKeyId",
        "RemoteDebugConfig",
        "DebugHookConfig",
        "TensorBoardOutputConfig",
        "Environment",
    ),
)
WHOLE_MAPS: Final = ("HyperParameters", "Environment")
"""Maps whose extra keys are a difference: a hyperparameter the request does not set
still reaches the driver."""


class TrainingJobError(DeployError):
    """A training job that did not (or cannot) give a drafter; the message says why."""


class TrainingFailedError(TrainingJobError):
    """SageMaker ended the job Failed (or Stopped); carries its FailureReason."""

    def __init__(self, job_name: str, status: str, reason: str, hint: str = "") -> None:
        self.job_name = job_name
        self.status = status
        self.failure_reason = reason
        # One line: the driver's failure file (the FailureReason) may hold several.
        text = f"training job {job_name} {status.lower()}: {' '.join(reason.split())}"
        super().__init__(f"{text}; {hint}" if hint else text)


class ExistingJobDiffersError(TrainingJobError):
    """A training job of the planned name exists with other content: not adopted."""


def check_job_name(name: str, field_name: str = "JOB") -> str:
    if not isinstance(name, str) or not JOB_NAME.match(name):
        raise InputError(
            field_name,
            f"{name!r} is not a SageMaker training job name",
            "1-63 letters, digits and hyphens, starting and ending with a letter or digit",
        )
    return name


def describe_or_none(sm: Any, name: str) -> dict[str, Any] | None:
    """DescribeTrainingJob, None when no job has that name."""
    from peagle_deploy.aws import is_not_found

    try:
        described: dict[str, Any] = sm.describe_training_job(TrainingJobName=name)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    return described


def describe(sm: Any, name: str) -> dict[str, Any]:
    described = describe_or_none(sm, name)
    if described is None:
        raise TrainingJobError(f"training job {name} does not exist in this region")
    return described


def job_tags(sm: Any, described: Mapping[str, Any]) -> list[dict[str, str]]:
    arn = described.get("TrainingJobArn")
    if not arn:
        return []
    return list(sm.list_tags(ResourceArn=arn).get("Tags", []))


def content_difference(
    request: Mapping[str, Any], described: Mapping[str, Any], tags: list[dict[str, str]]
) -> str | None:
    """The first field where an existing job is not what `request` creates."""
    found = difference(TRAINING_JOB, request, described, tags)
    if found is not None:
        return found
    for key in WHOLE_MAPS:
        wanted = request.get(key) or {}
        seen = described.get(key) or {}
        if isinstance(seen, Mapping):
            extra = sorted(str(k) for k in seen if k not in wanted)
            if extra:
                return f"{key}.{extra[0]}"
    return None


def _already_exists(exc: BaseException) -> bool:
    from peagle_deploy.aws import error_code, error_message

    return error_code(exc) == "ResourceInUse" or "already exist" in error_message(exc).lower()


def create_or_adopt(sm: Any, request: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
    """CreateTrainingJob; on "already exists", the job is described and adopted only if
    it is what the request creates. Returns (created, the job as described)."""
    name = str(request["TrainingJobName"])
    try:
        sm.create_training_job(**request)
    except Exception as exc:
        if not _already_exists(exc):
            raise
        described = describe(sm, name)
        field_name = content_difference(request, described, job_tags(sm, described))
        if field_name is not None:
            raise ExistingJobDiffersError(
                f"training job {name} already exists with a different {field_name}; its "
                "name comes from the spec's content, so something else made it: it was not "
                "used (change the spec, or find out who made the job)"
            ) from None
        return False, described
    return True, describe(sm, name)


# --- resume -------------------------------------------------------------------------------


def resume_name(sm: Any, name: str) -> str:
    """The next free `<base>-r<N>` for a job: the original content-derived name with the
    attempt's number (1-63 characters, as the API allows)."""
    found = RESUME_SUFFIX.search(name)
    base = name[: found.start()] if found else name
    first = int(found.group(1)) + 1 if found else 1
    for number in range(first, MAX_RESUMES + 1):
        suffix = f"-r{number}"
        candidate = base[: 63 - len(suffix)].rstrip("-") + suffix
        if describe_or_none(sm, candidate) is None:
            return candidate
    raise TrainingJobError(f"training job {base} was resumed {MAX_RESUMES} times already")


def create_request_of(sm: Any, described: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateTrainingJob request that made `described`: its members that the
    operation's input takes (botocore's model decides, not a list kept here)."""
    members = sm.meta.service_model.operation_model("CreateTrainingJob").input_shape.members
    return {k: v for k, v in described.items() if k in members and v not in (None, {}, [])}


@dataclass(frozen=True)
class ResumeRequest:
    """The new job that continues `source` from the same checkpoints."""

    source: str
    request: dict[str, Any] = field(default_factory=dict)

    @property
    def job_name(self) -> str:
        return str(self.request["TrainingJobName"])

    @property
    def checkpoint_uri(self) -> str:
        return str(self.request["CheckpointConfig"]["S3Uri"])


def resume_request(sm: Any, name: str) -> ResumeRequest:
    """The request of a new job with `name`'s content and CheckpointConfig, under a new
    name; refused for a job that completed, still runs, or kept no checkpoints."""
    described = describe(sm, name)
    status = str(described.get("TrainingJobStatus"))
    if status == "Completed":
        raise TrainingJobError(
            f"training job {name} completed: its drafter is at its output, nothing to resume"
        )
    if status not in RESUMABLE:
        raise TrainingJobError(
            f"training job {name} is {status}: stop it first (`peagle train stop {name}`) "
            "or wait for it to end"
        )
    checkpoint = (described.get("CheckpointConfig") or {}).get("S3Uri")
    if not checkpoint:
        raise TrainingJobError(
            f"training job {name} has no CheckpointConfig: there are no checkpoints to "
            "resume from; start it again instead"
        )
    request = create_request_of(sm, described)
    request["TrainingJobName"] = resume_name(sm, name)
    tags = [t for t in job_tags(sm, described) if not str(t.get("Key", "")).startswith("aws:")]
    if tags:
        request["Tags"] = tags
    return ResumeRequest(name, request)
