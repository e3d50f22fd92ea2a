"""`peagle experiment start | status | watch | conclude | abort ENDPOINT`: tune K on live traffic.

The SDK's `peagle_deploy.experiment.lifecycle` from a shell; every command prints one
JSON document with `--json`. The experiment itself (candidate, mode, shares, decision
settings, guardrails) is the spec's `experiment:` block (docs/experiments.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.report import render_status

if TYPE_CHECKING:
    from peagle_deploy.experiment.lifecycle import ExperimentOutcome, ExperimentStatus

EXAMPLES = """\
Examples:

  peagle experiment start peagle-gpt-oss-20b-prod --file stages/prod.yaml \\
      --experiment-role-arn arn:aws:iam::123456789012:role/peagle-shadow-tests

  peagle experiment status peagle-gpt-oss-20b-prod --stage prod --plot experiment.png

  peagle experiment watch peagle-gpt-oss-20b-prod --stage prod     # acts on the decision

  peagle experiment conclude peagle-gpt-oss-20b-prod --stage prod --json
"""

experiment_app = typer.Typer(
    name="experiment",
    help=(
        "Try other speculative settings on an endpoint's own traffic; promote the winner."
        "\n\nThe candidate's settings (K, mode, drafter) run beside the serving ones, as a "
        "shadow or a split variant.\n\n" + EXAMPLES
    ),
    no_args_is_help=True,
    add_completion=False,
)

EndpointArg = Annotated[str, typer.Argument(help="Endpoint name.", show_default=False)]
StageOpt = Annotated[
    str, typer.Option("--stage", help="Stage the endpoint belongs to (its manifest's).")
]
ProgressOpt = Annotated[
    bool, typer.Option("--no-progress", help="No progress display, even on a terminal.")
]


def _check(name: str, region: str | None, stage: str) -> None:
    from peagle_deploy.spec.stage import check_stage_name
    from peagle_deploy.validation.aws_shapes import check_endpoint_name, check_region

    check_endpoint_name(name, "ENDPOINT")
    if region is not None:
        check_region(region, "--region")
    check_stage_name(stage, "--stage")


def _print_outcome(outcome: ExperimentOutcome) -> None:
    output.console.print(
        f"[bold]{escape(outcome.endpoint_name)}[/]: {escape(outcome.action)} "
        f"({escape(outcome.reason)})",
        highlight=False,
    )
    if outcome.removed:
        output.console.print(
            f"removed: {', '.join(outcome.removed)}", highlight=False, markup=False
        )
    if outcome.manifest_parameter:
        output.console.print(
            f"manifest: {outcome.manifest_parameter}", highlight=False, markup=False
        )


@experiment_app.command("start", epilog=EXAMPLES)
def start_command(  # noqa: PLR0917 (one parameter per CLI flag)
    endpoint: EndpointArg,
    file: so.FileOpt = None,
    stage: Annotated[
        str | None, typer.Option("--stage", help="Stage (default: the spec's, else dev).")
    ] = None,
    region: so.RegionOpt = None,
    role_arn: Annotated[
        str | None,
        typer.Option(
            "--role-arn", help="The execution role (the spec's execution_role_arn, as for deploy)."
        ),
    ] = None,
    experiment_role_arn: Annotated[
        str | None,
        typer.Option(
            "--experiment-role-arn",
            help="Shadow mode: the role SageMaker assumes to run the InferenceExperiment.",
        ),
    ] = None,
    no_doctor: Annotated[
        bool, typer.Option("--no-doctor", help="Skip the read-only checks of `peagle doctor`.")
    ] = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Return once SageMaker accepted the experiment.")
    ] = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Put the spec's candidate beside the serving incumbent (no traffic is dropped).

    The spec is --file (with an `experiment:` block), else the one the stage manifest
    records; it must be the spec the endpoint serves. Shadow mode runs as SageMaker's
    InferenceExperiment (--experiment-role-arn); split mode as two production variants.
    Run again with the same spec after an interruption, it resumes the same start.
    """
    from peagle_deploy.experiment.lifecycle import start_experiment
    from peagle_deploy.validation.aws_shapes import check_role

    _check(endpoint, region, stage or "dev")
    for flag, value in (("--role-arn", role_arn), ("--experiment-role-arn", experiment_role_arn)):
        if value is not None:
            check_role(value, flag)
    status = start_experiment(
        endpoint,
        spec_file=str(file) if file is not None else None,
        stage=stage,
        region=region,
        role_arn=role_arn,
        experiment_role_arn=experiment_role_arn,
        wait=not no_wait,
        progress=False if (no_progress or as_json) else None,
        doctor=not no_doctor,
    )
    if as_json:
        output.emit_json(status.to_json())
        return
    render_status(status, output.console)


