"""Entry point of the `peagle` CLI (`peagle = peagle_deploy.cli.app:main`).

`main` hands `peagle plan ... --json` to the fast path (peagle_deploy.cli.fast_plan),
which needs neither typer nor rich, and everything else to the typer app (peagle_deploy.cli.root,
imported only then), which builds only the command that runs. Both end here: an error
of the tool is one line on stderr, no traceback. `app` (the typer app) is importable
from here.

The fast path stays while the typer path costs more than 1.15x its cold start
(benchmarks/cold_start.py --against; issue 31 measured 1.14-1.19x CPU after the root
group became lazy, down from 1.5x).
"""

from __future__ import annotations

import sys
from typing import Any

from peagle_deploy.cli import fast_plan
from peagle_deploy.cli.interrupts import interrupt_code, interrupted, sigterm_unwinds
from peagle_deploy.errors import PeagleError
from peagle_deploy.terminal import drop_unreadable_size_hints

CREDENTIALS_HINT = (
    "configure AWS credentials and a region (aws configure, AWS_PROFILE, AWS_REGION), "
    "or run `peagle demo` for the local rehearsal without an account"
)


def _no_credentials(exc: BaseException | None) -> bool:
    """botocore found no credentials or no region (checked by name: botocore is never
    imported on the start-up path)."""
    return type(exc).__module__.startswith("botocore") and type(exc).__name__ in (
        "NoCredentialsError",
        "PartialCredentialsError",
        "NoRegionError",
    )


def _unreachable_endpoint(exc: BaseException | None) -> str | None:
    """One line for botocore's "could not connect" while AWS_ENDPOINT_URL points the
    calls somewhere (a local emulator, usually one that was stopped), else None."""
    import os

    if exc is None or type(exc).__name__ != "EndpointConnectionError":
        return None
    url = os.environ.get("AWS_ENDPOINT_URL", "").strip()
    if not url:
        return None
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host in ("localhost", "::1") or host.startswith("127."):
        return (
            f"no AWS emulator answers at {url} (AWS_ENDPOINT_URL): start it with `peagle "
            "emulator start` and paste its export lines into this shell, or unset "
            "AWS_ENDPOINT_URL to use AWS"
        )
    return f"nothing answers at {url} (AWS_ENDPOINT_URL): check it, or unset it to use AWS"


def aws_error_message(exc: BaseException) -> str | None:
    """One line for an AWS/botocore failure that reached the CLI, None for anything else."""
    if not type(exc).__module__.startswith("botocore"):
        return None
    name = type(exc).__name__
    if _no_credentials(exc):
        return f"{exc}: {CREDENTIALS_HINT}"
    unreachable = _unreachable_endpoint(exc)
    if unreachable is not None:
        return unreachable
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        operation = getattr(exc, "operation_name", "an AWS call")
        return f"{operation} failed: {error.get('Code', name)}: {error.get('Message', '')}"
    return f"AWS call failed: {name}: {exc}"


def _run(argv: list[str] | None) -> int:
    fast = fast_plan.parse(sys.argv[1:] if argv is None else argv)
    if fast is not None:
        return fast_plan.run(fast)
    from peagle_deploy.cli import output, root

    output.degrade_to_ascii()
    return root.run(argv)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: PeagleError becomes one line on stderr, no traceback,
    and so does an AWS failure; Ctrl-C and SIGTERM say what was interrupted."""
    drop_unreadable_size_hints()  # before any console (ours, typer's) reads them
    try:
        with sigterm_unwinds():
            return _run(argv)
    except PeagleError as exc:
        # An error of the tool that a missing credential caused (`invoke`'s InvokeError)
        # gets the same hint as the bare botocore error.
        unreachable = _unreachable_endpoint(exc.__cause__)
        if _no_credentials(exc.__cause__):
            _error(f"{exc}: {CREDENTIALS_HINT}")
        else:
            _error(f"{exc} ({unreachable})" if unreachable else str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:  # outside any command (while parsing, or the fast path)
        interrupted(exc)
        return interrupt_code()
    except Exception as exc:
        message = aws_error_message(exc)
        if message is None:
            raise
        _error(message)
        return 1


def _error(message: str) -> None:
    from peagle_deploy.cli import output

    output.degrade_to_ascii()  # the fast path writes nothing else that needs it
    output.error(message)


def __getattr__(name: str) -> Any:
    """`app`: the typer app, built on first use (tests, `typer.testing.CliRunner`)."""
    if name == "app":
        from peagle_deploy.cli import root

        return root.app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
