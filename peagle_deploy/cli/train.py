"""`peagle train start | status | logs | stop | resume`: a P-EAGLE drafter for your own model.

The SDK's `peagle_deploy.train.run` from a shell. `start` reads a training spec (a file
whose top-level key is `train:`, docs/train.md), runs the doctor's training checks, creates
the SageMaker training job and waits for it; every command prints one JSON document with
`--json`. Bad input is one line and exit 2, before any AWS call; a job that fails is
one line with SageMaker's FailureReason and exit 1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.errors import InputError

if TYPE_CHECKING:
    from peagle_deploy.train.progress import JobStatus
    from peagle_deploy.train.result import TrainedDrafter

EXAMPLES = """\
Examples:

  peagle train plan --file examples/train-qwen3-8b.yaml   # the request and its cost, no AWS call

  peagle train start --file examples/train-qwen3-8b.yaml   # doctor, job, progress, drafter

  peagle train start --file examples/train-qwen3-8b.yaml --no-wait --json

  peagle train status peagle-train-dev--qwen3-8b-support-t1a2b3c4d

  peagle train logs peagle-train-dev--qwen3-8b-support-t1a2b3c4d --follow

  peagle train stop peagle-train-dev--qwen3-8b-support-t1a2b3c4d

  # after a spot interruption or a stop: a new job on the same checkpoints
  peagle train resume peagle-train-dev--qwen3-8b-support-t1a2b3c4d
"""

train_app = typer.Typer(
    name="train",
    help=(
        "Train a P-EAGLE drafter for your own model on SageMaker, then deploy it."
        "\n\nThe job's drafter lands at an S3 prefix that `peagle plan/deploy --file` takes "
        "as `custom.drafter_uri` with `drafter_kind: p-eagle` and the trained K.\n\n" + EXAMPLES
    ),
    no_args_is_help=True,
    add_completion=False,
)

JobArg = Annotated[
    str, typer.Argument(help="Training job name (as `start` printed it).", show_default=False)
]
ProgressOpt = Annotated[
    bool, typer.Option("--no-progress", help="No progress lines, even on a terminal.")
]
NoWaitOpt = Annotated[
    bool, typer.Option("--no-wait", help="Return once SageMaker accepted the job.")
]


def _say(enabled: bool) -> Callable[[str], None] | None:
    """A progress callback printing to stderr, or None."""
    if not enabled:
        return None

    def say(line: str) -> None:
        output.err_console.print(line, highlight=False, markup=False)

    return say


def _show(no_progress: bool, as_json: bool) -> bool:
    import sys

    return not (no_progress or as_json) and sys.stderr.isatty()


def _check(job: str | None, region: str | None) -> None:
    from peagle_deploy.train.job import check_job_name
    from peagle_deploy.validation.aws_shapes import check_region

    if job is not None:
        check_job_name(job, "JOB")
    if region is not None:
        check_region(region, "--region")


def _print_drafter(drafter: TrainedDrafter) -> None:
    lines = [f"{drafter.job_name}: {drafter.status}", f"drafter_uri: {drafter.drafter_uri}"]
    if drafter.status == "Completed":
        lines += [
            f"drafter_kind: {drafter.drafter_kind}",
            f"trained K: {drafter.num_speculative_tokens}",
        ]
        if drafter.acceptance_per_position:
            shown = ", ".join(f"{a:.2f}" for a in drafter.acceptance_per_position)
            lines.append(f"acceptance per position: {shown}")
        if drafter.mean_accepted_per_step is not None:
            lines.append(f"mean accepted tokens per step: {drafter.mean_accepted_per_step:.2f}")
        lines.append(
            "deploy it: custom.drafter_uri, custom.drafter_kind: p-eagle and "
            f"speculative.num_speculative_tokens: {drafter.num_speculative_tokens} in the spec"
        )
    else:
        lines.append(f"watch it: peagle train status {drafter.job_name}")
    for line in lines:
        output.console.print(line, highlight=False, markup=False)


def _print_status(status: JobStatus) -> None:
    lines = [f"{status.job_name}: {status.status} / {status.secondary_status}"]
    if status.failure_reason:
        lines.append(f"failure reason: {status.failure_reason}")
    lines += [f"  {m}" for m in status.messages[-10:]]
    billing = status.billing_line()
    if billing:
        lines.append(billing)
    if status.checkpoint_uri:
        lines.append(f"checkpoints: {status.checkpoint_uri}")
    if status.status == "Completed" and status.drafter_uri:
        lines.append(f"drafter_uri: {status.drafter_uri}")
    for line in lines:
        output.console.print(line, highlight=False, markup=False)


def _check_file(file: Path | None) -> Path:
    if file is None:
        raise InputError("--file", "no training spec given", "--file SPEC.yaml with `train:`")
    if not file.is_file():
        raise InputError("--file", f"{str(file)!r} is not a readable file", "a YAML or JSON spec")
    return file


@train_app.command("plan", epilog=EXAMPLES)
def plan_command(file: so.FileOpt = None, as_json: so.JsonOpt = False) -> None:
    """Show the CreateTrainingJob request a spec sends and its cost (no AWS call).

    The same as `peagle plan --file SPEC` for a training spec: the job's name, where the
    drafter lands, the K it is trained for, the most it costs in instance-hours, then the
    request itself.
    """
    from peagle_deploy.cli.plan import print_training_plan
    from peagle_deploy.train.plan import plan_document
    from peagle_deploy.train.run import resolve_plan

    plan, _ = resolve_plan(_check_file(file))
    document = plan_document(plan)
    if as_json:
        output.emit_json(document)
        return
    print_training_plan(document)


@train_app.command("start", epilog=EXAMPLES)
def start_command(  # noqa: PLR0917 (one parameter per CLI flag)
    file: so.FileOpt = None,
    region: so.RegionOpt = None,
    no_doctor: Annotated[
        bool, typer.Option("--no-doctor", help="Skip the read-only checks before the job.")
    ] = False,
    no_wait: NoWaitOpt = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Check, then start the training job of a spec and wait for its drafter.

    The doctor checks first (training quota for the instance type, the target's config and
    chat template, the data, the role and whether you may pass it, the role's S3 access,
    KMS); then CreateTrainingJob, with a line per status change. Prints where the drafter
    is, the K it was trained for and its acceptance per position. A job of the same name
    is adopted only if its content is the spec's. Ctrl-C stops watching, not the job.
    """
    from peagle_deploy.train.run import drafter_json, resolve_plan, train_drafter

    _check(None, region)
    plan, spec_region = resolve_plan(_check_file(file))  # bad input: exit 2, no AWS call
    drafter = train_drafter(
        plan,
        wait=not no_wait,
        region=region or spec_region,
        progress=_say(_show(no_progress, as_json)),
        doctor=not no_doctor,
    )
    if as_json:
        output.emit_json(drafter_json(drafter))
        return
    _print_drafter(drafter)


