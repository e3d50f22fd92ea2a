"""`peagle doctor`: read-only checks of what a plan would deploy, before anything exists.

Takes the spec flags of `peagle plan`. Exit 0: nothing blocks (warnings may remain);
1: a check failed; 2: bad input (refused before any AWS call).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.app import app

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print every check as JSON (status, resource, detail, fix).")
]
_STYLE = {"pass": "[green]PASS[/]", "fail": "[bold red]FAIL[/]", "warn": "[yellow]WARN[/]"}


@app.command("doctor")
def doctor_command(  # noqa: PLR0917 (one parameter per CLI flag)
    model: so.ModelArg = None,
    file: so.FileOpt = None,
    instance_type: so.InstanceTypeOpt = None,
    num_speculative_tokens: so.KOpt = None,
    mode: so.ModeOpt = None,
    tp: so.TpOpt = None,
    max_model_len: so.MaxLenOpt = None,
    instance_count: so.CountOpt = None,
    endpoint_name: so.EndpointNameOpt = None,
    stage: so.StageOpt = None,
    region: so.RegionOpt = None,
    role_arn: so.RoleOpt = None,
    env: so.EnvOpt = None,
    kms_key_id: so.KmsOpt = None,
    no_network_isolation: so.NoIsolationOpt = False,
    subnet: so.SubnetOpt = None,
    security_group: so.SecurityGroupOpt = None,
    routing_strategy: so.RoutingOpt = None,
    tag: so.TagOpt = None,
    image_uri: so.ImageOpt = None,
    accept_eula: so.AcceptEulaOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Check, in seconds and read-only, what SageMaker would find 10-20 minutes after
    CreateEndpoint: model data and drafter in S3 (P-EAGLE rules on the drafter's
    headers), the execution role's trust and permissions, the instance quota, the image.
    """
    from peagle_deploy.doctor import run_doctor
    from peagle_deploy.plan import build_plan

    spec = so.load_cli_spec(
        file,
        model=model,
        instance_type=instance_type,
        num_speculative_tokens=num_speculative_tokens,
        mode=mode,
        tp=tp,
        max_model_len=max_model_len,
        instance_count=instance_count,
        endpoint_name=endpoint_name,
        stage=stage,
        region=region,
        role_arn=role_arn,
        env=env,
        kms_key_id=kms_key_id,
        no_network_isolation=no_network_isolation,
        subnet=subnet,
        security_group=security_group,
        routing_strategy=routing_strategy,
        tag=tag,
        image_uri=image_uri,
        accept_eula=accept_eula,
    )
    plan = build_plan(spec)
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

    table = Table(title=f"peagle doctor: {report.endpoint_name} ({report.region})")
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
