"""`peagle emulator start` and `peagle emulator stage`: the local AWS, driven from a shell.

`start` serves the emulator (peagle_deploy.emulator.shell) in the foreground and prints
the export lines for another shell; `stage` readies that running emulator's account for
one spec and prints the commands to run next (doctor, deploy, invoke, delete), which
then run exactly as they would against AWS.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.errors import PeagleError

emulator_app = typer.Typer(
    help="A local stand-in for AWS on 127.0.0.1: deploy and invoke without an account.\n\n"
    "`peagle emulator start` in one shell; paste its export lines into another, then "
    "`peagle emulator stage MODEL` and the commands it prints.",
    no_args_is_help=True,
)
SPEC_EXTENSIONS = (".yaml", ".yml", ".json")
INVOKE_PROMPT = "Write a Python function that reverses a string."


def _say(line: str) -> None:
    """A plain line on stdout, at once (a user or a test reads it while the server runs)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@emulator_app.command("start")
def start_command(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = 5599,
    region: Annotated[str, typer.Option("--region", help="The emulated region.")] = "us-east-1",
    creating_s: Annotated[
        float,
        typer.Option("--creating-s", min=0.0, help="Seconds an endpoint stays Creating/Updating."),
    ] = 2.0,
) -> None:
    """Serve the emulator in the foreground until Ctrl-C; print the exports for a shell."""
    from peagle_deploy.extras import require

    require("moto", "peagle emulator start")
    from peagle_deploy.emulator.shell import ServeSettings, serve
    from peagle_deploy.validation.aws_shapes import check_region

    check_region(region, "--region")
    settings = ServeSettings(port=port, region=region, creating_s=creating_s, updating_s=creating_s)
    try:
        serve(settings, _say)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.app raises it as one)
        output.err_console.print("emulator stopped", highlight=False)


def _load(reference: str, stage: str | None) -> tuple[Any, bool, bool]:
    """(spec, from a file, role added): the spec with the emulator's role when it has none."""
    from peagle_deploy.emulator.shell import EMULATOR_ROLE_ARN
    from peagle_deploy.spec import load_spec, spec_with

    path = Path(reference)
    from_file = path.suffix.lower() in SPEC_EXTENSIONS or path.is_file()
    file, model = (path, None) if from_file else (None, reference)
    spec = load_spec(file, file_field="MODEL_OR_SPEC_FILE", model=model, stage=stage)
    if spec.execution_role_arn is not None:
        return spec, from_file, False
    return spec_with(spec, execution_role_arn=EMULATOR_ROLE_ARN), from_file, True


def _next_commands(
    reference: str, from_file: bool, stage: str | None, role: str | None, endpoint: str
) -> list[str]:
    spec_args = f"-f {shlex.quote(reference)}" if from_file else shlex.quote(reference)
    flags = (f" --stage {shlex.quote(stage)}" if stage else "") + (
        f" --role-arn {role}" if role else ""
    )
    return [
        f"peagle doctor {spec_args}{flags}",
        f"peagle deploy {spec_args}{flags}",
        f"peagle invoke {endpoint} {shlex.quote(INVOKE_PROMPT)}",
        f"peagle delete {endpoint} --yes",
    ]


@emulator_app.command("stage")
def stage_command(
    reference: Annotated[
        str,
        typer.Argument(
            metavar="MODEL_OR_SPEC_FILE",
            help="A model (as for `peagle plan`) or a spec file (.yaml/.json).",
            show_default=False,
        ),
    ],
    stage: so.StageOpt = None,
) -> None:
    """Ready the running emulator's account for a spec: role, data, image, quota."""
    from peagle_deploy.doctor.capacity import instances_for
    from peagle_deploy.emulator.account_ext import endpoint_quota_name
    from peagle_deploy.emulator.shell import emulator_endpoint, stage_account
    from peagle_deploy.plan import build_plan

    url = emulator_endpoint()  # refused before anything is read or written
    spec, from_file, role_added = _load(reference, stage)
    plan = build_plan(spec)
    needed, why = instances_for(plan.spec)
    try:
        staged = stage_account(plan, url, needed)
    except Exception as exc:
        if type(exc).__name__ == "EndpointConnectionError":
            raise PeagleError(
                f"no emulator answers at {url}: start it with `peagle emulator start` "
                "(and paste its export lines into this shell)"
            ) from None
        raise
    world = staged.world
    lines = [
        f"staged the emulated account for {plan.endpoint_name} ({plan.region}):",
        f"  role          {staged.role_arn}",
        f"  model data    {world.model_data_uri}",
        f"  drafter       {world.drafter_uri or '-'}",
        f"  image         {plan.image_uri}",
        f"  quota         {endpoint_quota_name(plan.instance_type)} = {staged.quota:g} "
        f"(+{needed} for {why})",
        "next:",
    ]
    role = staged.role_arn if role_added else None
    lines += [
        f"  {c}" for c in _next_commands(reference, from_file, stage, role, plan.endpoint_name)
    ]
    for line in lines:
        _say(line)


def register(app: typer.Typer) -> None:
    """Add `peagle emulator` to the root app."""
    app.add_typer(emulator_app, name="emulator")
