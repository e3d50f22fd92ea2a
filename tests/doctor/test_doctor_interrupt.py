"""Ctrl-C during `peagle doctor` with an S3 read stalled: the process ends at once.

It used to exit only after the stalled read gave up (botocore: 60 s read timeout, three
attempts), because the thread pool waited for its threads. A real process, a real
SIGINT, a read held by the emulator's server for a minute; the communicate() timeout is
only a hang guard.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from doctor_testkit import MODEL, ROLE
from peagle_local.emulator import LocalAWS

HANG_GUARD_S = 30
HELD_S = 60


def _peagle(*argv: str) -> list[str]:
    script = Path(sys.executable).with_name("peagle")
    command = (
        [str(script), *argv]
        if script.exists()
        else [sys.executable, "-m", "peagle_deploy.cli.app", *argv]
    )
    # SIGINT at its default, as from a terminal (a background shell job ignores it).
    launcher = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    launcher += "os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", launcher, *command]


@pytest.mark.parametrize(
    "command",
    [("doctor", MODEL, "--role-arn", ROLE), ("deploy", MODEL, "--role-arn", ROLE, "--no-progress")],
    ids=["doctor", "deploy"],
)
def test_sigint_with_a_stalled_s3_read_exits_at_once(
    local: LocalAWS, command: tuple[str, ...]
) -> None:
    from moto.s3 import models as s3_models

    in_flight = threading.Event()
    release = threading.Event()
    backend = s3_models.S3Backend
    real = backend.get_object

    def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        in_flight.set()
        release.wait(HELD_S)
        return real(self, *args, **kwargs)

    backend.get_object = held  # type: ignore[method-assign]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    try:
        proc = subprocess.Popen(
            _peagle(*command),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert in_flight.wait(HANG_GUARD_S), "doctor never read from S3"
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=HANG_GUARD_S)
            still_held = not release.is_set()
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        backend.get_object = real  # type: ignore[method-assign]
    assert still_held  # it exited while the read was still held by the server
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "nothing was created" in err
