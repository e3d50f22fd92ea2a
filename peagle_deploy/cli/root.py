"""The `peagle` typer app: every command group registered on one root.

Each command group lives in its own module, which knows nothing of this one. Modules
import heavy dependencies (sagemaker, aws_cdk, matplotlib, boto3 clients) inside the
command functions, never at import time: `peagle --help` must stay fast. The entry point
(peagle_deploy.cli.app.main) imports this module only for what its fast path does not
take (peagle_deploy.cli.fast_plan).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import typer

from peagle_deploy import __version__
from peagle_deploy.cli import (
    bench,
    deploy,
    doctor,
    experiment,
    guards,
    image,
    output,
    plan,
    promote,
)
from peagle_deploy.cli.interrupts import interrupt_code, interrupted
from peagle_deploy.errors import PeagleError

app = typer.Typer(
    name="peagle",
    help=(
        "Deploy and operate P-EAGLE (parallel speculative decoding) vLLM endpoints on "
        "Amazon SageMaker.\n\nStart with `peagle models`, then `peagle plan MODEL` to see "
        "exactly what would be sent to SageMaker."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _show_version(value: bool) -> None:
    if value:
        output.console.print(f"peagle-deploy {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    # Root options only; the help text is the app's.
    return None


plan.register(app)  # models, plan
deploy.register(app)  # deploy, status, invoke, list, delete
app.add_typer(bench.bench_app, name="bench")
app.add_typer(experiment.experiment_app, name="experiment")
app.add_typer(image.image_app, name="image")
promote.register(app)
doctor.register(app)


def _register_installed_commands() -> None:
    """Commands of other installed packages (`peagle emulator`, `peagle demo` come from
    peagle_local): each `peagle.commands` entry point is a `register(app)` function, as
    the modules above have. A package that fails to import is named in one line."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=COMMANDS_GROUP):
        try:
            register = entry.load()
        except ImportError as exc:
            raise PeagleError(
                f"the peagle command package {entry.value} does not import: {exc}"
            ) from None
        register(app)


COMMANDS_GROUP = "peagle.commands"
_register_installed_commands()


def _say_how_to_resume(command: Any) -> None:
    """typer turns a Ctrl-C inside a command into a silent exit 130; every command's
    callback says first what was interrupted and how to resume."""
    callback = getattr(command, "callback", None)
    if callback is not None and not getattr(callback, "_peagle_resumable", False):

        @functools.wraps(callback)
        def resumable(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except KeyboardInterrupt as exc:
                interrupted(exc)
                raise typer.Exit(interrupt_code()) from None

        resumable._peagle_resumable = True  # type: ignore[attr-defined]
        command.callback = resumable
    for sub in getattr(command, "commands", {}).values():
        _say_how_to_resume(sub)


def run(argv: list[str] | None) -> int:
    """Run the typer app non-standalone: the exit code of a `typer.Exit`, and one line
    for typer's (vendored) click usage errors, which derive from `typer.TyperException`.
    Every parameter refuses an empty value (cli.guards). Other errors propagate to the
    entry point."""
    try:
        command = typer.main.get_command(app)
        guards.refuse_empty_values(command)
        guards.plain_flags(command)
        _say_how_to_resume(command)
        result = command.main(args=argv, prog_name="peagle", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        output.error("aborted")
        return 1
    except typer.TyperException as exc:  # usage errors: bad option, missing argument, ...
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # `peagle` alone: the help
        else:
            output.error(guards.usage_error_line(exc))
        return int(getattr(exc, "exit_code", 2))
    return result if isinstance(result, int) and not isinstance(result, bool) else 0