@experiment_app.command("status", epilog=EXAMPLES)
def status_command(  # noqa: PLR0917 (one parameter per CLI flag)
    endpoint: EndpointArg,
    stage: StageOpt = "dev",
    region: so.RegionOpt = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            "-f",
            help="The spec with the experiment, when no record exists (a CDK stage's spec).",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also write the variants over time to this file (.png, .pdf or .svg).",
        ),
    ] = None,
    as_json: so.JsonOpt = False,
) -> None:
    """Show each variant's figures, the difference and the decision so far.

    Per variant: output tokens/s per instance, decode speed per stream, TTFT and ITL
    percentiles, acceptance length, error rate; then the difference with its confidence
    interval, the decision and any guardrail crossed. Changes nothing.
    """
    from peagle_deploy.experiment.lifecycle import experiment_status

    _check(endpoint, region, stage)
    if plot is not None:
        _check_plot(plot)
    spec = None
    if file is not None:
        from peagle_deploy.spec import load_spec

        spec = load_spec(file, file_field="--file", stage=stage, region=region)
    status = experiment_status(endpoint, stage=stage, region=region, spec=spec)
    written = None
    if plot is not None and status.analysis is not None:
        from peagle_deploy.experiment.plot import plot_experiment

        written = str(plot_experiment(status, plot))
    if as_json:
        output.emit_json({**status.to_json(), "plot": written})
        return
    render_status(status, output.console)
    if written:
        output.console.print(f"plot: {written}", highlight=False, markup=False)
    elif plot is not None:
        output.console.print(
            f"plot: not written ({plot}): no data yet", highlight=False, markup=False
        )


def _check_plot(plot: Path) -> None:
    """Where --plot writes must be a file of a format it draws, in an existing directory
    (before any AWS call)."""
    from peagle_deploy.experiment.plot import FORMATS, plot_format

    if plot_format(plot) is None:
        raise InputError(
            "--plot",
            f"{str(plot)!r} does not end in a format the plot is drawn in",
            [f"FILE.{f}" for f in FORMATS],
        )
    folder = plot.parent if str(plot.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(
            "--plot", f"{str(folder)!r} is not an existing directory", "FILE.png in one"
        )
    if plot.is_dir():
        raise InputError(
            "--plot", f"{str(plot)!r} is a directory", "a file path, e.g. experiment.png"
        )


@experiment_app.command("watch", epilog=EXAMPLES)
def watch_command(  # noqa: PLR0917 (one parameter per CLI flag)
    endpoint: EndpointArg,
    stage: StageOpt = "dev",
    region: so.RegionOpt = None,
    interval: Annotated[
        float, typer.Option("--interval", min=1.0, max=3600.0, help="Seconds between reads.")
    ] = 60.0,
    no_act: Annotated[
        bool,
        typer.Option("--no-act", help="Stop at a decision or a breach instead of acting on it."),
    ] = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Read the experiment until it ends, acting on guardrails and the decision.

    Every --interval seconds: a guardrail breach aborts it (the incumbent is restored), a
    decision (or the maximum duration) concludes it.
    """
    from peagle_deploy.experiment.lifecycle import ExperimentStatus, watch_experiment

    _check(endpoint, region, stage)

    def show(status: ExperimentStatus) -> None:
        if as_json or no_progress:
            return
        a = status.analysis
        line = (
            f"{a.elapsed_s / 60:.1f} min: {a.decision.verdict} ({a.decision.reason})"
            if a is not None
            else f"{status.record.state} (endpoint {status.endpoint_status})"
        )
        output.err_console.print(line, highlight=False, markup=False)

    try:
        result = watch_experiment(
            endpoint,
            stage=stage,
            region=region,
            interval_s=interval,
            act=not no_act,
            progress=False if (no_progress or as_json) else None,
            on_status=show,
        )
    except KeyboardInterrupt:
        output.warn(
            f"stopped watching; the experiment runs on (`peagle experiment status {endpoint}`)"
        )
        raise typer.Exit(130) from None
    if as_json:
        output.emit_json(result.to_json())
    elif isinstance(result, ExperimentStatus):
        render_status(result, output.console)
    else:
        _print_outcome(result)


@experiment_app.command("conclude", epilog=EXAMPLES)
def conclude_command(  # noqa: PLR0917 (one parameter per CLI flag)
    endpoint: EndpointArg,
    stage: StageOpt = "dev",
    region: so.RegionOpt = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="End it before its minimums (the incumbent stays)."),
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the incumbent even if the candidate wins.")
    ] = False,
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Apply the decision rule and end the experiment.

    A winning candidate is promoted by an ordinary blue/green deploy recorded in the stage
    manifest; otherwise the incumbent stays. A crossed guardrail ends it as an abort.
    """
    from peagle_deploy.experiment.lifecycle import conclude_experiment

    _check(endpoint, region, stage)
    outcome = conclude_experiment(
        endpoint,
        stage=stage,
        region=region,
        force=force,
        promote=not keep,
        progress=False if (no_progress or as_json) else None,
    )
    if as_json:
        output.emit_json(outcome.to_json())
    else:
        _print_outcome(outcome)


@experiment_app.command("abort", epilog=EXAMPLES)
def abort_command(  # noqa: PLR0917 (one parameter per CLI flag)
    endpoint: EndpointArg,
    stage: StageOpt = "dev",
    region: so.RegionOpt = None,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            help="Recorded in the experiment and the manifest (at most 1024 characters).",
        ),
    ] = "aborted by the operator",
    no_progress: ProgressOpt = False,
    as_json: so.JsonOpt = False,
) -> None:
    """Restore the incumbent now and remove the candidate's model and config."""
    from peagle_deploy.experiment.lifecycle import abort_experiment, check_reason

    _check(endpoint, region, stage)
    check_reason(reason, "--reason")
    outcome = abort_experiment(
        endpoint,
        stage=stage,
        region=region,
        reason=reason,
        progress=False if (no_progress or as_json) else None,
    )
    if as_json:
        output.emit_json(outcome.to_json())
    else:
        _print_outcome(outcome)


def register(app: typer.Typer) -> None:
    """Add `peagle experiment` to the root app."""
    app.add_typer(experiment_app, name="experiment")
