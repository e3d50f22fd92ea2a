"""`peagle doctor`: read-only checks of what a plan would deploy, before anything exists.

Takes the spec flags of `peagle plan`, or `--stage NAME` alone for a stage of the CDK
app's cdk.json (the plan `cdk synth` builds; see `cdk_stage`). Exit 0: nothing blocks
(warnings may remain); 1: a check failed; 2: bad input (refused before any AWS call);
130: interrupted (Ctrl-C returns at once, not after the reads in flight).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.plan_json import load_cli_spec, plan_with_experiment
from peagle_deploy.cli.spec_options import spec_options
from peagle_deploy.errors import InputError

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print every check as JSON (status, resource, detail, fix).")
]
_STYLE = {"pass": "[green]PASS[/]", "fail": "[bold red]FAIL[/]", "warn": "[yellow]WARN[/]"}
STAGE_KNOB = "stage"

DOCTOR_EXAMPLES = """\
Examples:

  peagle doctor qwen3-coder-30b-a3b-instruct --role-arn arn:aws:iam::123456789012:role/sm

  peagle doctor -f stages/prod.yaml --stage prod --role-arn ROLE_ARN   # a spec file

  peagle doctor --stage prod      # cdk.json's stage prod, before `cdk deploy PeagleEndpoint-prod`
"""


def _plan(file: Path | None, model: str | None, knobs: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """(plan, role view, session, declared experiment): a spec's plan with its role, or a
    CDK stage's with the stack's role and what the stage declares of its experiment. A
    spec's experiment block is planned too: doctor refuses what `plan` refuses."""
    if file is not None or model is not None or STAGE_KNOB not in knobs:
        return plan_with_experiment(load_cli_spec(file, model, knobs))[0], None, None, None
    others = sorted(k for k in knobs if k != STAGE_KNOB)
    if others:
        raise InputError(
            "--stage",
            f"a CDK stage takes its spec from cdk.json; {others[0]} cannot be changed here",
            "--stage NAME alone (or MODEL / --file with flags for a spec)",
        )
    from peagle_deploy.aws import make_session
    from peagle_deploy.cli.cdk_stage import declared_experiment, planned_role, stage_plan

    stage, plan = stage_plan(str(knobs[STAGE_KNOB]), Path.cwd())
    experiment = None
    if plan.spec.experiment is not None:
        experiment = plan_with_experiment(stage.load_spec())[1]
    session = make_session(plan.region)
    role = planned_role(plan, session, stage.stack_id, stage.account)
    return plan, role, session, declared_experiment(stage, experiment)


@spec_options
def doctor_command(
    *,
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    knobs: dict[str, Any] | None = None,
    as_json: JsonOpt = False,
) -> None:
    """Check read-only, in seconds, what SageMaker would refuse after CreateEndpoint.

    What SageMaker would find 10-20 minutes after CreateEndpoint: model data and
    drafter in S3 (the container's P-EAGLE rules on the drafter), the execution role's
    trust and permissions decided as IAM decides them (its policies with the bucket, key
    and repository policies), the instance quota, the image. `--stage NAME` alone checks
    cdk.json's stage NAME as `cdk deploy` would deploy it (run it in the CDK app's
    directory).
    """
    from peagle_deploy.doctor import run_doctor
    from peagle_deploy.doctor.coming import CDK_DEPLOY, DEPLOY
    from peagle_deploy.doctor.stage_experiment import check_stage_experiment
    from peagle_deploy.doctor.stage_scaling import check_stage_scaling

    plan, role_view, session, declared = _plan(file, model, knobs or {})
    coming = DEPLOY if role_view is None else CDK_DEPLOY  # a CDK stage: CloudFormation's calls
    report = run_doctor(plan, boto_session=session, role_view=role_view, coming=coming)
    if declared is not None:  # a CDK stage: what the stack's deploy cannot do
        report.results.append(
            check_stage_experiment(session, plan.region, plan.endpoint_name, declared)
        )
        report.results.append(check_stage_scaling(session, plan))
    if as_json:
        output.emit_json({**report.to_json(), "plan_warnings": list(plan.warnings)})
    else:
        _print_report(report)
        for warning in plan.warnings:
            if role_view is not None and warning.field == "execution_role_arn":
                continue  # the stack creates its own role
            output.warn(warning)
    if not report.ok:
        raise typer.Exit(report.exit_code)


def _cell(value: object) -> Any:
    """A table cell from account data: no markup, no terminal control characters."""
    from peagle_deploy.terminal import literal, printable

    return literal(printable(value))


def _print_report(report: Any) -> None:
    from rich.table import Table

    from peagle_deploy.terminal import printable

    table = Table(title=_cell(f"peagle doctor: {report.endpoint_name} ({report.region})"))
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("resource", overflow="fold")
    table.add_column("finding", overflow="fold")
    table.add_column("fix", overflow="fold")
    for r in report.results:
        table.add_row(
            _STYLE[r.status],
            _cell(r.check),
            _cell(r.resource),
            _cell(r.detail),
            _cell(r.fix) if r.status != "pass" else "",
        )
    output.print_table(table)
    for note in report.notes:
        output.console.print(f"note: {printable(note)}", highlight=False, markup=False)
    counts = {s: sum(1 for r in report.results if r.status == s) for s in ("pass", "fail", "warn")}
    verdict = (
        "[green]nothing blocks the deployment[/]"
        if report.ok
        else f"[bold red]{counts['fail']} check(s) would fail the deployment[/]"
    )
    output.console.print(
        f"{verdict}: {counts['pass']} passed, {counts['fail']} failed, {counts['warn']} "
        f"could not be checked or warn, in {report.elapsed_s:.2f} s",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add `peagle doctor` to the root app."""
    app.command("doctor", epilog=DOCTOR_EXAMPLES)(doctor_command)
