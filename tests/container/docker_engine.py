"""A Docker engine for the container test: Debian's docker.io, installed and started here.

- The client is always Debian's /usr/bin/docker with DOCKER_BUILDKIT=1: it builds with
  the engine's own BuildKit (no buildx plugin needed). Another `docker` earlier on PATH
  (e.g. /usr/local/bin/docker, a client without an engine) is never used.
- An engine that already answers (DOCKER_HOST, or the default socket) is used as is.
- Otherwise, as root on a Debian machine, `apt-get install docker.io debootstrap` (when
  absent) and a private `dockerd` whose socket and data live under the project's cache
  (~/.cache/peagle-deploy/docker), so images stay cached between runs; the engine is
  stopped again when the test is done.
- When that is impossible (not root, no apt, no mirror) the reason is returned, and the
  caller skips, except under CI=true where it fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

DOCKER = "/usr/bin/docker"
DOCKERD = "/usr/sbin/dockerd"
DEBOOTSTRAP = "/usr/sbin/debootstrap"
PACKAGES = ("docker.io", "debootstrap")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "peagle-deploy"
ENGINE_DIR = CACHE / "docker"
# The engine's runtime state (sockets of containerd, ...) needs a short path.
EXEC_ROOT = Path("/run/peagle-deploy-docker")
START_TIMEOUT_S = 60.0


class DockerUnavailableError(Exception):
    """Docker cannot be provided on this machine; str() says why."""


@dataclass(frozen=True)
class Engine:
    """How to reach the engine with Debian's client."""

    host: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        env.update({"DOCKER_HOST": self.host, "DOCKER_BUILDKIT": "1"})
        return env

    def run(
        self, *args: str, timeout: float = 300, check: bool = True, stdin: IO[bytes] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [DOCKER, *args],
            env=self.env(),
            stdin=stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"docker {' '.join(args[:3])} failed ({done.returncode}): {done.stderr[-3000:]}"
            )
        return done

    def answers(self) -> bool:
        try:
            return self.run("version", timeout=20, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


def _apt_install(packages: tuple[str, ...]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(cmd, env=env, capture_output=True, check=False).returncode == 0:
        return
    # A fresh machine has no package lists yet.
    update = subprocess.run(
        ["apt-get", "update", "-q"], env=env, capture_output=True, text=True, check=False
    )
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DockerUnavailableError(
            f"apt-get install {' '.join(packages)} failed: "
            f"{(done.stderr or update.stderr).strip().splitlines()[-1:]}"
        )


def ensure_tools() -> None:
    """Debian's docker client, dockerd and debootstrap, installed when absent."""
    missing = [p for p in (DOCKER, DOCKERD, DEBOOTSTRAP) if not os.access(p, os.X_OK)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise DockerUnavailableError(
            f"{', '.join(missing)} missing and not root (cannot apt-get install)"
        )
    if shutil.which("apt-get") is None:
        raise DockerUnavailableError(f"{', '.join(missing)} missing and no apt-get on this machine")
    _apt_install(PACKAGES)
    still = [p for p in (DOCKER, DOCKERD, DEBOOTSTRAP) if not os.access(p, os.X_OK)]
    if still:
        raise DockerUnavailableError(f"{', '.join(still)} still missing after apt-get install")


def _existing_engine() -> Engine | None:
    hosts = [os.environ["DOCKER_HOST"]] if os.environ.get("DOCKER_HOST") else []
    hosts.append("unix:///var/run/docker.sock")
    for host in hosts:
        engine = Engine(host)
        if engine.answers():
            return engine
    return None


def _stop_leftover(pidfile: Path) -> None:
    """Stop a private dockerd that an interrupted earlier run left behind."""
    try:
        pid = int(pidfile.read_text().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if not f.read().startswith(DOCKERD.encode()):
                return
    except (OSError, ValueError):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """An engine for the duration of the block (started and stopped here if needed)."""
    ensure_tools()
    found = _existing_engine()
    if found is not None:
        yield found
        return
    if os.geteuid() != 0:
        raise DockerUnavailableError("no Docker engine answers and dockerd needs root to start")
    ENGINE_DIR.mkdir(parents=True, exist_ok=True)
    socket = ENGINE_DIR / "docker.sock"
    log_path = ENGINE_DIR / "dockerd.log"
    started = Engine(f"unix://{socket}")
    _stop_leftover(ENGINE_DIR / "dockerd.pid")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                DOCKERD,
                "--host",
                started.host,
                "--data-root",
                str(ENGINE_DIR / "data"),
                "--exec-root",
                str(EXEC_ROOT),
                "--pidfile",
                str(ENGINE_DIR / "dockerd.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not started.answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                raise DockerUnavailableError(f"dockerd did not start: {' | '.join(tail)}")
            time.sleep(0.5)
        yield started
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