def _report(status: JobStatus, as_json: bool) -> None:
    """A job's status: the JSON document, or the table."""
    if as_json:
        output.emit_json(status.to_json())
        return
    _print_status(status)


@train_app.command("status", epilog=EXAMPLES)
def status_command(job: JobArg, region: so.RegionOpt = None, as_json: so.JsonOpt = False) -> None:
    """Show a job's status, SageMaker's messages, billable seconds and spot savings.

    Changes nothing. Exit 0 whatever the status (a failed job's reason is printed).
    """
    from peagle_deploy.train.run import train_status

    _check(job, region)
    status = train_status(job, region=region)
    _report(status, as_json)


@train_app.command("logs", epilog=EXAMPLES)
def logs_command(
    job: JobArg,
    region: so.RegionOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep printing new lines until the job ends.")
    ] = False,
    lines: Annotated[
        int, typer.Option("--lines", min=1, max=10_000, help="Last lines per instance first.")
    ] = 100,
) -> None:
    """Print the job's log lines (CloudWatch Logs /aws/sagemaker/TrainingJobs).

    The last --lines of each instance's stream (prefixed by the instance when there are
    several); with --follow, then each new line until the job ends (Ctrl-C stops).
    """
    from peagle_deploy.train.run import training_logs

    _check(job, region)
    try:
        for line in training_logs(job, region=region, lines=lines, follow=follow):
            output.console.print(line, highlight=False, markup=False)
    except KeyboardInterrupt:
        output.warn(f"stopped following; the job goes on (`peagle train status {job}`)")
        raise typer.Exit(130) from None


@train_app.command("stop", epilog=EXAMPLES)
def stop_command(
    job: JobArg,
    region: so.RegionOpt = None,
    no_wait: NoWaitOpt = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Stop a running job (StopTrainingJob): Stopping, then Stopped.

    Its checkpoints stay in S3; `peagle train resume JOB` continues from them. A job that
    already ended Completed or Failed is refused (exit 1).
    """
    from peagle_deploy.train.run import stop_training

    _check(job, region)
    status = stop_training(
        job, region=region, wait=not no_wait, progress=_say(_show(no_progress, as_json))
    )
    _report(status, as_json)


@train_app.command("resume", epilog=EXAMPLES)
def resume_command(
    job: JobArg,
    region: so.RegionOpt = None,
    no_wait: NoWaitOpt = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Start a new job that continues a stopped or failed one from its checkpoints.

    The new job (`JOB-r1`, `-r2`, ...) has the old one's content and the same
    CheckpointConfig.S3Uri, so the driver resumes from the last checkpoint. A Completed
    job is refused (its drafter exists), as is one still running.
    """
    from peagle_deploy.train.run import drafter_json, resume_training

    _check(job, region)
    drafter = resume_training(
        job, region=region, wait=not no_wait, progress=_say(_show(no_progress, as_json))
    )
    if as_json:
        output.emit_json(drafter_json(drafter))
        return
    _print_drafter(drafter)


def register(app: typer.Typer) -> None:
    """Add `peagle train` to the root app."""
    app.add_typer(train_app, name="train")
