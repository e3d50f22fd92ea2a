"""The `peagle` commands of the local stand-ins: `peagle emulator ...` and `peagle demo`.

`emulator start` serves the emulator (peagle_local.emulator.shell) in the foreground and
prints the export lines for another shell; `emulator stage` readies that running
emulator's account for one spec and prints the commands to run next (doctor, deploy,
invoke, delete), which then run exactly as they would against AWS; `emulator loopback`
serves a stand-in OpenAI-compatible server for `peagle bench`; `demo` rehearses the
whole flow. The `peagle` CLI finds `register` through the `peagle.commands` entry point
(pyproject.toml), as it would a command of any other installed package.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from peagle_deploy.cli import output
from peagle_deploy.cli import spec_options as so
from peagle_deploy.cli.bench_flags import given, number
from peagle_deploy.errors import InputError, PeagleError

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
        int,
        typer.Option(
            "--port",
            help="Port on 127.0.0.1 (default 0: any free one).",
            parser=number("--port", int, "0 to 65535 (0: any free port)", minimum=0, maximum=65535),
        ),
    ] = 0,
    region: Annotated[str, typer.Option("--region", help="The emulated region.")] = "us-east-1",
    creating_s: Annotated[
        float,
        typer.Option(
            "--creating-s",
            help="Seconds an endpoint stays Creating/Updating.",
            parser=number("--creating-s", float, "0 to 3600 seconds", minimum=0, maximum=3600),
        ),
    ] = 2.0,
) -> None:
    """Serve the emulator in the foreground until Ctrl-C; print the exports for a shell.

    The exports hold a free port and an access key, both new on every start; the
    emulator answers only requests signed with that key.
    """
    from peagle_deploy.extras import require

    require("moto", "peagle emulator start")
    from peagle_deploy.validation.aws_shapes import check_region
    from peagle_local.emulator.shell import ServeSettings, serve

    check_region(region, "--region")
    settings = ServeSettings(port=port, region=region, creating_s=creating_s, updating_s=creating_s)
    try:
        serve(settings, _say)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli.app raises it as one)
        output.err_console.print("emulator stopped", highlight=False)


def _load(reference: str, stage: str | None) -> tuple[Any, bool, bool]:
    """(spec, from a file, role added): the spec with the emulator's role when it has none."""
    from peagle_deploy.spec import load_spec, spec_with
    from peagle_local.emulator.shell import EMULATOR_ROLE_ARN

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
    from peagle_deploy.plan import build_plan
    from peagle_local.emulator.account_ext import endpoint_quota_name
    from peagle_local.emulator.shell import (
        emulator_credentials,
        emulator_endpoint,
        instances_to_stage,
        stage_account,
    )

    url = emulator_endpoint()  # refused before anything is read or written
    credentials = emulator_credentials()
    spec, from_file, role_added = _load(reference, stage)
    plan = build_plan(spec)
    needed, why = instances_to_stage(plan.spec)
    staged = stage_account(plan, url, credentials, needed)
    world = staged.world
    lines = [
        f"staged the emulated account for {plan.endpoint_name} ({plan.region}):",
        f"  role          {staged.role_arn}",
        f"  model data    {world.model_data_uri}",
        f"  drafter       {world.drafter_uri or '-'}",
        f"  image         {plan.image_uri}",
        f"  quota         {endpoint_quota_name(plan.instance_type)} = {staged.quota:g} ({why})",
        "next:",
    ]
    role = staged.role_arn if role_added else None
    lines += [
        f"  {c}" for c in _next_commands(reference, from_file, stage, role, plan.endpoint_name)
    ]
    for line in lines:
        _say(line)


def _ms(flag: str, text: str) -> Any:
    return typer.Option(
        flag, help=text, parser=number(flag, float, "0 to 60000 ms", minimum=0, maximum=60_000)
    )


def _count(flag: str, text: str, lo: int, hi: int) -> Any:
    return typer.Option(
        flag, help=text, parser=number(flag, int, f"{lo} to {hi}", minimum=lo, maximum=hi)
    )


@emulator_app.command("loopback")
def loopback_command(  # noqa: PLR0917 (one parameter per CLI flag)
    port: Annotated[int, _count("--port", "Port (0: any free port).", 0, 65535)] = 8000,
    host: Annotated[
        str, typer.Option("--host", help="Bind address.", parser=given("--host", "an address"))
    ] = "127.0.0.1",
    ttft_ms: Annotated[float, _ms("--ttft-ms", "Time to first token.")] = 0.0,
    token_delay_ms: Annotated[
        float, _ms("--token-delay-ms", "Delay per token (0: as fast as possible).")
    ] = 0.0,
    tokens_per_chunk: Annotated[
        int, _count("--tokens-per-chunk", "Tokens per stream event.", 1, 4096)
    ] = 1,
    output_tokens: Annotated[
        int | None, _count("--output-tokens", "Cap on tokens (default: max_tokens).", 1, 1 << 20)
    ] = None,
    draft_tokens: Annotated[
        int, _count("--draft-tokens", "K for the synthetic /metrics counters (0: off).", 0, 64)
    ] = 0,
    acceptance_rate: Annotated[
        float,
        typer.Option(
            "--acceptance-rate",
            help="Synthetic acceptance rate (0-1).",
            parser=number("--acceptance-rate", float, "0 to 1", minimum=0, maximum=1),
        ),
    ] = 0.6,
) -> None:
    """Serve a stand-in OpenAI-compatible streaming server (for `peagle bench`, tests)."""
    import asyncio
    import contextlib

    from peagle_local.emulator.loopback import LoopbackConfig, serve

    try:
        config = LoopbackConfig(
            ttft_s=ttft_ms / 1000.0,
            token_delay_s=token_delay_ms / 1000.0,
            tokens_per_chunk=tokens_per_chunk,
            output_tokens=output_tokens,
            draft_tokens=draft_tokens,
            acceptance_rate=acceptance_rate,
        )
    except ValueError as exc:
        raise InputError("loopback", str(exc)) from None
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(config, host, port))
    except OSError as exc:  # port in use, address not on this host, no permission
        raise PeagleError(
            f"loopback: cannot listen on {host}:{port}: {exc.strerror or exc} "
            "(--port 0 picks a free port)"
        ) from None


def demo_command(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick/--full",
            help="--quick (default) keeps the benchmark short; --full runs more requests.",
        ),
    ] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary at the end.")
    ] = False,
) -> None:
    """Rehearse the whole flow locally, with no AWS account.

    Starts an embedded local AWS (moto server on 127.0.0.1) and the streaming endpoint
    emulator, then - through the same code as a real run - deploys the P-EAGLE
    Qwen3-Coder spec to dev, streams a chat answer, benchmarks it, promotes dev ->
    staging through the gates, shows a refused promotion to prod, and cleans up.
    Timings come from the emulator, not from a GPU.
    """
    from peagle_local.demo import DemoSettings, run_demo

    settings = DemoSettings.quick() if quick else DemoSettings.full()
    summary = run_demo(settings, console=output.err_console if as_json else output.console)
    if as_json:
        output.emit_json(summary.model_dump(mode="json"))
    if not summary.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `peagle emulator` and `peagle demo` to the root app."""
    app.add_typer(emulator_app, name="emulator")
    app.command("demo")(demo_command)
