"""Ctrl-C and SIGTERM while a `peagle` command runs: both unwind as KeyboardInterrupt, so
every `finally` runs, and end in one line that says what was interrupted.

Shared by the typer app (peagle_deploy.cli.root) and the entry point
(peagle_deploy.cli.app); imports no CLI library, so the fast path stays light.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


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


def interrupt_code() -> int:
    """128 + the signal for a SIGTERM, 130 for Ctrl-C."""
    return 128 + _TERMINATED[0] if _TERMINATED else 130


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
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


def interrupted(exc: KeyboardInterrupt) -> None:
    """An interrupted operation says how to resume (peagle_deploy.sdk.Interrupted's text)."""
    from peagle_deploy.cli import output

    if str(exc):
        output.warn(str(exc))
    else:
        output.error("terminated (SIGTERM)" if _TERMINATED else "interrupted")
