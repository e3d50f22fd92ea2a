"""SageMaker training jobs as the emulator plays them (moto's are Completed on creation).

CreateTrainingJob / DescribeTrainingJob / StopTrainingJob / ListTrainingJobs, with the
lifecycle SageMaker reports (docs/platform-facts.md, "Emulated training jobs"):

- Create checks the request against botocore's CreateTrainingJob model (required
  members, types, lengths, ranges), the training instance type against its enum, and
  what SageMaker refuses beyond the shapes: a name in use (`ResourceInUse`), managed spot
  without `StoppingCondition.MaxWaitTimeInSeconds` (or a wait shorter than the run time,
  or a wait without spot), a role that does not exist or does not trust SageMaker.
- InProgress, with SecondaryStatus Starting -> Downloading -> Training -> Uploading, each
  in SecondaryStatusTransitions with its start and end time, for the durations of the
  job's `TrainingScript`; then Completed, or Failed with a FailureReason:
  `ClientError` when a channel's S3 prefix holds no object (at the end of Downloading),
  `AlgorithmError` when the driver fails (a channel missing, a data line that is not a
  chat record, held-out acceptance below the `acceptance_floor` hyperparameter);
  StopTrainingJob: Stopping, then Stopped.
- The "driver" the emulator runs in Training is real work on the job's data: it reads
  the chat JSONL of the `data` channel, regenerates the answers with the emulated target
  (`chat.generate`, on-policy, as the real driver does with `regenerate`), fits the table
  drafter (`table_drafter`) on them, measures its acceptance per position on held-out
  prompts, and in Uploading writes the drafter and the metadata file to
  `contract.drafter_uri(S3OutputPath, job)`. It writes its lines to CloudWatch Logs
  `/aws/sagemaker/TrainingJobs`, stream `<job>/algo-1-<epoch seconds>`.

State advances when a job is read (no thread), from the extension's monotonic clock;
the times it shows come from its wall clock.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from peagle_local.emulator import training_driver

if TYPE_CHECKING:
    from peagle_local.emulator.moto_ext import MotoExtensions

LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
PHASES: Final = (
    ("Starting", "Preparing the instances for training."),
    ("Downloading", "Downloading input data"),
    ("Training", "Training image download completed. Training in progress."),
    ("Uploading", "Uploading generated training model"),
)
"""SecondaryStatus values of a job in progress, with the StatusMessage SageMaker shows."""
ENDED: Final = frozenset({"Completed", "Failed", "Stopped"})


@dataclass(frozen=True)
class TrainingScript:
    """How long a job spends in each secondary status (emulated seconds), and an optional
    failure SageMaker reports at the end of Starting (e.g. no capacity)."""

    starting_s: float = 0.0
    downloading_s: float = 0.0
    training_s: float = 0.0
    uploading_s: float = 0.0
    stopping_s: float = 0.0
    fail_reason: str | None = None

    def duration(self, phase: str) -> float:
        return float(getattr(self, f"{phase.lower()}_s"))


@dataclass
class TrainingJob:
    """One emulated job and where it stands."""

    name: str
    arn: str
    account_id: str
    region: str
    request: dict[str, Any]
    script: TrainingScript
    created: float
    """Monotonic clock at creation; `wall_at` turns clock times into dates."""
    created_wall: float
    status: str = "InProgress"
    secondary: str = "Starting"
    transitions: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None
    phase_until: float = 0.0
    training_started: float | None = None
    ended: float | None = None
    trained: training_driver.DriverResult | None = None
    log_stream: str = ""
    tags: list[dict[str, str]] = field(default_factory=list)
    """AddTags / ListTags / DeleteTags act on this (moto's, once the job is in its
    backend's `training_jobs`)."""

    def wall_at(self, clock_time: float) -> datetime:
        return datetime.fromtimestamp(self.created_wall + (clock_time - self.created), UTC)


@dataclass
class TrainingJobs:
    """The emulator's training jobs, keyed by account, region and name."""

    jobs: dict[tuple[str, str, str], TrainingJob] = field(default_factory=dict)
    scripts: dict[str, TrainingScript] = field(default_factory=dict)
    default_script: TrainingScript = field(default_factory=TrainingScript)

    def reset(self) -> None:
        self.jobs.clear()

    def script_for(self, name: str) -> TrainingScript:
        return self.scripts.get(name, self.default_script)

    def create(
        self, ext: MotoExtensions, account_id: str, region: str, params: dict[str, Any]
    ) -> TrainingJob:
        from moto.sagemaker.models import sagemaker_backends
        from moto.sagemaker.utils import arn_formatter

        check_request(account_id, params)
        name = str(params["TrainingJobName"])
        arn = arn_formatter("training-job", name, account_id, region)
        if (account_id, region, name) in self.jobs:
            raise _errors().ResourceInUseException(
                "Training job names must be unique within an AWS account and region, and a "
                f"training job with this name already exists ({arn})"
            )
        now = ext.clock()
        job = TrainingJob(
            name, arn, account_id, region, params, self.script_for(name), now, ext.wall()
        )
        job.log_stream = f"{name}/algo-1-{int(job.created_wall)}"
        job.tags = [dict(t) for t in params.get("Tags") or []]
        self.jobs[(account_id, region, name)] = job
        # moto's tagging finds a training job by ARN in this dict
        moto_jobs: dict[str, Any] = sagemaker_backends[account_id][region].training_jobs
        moto_jobs[name] = job
        _enter(job, "Starting", now)
        return job

    def get(self, ext: MotoExtensions, account_id: str, region: str, name: str) -> TrainingJob:
        job = self.jobs.get((account_id, region, name))
        if job is None:
            raise _errors().ValidationError(message=f"Requested resource not found: {name}")
        advance(ext, job)
        return job

    def stop(self, ext: MotoExtensions, account_id: str, region: str, name: str) -> None:
        job = self.get(ext, account_id, region, name)
        if job.status != "InProgress":
            raise _errors().ValidationError(
                message=f"The request was rejected because the training job is in status "
                f"{job.status}."
            )
        now = ext.clock()
        job.status = "Stopping"
        _enter(job, "Stopping", now, "Stopping the training job")
        job.phase_until = now + job.script.stopping_s

    def listed(
        self, ext: MotoExtensions, account_id: str, region: str, params: dict[str, Any]
    ) -> tuple[list[TrainingJob], str | None]:
        found = [j for (a, r, _), j in self.jobs.items() if (a, r) == (account_id, region)]
        for job in found:
            advance(ext, job)
        if params.get("NameContains"):
            found = [j for j in found if str(params["NameContains"]) in j.name]
        if params.get("StatusEquals"):
            found = [j for j in found if j.status == params["StatusEquals"]]
        key: Callable[[TrainingJob], Any] = {
            "Name": lambda j: j.name,
            "Status": lambda j: j.status,
        }.get(str(params.get("SortBy")), lambda j: j.created)
        # botocore's model: CreationTime and Ascending by default
        found.sort(key=key, reverse=params.get("SortOrder") == "Descending")
        token = str(params.get("NextToken") or "0")
        if not token.isdigit():
            raise _errors().ValidationError(message=f"Invalid pagination token: {token}")
        start = int(token)
        size = int(params.get("MaxResults") or 10)
        page = found[start : start + size]
        more = start + size < len(found)
        return page, str(start + size) if more else None


def _enter(job: TrainingJob, status: str, at: float, message: str | None = None) -> None:
    """Close the open secondary status and open `status` at clock time `at`."""
    stamp = job.wall_at(at)
    if job.transitions and "EndTime" not in job.transitions[-1]:
        job.transitions[-1]["EndTime"] = stamp
    job.secondary = status
    text = message if message is not None else dict(PHASES).get(status, "")
    entry: dict[str, Any] = {"Status": status, "StartTime": stamp, "StatusMessage": text}
    if status in ENDED:
        entry["EndTime"] = stamp
    job.transitions.append(entry)
    job.phase_until = at + (job.script.duration(status) if status in dict(PHASES) else 0.0)


def _end(job: TrainingJob, status: str, at: float, message: str, reason: str | None = None) -> None:
    job.status = status
    job.failure_reason = reason
    job.ended = at
    _enter(job, status, at, message)


def advance(ext: MotoExtensions, job: TrainingJob) -> None:
    """Play every transition that is due by now."""
    order = [name for name, _ in PHASES]
    while job.status in ("InProgress", "Stopping") and ext.clock() >= job.phase_until:
        at = job.phase_until
        if job.status == "Stopping":
            _end(job, "Stopped", at, "Training job stopped by the user")
            _log(job, at, ["SIGTERM received: training stopped, no drafter uploaded"])
            return
        phase = job.secondary
        problem = _finish_phase(job, phase, at)
        if problem is not None:
            _end(job, "Failed", at, "Training job failed", problem)
            _log(job, at, [f"FAILED: {problem}"])
            return
        following = order.index(phase) + 1
        if following == len(order):
            _end(job, "Completed", at, "Training job completed")
            return
        if order[following] == "Training":
            job.training_started = at
        _enter(job, order[following], at)


def _finish_phase(job: TrainingJob, phase: str, at: float) -> str | None:
    """What ends `phase`: the FailureReason, or None to go on."""
    if phase == "Starting":
        return job.script.fail_reason
    if phase == "Downloading":
        return training_driver.empty_channel(job.account_id, job.request)
    if phase == "Training":
        result = training_driver.run(job.account_id, job.request)
        _log(job, at, result.log_lines)
        if isinstance(result, training_driver.DriverFailure):
            return f"AlgorithmError: {result.reason}"
        job.trained = result
        return None
    assert job.trained is not None  # Uploading follows a successful Training
    problem = training_driver.upload(job.account_id, job.request, job.trained)
    if problem is None:
        _log(job, at, [f"peagle-train: uploaded the drafter to {job.trained.drafter_uri}"])
    return problem


def _log(job: TrainingJob, at: float, lines: list[str]) -> None:
    """The container's output, in CloudWatch Logs as SageMaker keeps it."""
    from moto.logs.models import logs_backends

    if not lines:
        return
    backend = logs_backends[job.account_id][job.region]
    if LOG_GROUP not in backend.groups:
        backend.create_log_group(LOG_GROUP, {})
    backend.ensure_log_stream(LOG_GROUP, job.log_stream)
    stamp = int(job.wall_at(at).timestamp() * 1000)
    events = [{"timestamp": stamp, "message": line} for line in lines]
    backend.put_log_events(LOG_GROUP, job.log_stream, events)


# --- the request's checks ------------------------------------------------------------
@functools.cache
def _model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


def check_request(account_id: str, params: dict[str, Any]) -> None:
    """Refuse what SageMaker refuses before a job exists (ValidationException)."""
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    fail = _errors().ValidationError
    shape = _model().operation_model("CreateTrainingJob").input_shape
    try:
        validate_parameters(params, shape)
    except ParamValidationError as exc:
        raise fail(message=" ".join(str(exc).split())) from None
    instance = (params.get("ResourceConfig") or {}).get("InstanceType")
    allowed = _model().shape_for("TrainingInstanceType").enum
    if instance is not None and instance not in allowed:
        raise fail(
            message=f"Value '{instance}' at 'resourceConfig.instanceType' failed to satisfy "
            "constraint: Member must satisfy enum value set"
        )
    algorithm = params.get("AlgorithmSpecification") or {}
    if not algorithm.get("TrainingImage") and not algorithm.get("AlgorithmName"):
        raise fail(message="AlgorithmSpecification needs a TrainingImage or an AlgorithmName.")
    _check_spot(params)
    _check_role(account_id, str(params["RoleArn"]))


def _check_spot(params: dict[str, Any]) -> None:
    fail = _errors().ValidationError
    stopping = params.get("StoppingCondition") or {}
    wait = stopping.get("MaxWaitTimeInSeconds")
    run = stopping.get("MaxRuntimeInSeconds", 86400)
    if params.get("EnableManagedSpotTraining"):
        if wait is None:
            raise fail(
                message="StoppingCondition.MaxWaitTimeInSeconds is required when "
                "EnableManagedSpotTraining is true."
            )
        if wait < run:
            raise fail(
                message=f"StoppingCondition.MaxWaitTimeInSeconds ({wait}) must be equal to or "
                f"greater than MaxRuntimeInSeconds ({run})."
            )
    elif wait is not None:
        raise fail(
            message="StoppingCondition.MaxWaitTimeInSeconds is only supported when "
            "EnableManagedSpotTraining is true."
        )


def _check_role(account_id: str, role_arn: str) -> None:
    """SageMaker assumes the role when the job is created: it must exist and trust it."""
    from moto.iam.models import iam_backends

    refusal = (
        f"Could not assume role {role_arn}. Please ensure that the role exists and allows "
        "principal 'sagemaker.amazonaws.com' to assume the role."
    )
    try:
        role = iam_backends[account_id]["global"].get_role_by_arn(role_arn)
    except Exception:
        raise _errors().ValidationError(message=refusal) from None
    trust = role.assume_role_policy_document
    text = trust if isinstance(trust, str) else json.dumps(trust)
    if "sagemaker.amazonaws.com" not in text:
        raise _errors().ValidationError(message=refusal)


def _errors() -> Any:
    from moto.sagemaker import exceptions

    return exceptions


# --- the answers ---------------------------------------------------------------------
def describe(job: TrainingJob) -> dict[str, Any]:
    """DescribeTrainingJob's answer."""
    from peagle_train import contract

    request = job.request
    output = request["OutputDataConfig"]
    out: dict[str, Any] = {
        "TrainingJobName": job.name,
        "TrainingJobArn": job.arn,
        "ModelArtifacts": {
            "S3ModelArtifacts": contract.drafter_uri(output["S3OutputPath"], job.name).removesuffix(
                f"{contract.DRAFTER_SUBDIR}/"
            )
        },
        "TrainingJobStatus": job.status,
        "SecondaryStatus": job.secondary,
        "CreationTime": job.wall_at(job.created),
        "LastModifiedTime": job.transitions[-1]["StartTime"],
        "SecondaryStatusTransitions": [dict(t) for t in job.transitions],
        "StoppingCondition": request.get("StoppingCondition") or {"MaxRuntimeInSeconds": 86400},
    }
    for key in (
        "HyperParameters",
        "AlgorithmSpecification",
        "RoleArn",
        "InputDataConfig",
        "OutputDataConfig",
        "ResourceConfig",
        "VpcConfig",
        "CheckpointConfig",
        "Environment",
        "RetryStrategy",
    ):
        if key in request:
            out[key] = request[key]
    for key in (
        "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption",
        "EnableManagedSpotTraining",
    ):
        out[key] = bool(request.get(key, False))
    if job.failure_reason:
        out["FailureReason"] = job.failure_reason
    if job.training_started is not None:
        out["TrainingStartTime"] = job.wall_at(job.training_started)
    if job.ended is not None:
        out["TrainingEndTime"] = job.wall_at(job.ended)
        seconds = max(1, round(job.ended - (job.training_started or job.created)))
        out["TrainingTimeInSeconds"] = seconds
        out["BillableTimeInSeconds"] = seconds
    return out


def summary(job: TrainingJob) -> dict[str, Any]:
    """One ListTrainingJobs entry."""
    out: dict[str, Any] = {
        "TrainingJobName": job.name,
        "TrainingJobArn": job.arn,
        "CreationTime": job.wall_at(job.created),
        "TrainingJobStatus": job.status,
        "SecondaryStatus": job.secondary,
        "LastModifiedTime": job.transitions[-1]["StartTime"],
    }
    if job.ended is not None:
        out["TrainingEndTime"] = job.wall_at(job.ended)
    return out


def install(ext: MotoExtensions) -> None:
    """Put the emulator's training jobs in place of moto's (undone on exit)."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    store = ext.training_jobs

    def where(r: Any) -> tuple[str, str]:
        return r.current_account, r.region

    def create(r: Any) -> Any:
        with ext._lock:
            job = store.create(ext, *where(r), r._get_params())
            return ActionResult({"TrainingJobArn": job.arn})

    def describe_(r: Any) -> Any:
        with ext._lock:
            return ActionResult(
                describe(store.get(ext, *where(r), r._get_param("TrainingJobName")))
            )

    def stop(r: Any) -> Any:
        with ext._lock:
            store.stop(ext, *where(r), r._get_param("TrainingJobName"))
            return ActionResult({})

    def list_(r: Any) -> Any:
        with ext._lock:
            page, token = store.listed(ext, *where(r), r._get_params())
            answer: dict[str, Any] = {"TrainingJobSummaries": [summary(j) for j in page]}
            if token is not None:
                answer["NextToken"] = token
            return ActionResult(answer)

    for action, handler in (
        ("create_training_job", create),
        ("describe_training_job", describe_),
        ("stop_training_job", stop),
        ("list_training_jobs", list_),
    ):
        ext._patch(SageMakerResponse, action, handler)
