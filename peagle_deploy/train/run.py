"""`train_drafter()`: spec -> plan -> doctor -> CreateTrainingJob -> wait -> the drafter.

| the job of the plan's name        | action                                                  |
|-----------------------------------|---------------------------------------------------------|
| absent                            | create it; wait                                         |
| exists, same content, running     | adopt it; wait                                          |
| exists, same content, Completed   | adopt it; read its drafter back (no mutating call)      |
| exists, same content, Failed      | TrainingFailedError with its FailureReason (+ resume)   |
| exists, same content, Stopped     | TrainingFailedError: resume it (`resume_training`)      |
| exists, other content             | ExistingJobDiffersError: never adopted by name          |

A completed job's result is read from the metadata file the driver wrote beside the
drafter (`readback`): `TrainedDrafter.drafter_uri` with `drafter_kind` "p-eagle" and the
K it was trained for is what `peagle plan/deploy --file` takes as `custom.drafter_uri`.
`train_status`, `stop_training`, `resume_training` and `training_logs` act on a job by
name, in the session's region.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.train import job as jobs
from peagle_deploy.train.progress import JobStatus, Say, job_status, wait_for_job
from peagle_deploy.train.result import TrainedDrafter, TrainingPlan

if TYPE_CHECKING:
    from peagle_deploy.train.spec import TrainingSpec


def resolve_plan(
    spec: TrainingSpec | TrainingPlan | str | Path | Mapping[str, Any],
) -> tuple[TrainingPlan, str | None]:
    """The plan of a spec (a TrainingSpec, a file, a mapping) and the spec's region, or a
    plan as it is (its region: the caller's); no AWS call, InputError on bad input."""
    if isinstance(spec, TrainingPlan):
        return spec, None
    from peagle_deploy.train.plan import build_training_plan
    from peagle_deploy.train.spec import TrainingSpec, load_training_spec

    the_spec = spec if isinstance(spec, TrainingSpec) else load_training_spec(spec)
    return build_training_plan(the_spec), the_spec.region


def _session(session: Any, region: str | None) -> Any:
    from peagle_deploy.aws import make_session

    return make_session(region, session)


def _region(session: Any, region: str | None) -> str:
    from peagle_deploy.aws import DEFAULT_REGION

    return region or session.region_name or DEFAULT_REGION


def _client(session: Any, service: str, region: str) -> Any:
    from peagle_deploy.aws import client_config

    return session.client(service, region_name=region, config=client_config())


def _finish(s3: Any, status: JobStatus) -> TrainedDrafter:
    """The drafter of a job that ended Completed; TrainingFailedError otherwise."""
    from peagle_deploy.train.readback import read_drafter

    name = status.job_name
    if status.status == "Completed":
        return read_drafter(s3, status.raw)
    hint = ""
    if status.status in jobs.RESUMABLE and status.checkpoint_uri:
        hint = f"resume it from its checkpoints with `peagle train resume {name}`"
    reason = status.failure_reason or f"stopped ({status.secondary_status})"
    raise jobs.TrainingFailedError(name, status.status, reason, hint)


def train_drafter(
    spec: TrainingSpec | TrainingPlan | str | Path | Mapping[str, Any],
    *,
    wait: bool = True,
    session: Any = None,
    progress: Callable[[str], None] | None = None,
    doctor: bool = True,
    region: str | None = None,
) -> TrainedDrafter:
    """Train a P-EAGLE drafter on SageMaker (see the module doc for each case).

    `spec`: a TrainingSpec, a spec file, a mapping (its region is the job's), or a
    TrainingPlan as it is (in `region`, else the session's).
    `progress`: called with one line per status change and SageMaker message.
    `doctor=False` skips the read-only checks (`peagle_deploy.doctor.training`) that
    otherwise run first and raise TrainingDoctorFailedError before CreateTrainingJob.
    `wait=False`: returns once the job is created or adopted, with its status.
    """
    plan, spec_region = resolve_plan(spec)
    region = region or spec_region
    session = _session(session, region)
    where = _region(session, region)
    warnings = list(plan.warnings)
    if doctor:
        from peagle_deploy.doctor.training import TrainingDoctorFailedError, run_training_doctor

        report = run_training_doctor(plan.request, region=where, boto_session=session)
        if not report.ok:
            raise TrainingDoctorFailedError(report)
        warnings += [f"doctor: {r.line()}" for r in report.warnings]
    for line in warnings:
        if progress is not None:
            progress(f"warning: {line}")
    sm = _client(session, "sagemaker", where)
    created, described = jobs.create_or_adopt(sm, plan.request)
    if progress is not None:
        action = "created" if created else "adopted (same content)"
        progress(f"{plan.job_name}: {action}; drafter will land at {plan.drafter_uri}")
    status = job_status(described)
    if not wait:
        if status.status in jobs.SETTLED:
            return _finish(_client(session, "s3", where), status)
        return _pending(plan, status)
    status = wait_for_job(sm, plan.job_name, say=progress)
    return _finish(_client(session, "s3", where), status)


def _pending(plan: TrainingPlan, status: JobStatus) -> TrainedDrafter:
    """A job still running: where its drafter will be and the K it is trained for."""
    return TrainedDrafter(
        job_name=plan.job_name,
        status=status.status,
        drafter_uri=plan.drafter_uri,
        num_speculative_tokens=plan.num_speculative_tokens,
    )


def train_status(job_name: str, *, session: Any = None, region: str | None = None) -> JobStatus:
    """What DescribeTrainingJob says about the job (no change)."""
    jobs.check_job_name(job_name)
    session = _session(session, region)
    return job_status(
        jobs.describe(_client(session, "sagemaker", _region(session, region)), job_name)
    )


def stop_training(
    job_name: str,
    *,
    session: Any = None,
    region: str | None = None,
    wait: bool = True,
    progress: Say | None = None,
) -> JobStatus:
    """StopTrainingJob: InProgress -> Stopping -> Stopped (waited for with `wait`). A job
    already stopping or stopped is left as it is; one that ended otherwise is refused."""
    jobs.check_job_name(job_name)
    session = _session(session, region)
    sm = _client(session, "sagemaker", _region(session, region))
    status = job_status(jobs.describe(sm, job_name))
    if status.status in ("Completed", "Failed"):
        raise jobs.TrainingJobError(
            f"training job {job_name} already ended {status.status}: nothing to stop"
        )
    if status.status == "InProgress":
        sm.stop_training_job(TrainingJobName=job_name)
        if progress is not None:
            progress(f"{job_name}: stop requested (SageMaker saves the last checkpoints)")
    if not wait:
        return job_status(jobs.describe(sm, job_name))
    return wait_for_job(sm, job_name, say=progress)


def resume_training(
    job_name: str,
    *,
    session: Any = None,
    region: str | None = None,
    wait: bool = True,
    progress: Say | None = None,
) -> TrainedDrafter:
    """A new job (`<name>-r<N>`) with the stopped or failed job's content and the same
    CheckpointConfig.S3Uri, so the driver continues from its checkpoints. A Completed job
    (its drafter exists) or a running one is refused."""
    jobs.check_job_name(job_name)
    session = _session(session, region)
    where = _region(session, region)
    sm = _client(session, "sagemaker", where)
    resume = jobs.resume_request(sm, job_name)
    sm.create_training_job(**resume.request)
    if progress is not None:
        progress(f"{resume.job_name}: created, resuming {job_name} from {resume.checkpoint_uri}")
    status = job_status(jobs.describe(sm, resume.job_name))
    if wait:
        status = wait_for_job(sm, resume.job_name, say=progress)
    if status.status in jobs.SETTLED:
        return _finish(_client(session, "s3", where), status)
    from peagle_deploy.train.readback import drafter_location

    return TrainedDrafter(
        job_name=resume.job_name,
        status=status.status,
        drafter_uri=drafter_location(status.raw),
        num_speculative_tokens=_trained_k(status.raw),
    )


def _trained_k(described: Mapping[str, Any]) -> int:
    from peagle_train.contract import HP_NUM_DEPTHS

    value = (described.get("HyperParameters") or {}).get(HP_NUM_DEPTHS)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def training_logs(
    job_name: str,
    *,
    session: Any = None,
    region: str | None = None,
    lines: int = 100,
    follow: bool = False,
) -> Iterator[str]:
    """The job's log lines (the last `lines` per instance; `follow`: until it ends)."""
    from peagle_deploy.train.logs import log_lines

    jobs.check_job_name(job_name)
    session = _session(session, region)
    where = _region(session, region)
    sm = _client(session, "sagemaker", where)
    jobs.describe(sm, job_name)  # a mistyped name says so, not "no log lines"
    return log_lines(_client(session, "logs", where), job_name, lines=lines, follow=follow, sm=sm)


def drafter_json(drafter: TrainedDrafter) -> dict[str, Any]:
    """A TrainedDrafter for --json, with the `custom:` block a deployment spec takes."""
    return {
        "job_name": drafter.job_name,
        "status": drafter.status,
        "drafter_uri": drafter.drafter_uri,
        "drafter_kind": drafter.drafter_kind,
        "num_speculative_tokens": drafter.num_speculative_tokens,
        "acceptance_per_position": list(drafter.acceptance_per_position),
        "mean_accepted_per_step": drafter.mean_accepted_per_step,
        "metadata": drafter.metadata,
        "deploy_with": {
            "custom": {
                "drafter_uri": drafter.drafter_uri,
                "drafter_kind": drafter.drafter_kind,
                "drafter_parallel_tokens": drafter.num_speculative_tokens,
            },
            "speculative": {"num_speculative_tokens": drafter.num_speculative_tokens},
        },
    }
