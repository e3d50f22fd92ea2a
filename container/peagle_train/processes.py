"""Running the external steps: a vLLM server for the length of a block, and commands.

Their output goes straight to the container's stdout and stderr, which SageMaker sends
to CloudWatch (/aws/sagemaker/TrainingJobs), so the job's log carries vLLM's and
speculators' own messages beside the driver's one-line failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from peagle_train.failures import DriverError

READY_TIMEOUT_SECONDS: Final = 3600.0
"""A 70B-class target loads in tens of minutes from the training volume; an hour bounds a
server that never comes up without failing one that is merely slow."""
STOP_GRACE_SECONDS: Final = 60.0


def log(message: str) -> None:
    print(f"[peagle-train] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(step: str, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
    log(f"{step}: {' '.join(argv)}")
    code = subprocess.run(list(argv), env=env, check=False).returncode
    if code != 0:
        raise DriverError(f"{step}: {argv[0]} {' '.join(argv[1:4])} ... exited with code {code}")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def server(step: str, argv: Sequence[str], port: int) -> Iterator[None]:
    """vLLM serving until the block ends; a server that exits or never gets healthy
    fails the job with the step's name."""
    log(f"{step}: starting {' '.join(argv)}")
    proc = subprocess.Popen(list(argv), env=dict(os.environ))
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not _healthy(port):
            code = proc.poll()
            if code is not None:
                raise DriverError(
                    f"{step}: the vLLM server exited with code {code} before it was ready"
                )
            if time.monotonic() > deadline:
                raise DriverError(
                    f"{step}: the vLLM server was not ready within {READY_TIMEOUT_SECONDS:.0f} s"
                )
            time.sleep(2)
        log(f"{step}: vLLM ready on port {port}")
        yield
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
