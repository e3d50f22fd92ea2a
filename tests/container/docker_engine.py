"""A Docker engine for the container test: Debian's docker.io, installed and started here.

- The client is always Debian's /usr/bin/docker with DOCKER_BUILDKIT=1: it builds with
  the engine's own BuildKit (no buildx plugin needed). Another `docker` earlier on PATH
  (e.g. /usr/local/bin/docker, a client without an engine) is never used.
- An engine that already answers (DOCKER_HOST, or the default socket) is used as is.
- Otherwise, as root on a Debian machine, `apt-get install docker.io debootstrap` (when
  absent) and a private `dockerd` whose socket and data live under the project's cache
  (~/.cache/peagle-deploy/docker), so images stay cached between runs. Every test run on
  the machine (any worktree, any pytest worker) shares that one engine: each holds a
  shared fcntl lock on `users.lock` while it uses it, starting and stopping happen under
  an exclusive `start.lock`, and the engine is stopped only by the last user (one that
  can take `users.lock` exclusively), so no run kills an engine another run is using.
- When that is impossible (not root, no apt, no mirror) the reason is returned, and the
  caller skips, except under CI=true where it fails.
"""

from __future__ import annotations

import contextlib
import fcntl
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
STOP_TIMEOUT_S = 30.0
# The dockerds this process started (another process may be the one that stops them).
_STARTED: list[subprocess.Popen[bytes]] = []


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


def _dockerd_pid(pidfile: Path) -> int | None:
    """The pid in `pidfile` when it is a live (not zombie) dockerd."""
    try:
        pid = int(pidfile.read_text().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if not f.read().startswith(DOCKERD.encode()):
                return None
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    return None if state in ("Z", "X") else pid


def _stop_dockerd(pidfile: Path) -> None:
    """Stop the private dockerd named by `pidfile` (SIGTERM, then SIGKILL)."""
    pid = _dockerd_pid(pidfile)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _dockerd_pid(pidfile) == pid and time.monotonic() < deadline:
        time.sleep(0.2)
    if _dockerd_pid(pidfile) == pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _lock(path: Path, mode: int) -> int:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, mode)
    return fd


def _start_dockerd(started: Engine) -> None:
    """Start the private dockerd (detached: it outlives this process while others use
    it) and wait until it answers."""
    log_path = ENGINE_DIR / "dockerd.log"
    pidfile = ENGINE_DIR / "dockerd.pid"
    _stop_dockerd(pidfile)  # one left behind that does not answer
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
                str(pidfile),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _STARTED.append(proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not started.answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise DockerUnavailableError(f"dockerd did not start: {' | '.join(tail)}")
        time.sleep(0.5)


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """An engine for the duration of the block (started if needed, and stopped after it
    when no other test run on the machine uses it)."""
    ensure_tools()
    found = _existing_engine()
    if found is not None:
        yield found
        return
    if os.geteuid() != 0:
        raise DockerUnavailableError("no Docker engine answers and dockerd needs root to start")
    ENGINE_DIR.mkdir(parents=True, exist_ok=True)
    started = Engine(f"unix://{ENGINE_DIR / 'docker.sock'}")
    start_fd = _lock(ENGINE_DIR / "start.lock", fcntl.LOCK_EX)
    try:
        if not started.answers():
            _start_dockerd(started)
        users_fd = _lock(ENGINE_DIR / "users.lock", fcntl.LOCK_SH)
    finally:
        os.close(start_fd)
    try:
        yield started
    finally:
        start_fd = _lock(ENGINE_DIR / "start.lock", fcntl.LOCK_EX)
        try:
            # Converting to exclusive without waiting succeeds only for the last user.
            try:
                fcntl.flock(users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except BlockingIOError:
                last = False
            os.close(users_fd)
            if last:
                _stop_dockerd(ENGINE_DIR / "dockerd.pid")
            for proc in _STARTED:
                proc.poll()  # reap the one this process started, if it is gone
        finally:
            os.close(start_fd)


@contextlib.contextmanager
def serialized(name: str) -> Iterator[None]:
    """A machine-wide exclusive lock next to the engine's data: test runs of other
    worktrees that build, prune and run the same test images wait here for each other."""
    ENGINE_DIR.mkdir(parents=True, exist_ok=True)
    fd = _lock(ENGINE_DIR / f"{name}.lock", fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)
