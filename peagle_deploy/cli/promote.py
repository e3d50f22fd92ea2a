"""`peagle promote`: stage to stage through gates.

Heavy imports (boto3, the SDK, the bench engine) happen inside the commands so
that `peagle --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so

_EXIT_REFUSED = 3


FromOpt = Annotated[
    str, typer.Option("--from", help="Stage whose endpoint is promoted (e.g. dev).")
]
ToOpt = Annotated[
    str, typer.Option("--to", help="Stage to promote into; its gates apply (e.g. staging).")
]
GatesOpt = Annotated[str, typer.Option("--gates", help="Gates YAML file (see gates.example.yaml).")]
NameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        "--endpoint-name",
        help="Source endpoint (default: the only endpoint with a manifest in the stage).",
    ),
]
TargetNameOpt = Annotated[
    str | None,
    typer.Option(
        "--target-name",
        help="Target endpoint (default: the source name with its stage suffix swapped).",
    ),
]
WriteSpecOpt = Annotated[
    Path | None,
    typer.Option(
        "--write-spec",
        help="For CDK users: after the gates pass, write the target spec file here "
        "(e.g. stages/staging.yaml) instead of deploying.",
    ),
]
StageFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--stage-file",
        help="The target stage's spec file: a first promotion into the stage takes its "
        "capacity, scaling, rollout, network and tags from it (default: "
        "stages/<to>.yaml when that file exists).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def promote_command(  # noqa: PLR0917 (one parameter per CLI flag)
    source_stage: FromOpt,
    target_stage: ToOpt,
    gates: GatesOpt = "gates.yaml",
    name: NameOpt = None,
    target_name: TargetNameOpt = None,
    role_arn: Annotated[
        str | None,
        typer.Option(
            "--role-arn",
            help="Execution role of the target (default: the target stage's own, from its "
            "manifest or stage file; else the source's).",
        ),
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            metavar="NAME=ARN",
            help="The target stage's own secret for NAME, over its stage file's or manifest's "
            "(a promotion never carries the source stage's secrets); repeatable.",
        ),
    ] = None,
    region: so.RegionOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Show what would change; run no gate, change nothing."),
    ] = False,
    write_spec: WriteSpecOpt = None,
    stage_file: StageFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Promote what one stage runs to the next, only if the next stage's gates pass.

    The gates (smoke chat + benchmark thresholds) run against the SOURCE endpoint; on
    success the same spec is deployed to the target stage (blue/green) and the promotion
    is recorded in the target's manifest. Exit codes: 0 promoted / nothing to do,
    1 error, 2 bad input, 3 refused by a gate (target unchanged).
    """
    from peagle_deploy.promote.gates import load_gates
    from peagle_deploy.promote.runner import PromoteOptions, check_stages, promote, render_result
    from peagle_deploy.promote.target import stage_file_for
    from peagle_deploy.spec.flag_table import parse_pairs

    check_stages(source_stage, target_stage)  # the flags first, then the file they pick from
    stage_gates = load_gates(gates).for_stage(target_stage)
    options = PromoteOptions(
        source_stage=source_stage,
        target_stage=target_stage,
        source_endpoint=name,
        target_endpoint=target_name,
        role_arn=role_arn,
        secrets=parse_pairs("--secret", secret or [], form="NAME=ARN"),
        region=region,
        dry_run=dry_run,
        write_spec=write_spec,
        stage_file=stage_file_for(target_stage, stage_file),
    )
    progress = output.err_console if as_json else output.console
    result = promote(options, stage_gates, console=progress)
    if as_json:
        output.emit_json(result.to_json())
    else:
        render_result(result, output.console)
    if result.status == "refused":
        raise typer.Exit(_EXIT_REFUSED)


def register(app: typer.Typer) -> None:
    """Add `peagle promote` to the root app."""
    app.command("promote")(promote_command)
