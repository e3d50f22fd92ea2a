"""Root of the `peagle` CLI.

Each command group lives in its own module, which knows nothing of this one; they are
all registered here. Modules import heavy dependencies (sagemaker, aws_cdk, matplotlib,
boto3 clients) inside the command functions, never at import time: `peagle --help` must
stay fast.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from peagle_deploy import __version__
from peagle_deploy.cli import (
    bench,
    deploy,
    doctor,
    emulator,
    experiment,
    guards,
    image,
    output,
    plan,
    promote,
)
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
promote.register(app)  # promote, demo
doctor.register(app)
emulator.register(app)  # emulator start, emulator stage


def aws_error_message(exc: BaseException) -> str | None:
    """One line for an AWS/botocore failure that reached the CLI, None for anything else.

    Checked by module name so that botocore is never imported on the start-up path.
    """
    if not type(exc).__module__.startswith("botocore"):
        return None
    name = type(exc).__name__
    if name in ("NoCredentialsError", "PartialCredentialsError", "NoRegionError"):
        return (
            f"{exc}: configure AWS credentials and a region (aws configure, AWS_PROFILE, "
            "AWS_REGION), or run `peagle demo` for the local rehearsal without an account"
        )
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        operation = getattr(exc, "operation_name", "an AWS call")
        return f"{operation} failed: {error.get('Code', name)}: {error.get('Message', '')}"
    return f"AWS call failed: {name}: {exc}"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the command unwinds as after Ctrl-C: every
    `finally` runs (a benchmark's worker processes are stopped and its streams closed, a
    wait says how to resume) instead of the process vanishing and leaving children."""

    def __str__(self) -> str:
        return ""


_TERMINATED: list[int] = []  # the SIGTERM seen, if any: the exit code is then 128 + 15


def _raise_terminated(signum: int, _frame: Any) -> None:
    _TERMINATED.append(signum)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
    raise Terminated


def _interrupt_code() -> int:
    return 128 + _TERMINATED[0] if _TERMINATED else 130


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM -> Terminated while the CLI runs (main thread only; a SIGTERM the caller
    ignores or handles stays theirs)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    _TERMINATED.clear()
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupted(exc: KeyboardInterrupt) -> None:
    """An interrupted operation says how to resume (peagle_deploy.sdk.Interrupted's text)."""
    if str(exc):
        output.warn(str(exc))
    else:
        output.error("terminated (SIGTERM)" if _TERMINATED else "interrupted")


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
                _interrupted(exc)
                raise typer.Exit(_interrupt_code()) from None

        resumable._peagle_resumable = True  # type: ignore[attr-defined]
        command.callback = resumable
    for sub in getattr(command, "commands", {}).values():
        _say_how_to_resume(sub)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: PeagleError becomes one line on stderr, no traceback.

    Non-standalone mode: typer returns the code of a `typer.Exit` instead of exiting, and
    raises its (vendored) click usage errors, which derive from `typer.TyperException`;
    they become one line too. Every parameter refuses an empty value (cli.guards).
    """
    output.degrade_to_ascii()
    try:
        command = typer.main.get_command(app)
        guards.refuse_empty_values(command)
        guards.plain_flags(command)
        _say_how_to_resume(command)
        with _sigterm_unwinds():
            result = command.main(args=argv, prog_name="peagle", standalone_mode=False)
    except PeagleError as exc:
        output.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:  # outside any command (while parsing)
        _interrupted(exc)
        return _interrupt_code()
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
    except Exception as exc:
        message = aws_error_message(exc)
        if message is None:
            raise
        output.error(message)
        return 1
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
