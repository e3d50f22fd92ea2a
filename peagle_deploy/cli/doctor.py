"""`peagle doctor`: read-only checks of what a plan would deploy, before anything exists.

Takes the spec flags of `peagle plan`. Exit 0: nothing blocks (warnings may remain);
1: a check failed; 2: bad input (refused before any AWS call).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.spec_options import spec_options

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print every check as JSON (status, resource, detail, fix).")
]
_STYLE = {"pass": "[green]PASS[/]", "fail": "[bold red]FAIL[/]", "warn": "[yellow]WARN[/]"}


@spec_options
def doctor_command(
    *,
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    knobs: dict[str, Any] | None = None,
    as_json: JsonOpt = False,
) -> None:
    """Check, in seconds and read-only, what SageMaker would find 10-20 minutes after
    CreateEndpoint: model data and drafter in S3 (P-EAGLE rules on the drafter's
    headers), the execution role's trust and permissions, the instance quota, the image.
    """
    from peagle_deploy.doctor import run_doctor
    from peagle_deploy.plan import build_plan

    plan = build_plan(so.load_cli_spec(file, model, knobs or {}))
    report = run_doctor(plan)
    if as_json:
        output.emit_json({**report.to_json(), "plan_warnings": list(plan.warnings)})
    else:
        _print_report(report)
        for warning in plan.warnings:
            output.warn(warning)
    if not report.ok:
        raise typer.Exit(report.exit_code)


def _print_report(report: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"peagle doctor: {report.endpoint_name} ({report.region})"))
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("resource", overflow="fold")
    table.add_column("finding", overflow="fold")
    table.add_column("fix", overflow="fold")
    for r in report.results:
        table.add_row(
            _STYLE[r.status],
            r.check,
            escape(r.resource),
            escape(r.detail),
            escape(r.fix) if r.status != "pass" else "",
        )
    output.print_table(table)
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
    app.command("doctor")(doctor_command)
