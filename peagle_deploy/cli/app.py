"""Root of the `peagle` CLI.

Each command group lives in its own module and is registered here. Modules import
heavy dependencies (sagemaker, aws_cdk, matplotlib, boto3 clients) inside the command
functions, never at import time: `peagle --help` must stay fast.
"""

from __future__ import annotations

import sys

import typer

from peagle_deploy.cli import output
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


def _register() -> None:
    # One line per command module; each module adds its commands to `app`.
    import peagle_deploy.cli.bench  # noqa: F401
    from peagle_deploy.cli import deploy, plan  # noqa: F401

    __import__("peagle_deploy.cli.promote")  # promote, demo
    __import__("peagle_deploy.cli.doctor")


_register()


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


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: PeagleError becomes one line on stderr, no traceback.

    Non-standalone mode: typer returns the code of a `typer.Exit` instead of exiting, and
    raises its (vendored) click usage errors, which derive from `typer.TyperException`.
    """
    try:
        result = app(args=argv, standalone_mode=False)
    except PeagleError as exc:
        output.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        output.error("interrupted")
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        output.error("aborted")
        return 1
    except typer.TyperException as exc:  # usage errors: bad option, missing argument, ...
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            output.error(exc.format_message())
        return int(exc.exit_code)
    except Exception as exc:
        message = aws_error_message(exc)
        if message is None:
            raise
        output.error(message)
        return 1
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
