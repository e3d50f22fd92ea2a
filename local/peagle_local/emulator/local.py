"""`LocalAWS`: a moto server on loopback with the peagle extensions, for demos and tests.

Real HTTP (so AWS_ENDPOINT_URL, retries, streaming and event-stream parsing all run as
they would against AWS), in this process, on 127.0.0.1 and a free port, behind `Guard`
(guard.py): only its own Host, no browser, only requests signed with its `credentials`
(new for every instance), only the services the project uses; and moto never starts a
Docker container for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from peagle_local.emulator.account_ext import AccountExtensions
from peagle_local.emulator.guard import EmulatorCredentials, Guard, served_apps
from peagle_local.emulator.moto_ext import MotoExtensions
from peagle_local.emulator.world import StagedWorld, stage_world

LOOPBACK = "127.0.0.1"


def reset_moto_state() -> None:
    """Forget every resource moto holds in this process (all services, all regions), and
    what the installed extensions hold beside it (InferenceExperiments, which moto lacks,
    and the endpoints' scripted phases)."""
    from moto.moto_api._internal.models import moto_api_backend

    from peagle_local.emulator.moto_ext import installed

    moto_api_backend.reset()
    ext = installed()
    if ext is not None:
        ext.reset_state()


@dataclass
class LocalAWS(MotoExtensions):
    """Start with `with LocalAWS() as aws:`; point clients at `aws.endpoint_url`.

    Inherits the control API of `MotoExtensions` (`script_endpoint`, `set_stream`,
    `set_acceptance_metrics`, `log_lines`); `account` holds the Service Quotas and IAM
    simulation double (`AccountExtensions`). `reset=True` clears moto's state on entry
    and exit. Clients sign with `credentials` (`env()`, `session()`, `client()` do);
    the server refuses any other key. An `OSError` on entry: the port cannot be bound.
    """

    region: str = "us-east-1"
    port: int = 0
    reset: bool = True
    account: AccountExtensions = field(default_factory=AccountExtensions)
    credentials: EmulatorCredentials = field(default_factory=EmulatorCredentials.new)
    endpoint_url: str = field(default="", init=False)
    _server: Any = field(default=None, init=False)

    def __enter__(self) -> LocalAWS:
        if self.reset:
            reset_moto_state()
        self.install()
        try:
            self.account.install()
        except BaseException:
            self.uninstall()
            raise
        try:
            self._server = _QuietMotoServer(LOOPBACK, self.port, self.credentials)
        except BaseException:
            self.account.uninstall()
            self.uninstall()
            raise
        host, port = self._server.address
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._server is not None:
                self._server.stop()
                self._server = None
        finally:
            self.account.uninstall()
            self.uninstall()
            if self.reset:
                reset_moto_state()

    def env(self) -> dict[str, str]:
        """Environment that points any AWS SDK or CLI at this server."""
        if not self.endpoint_url:
            raise RuntimeError("LocalAWS is not started")
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    @contextlib.contextmanager
    def patched_environ(self) -> Iterator[dict[str, str]]:
        """Set `env()` in os.environ (and drop profile/session variables) for a block."""
        saved = dict(os.environ)
        try:
            for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
                os.environ.pop(var, None)
            os.environ.update(self.env())
            yield self.env()
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def stage_world(self, plan: Any, *, endpoint_quota: float = 4) -> StagedWorld:
        """Give the emulated account what `plan` needs to pass `peagle doctor` (model data,
        a P-EAGLE drafter, the execution role, the image, the quota): see `world`."""
        if not self.endpoint_url:
            raise RuntimeError("LocalAWS is not started")
        return stage_world(
            plan,
            self.session(),
            self.account,
            endpoint_quota=endpoint_quota,
            endpoint_url=self.endpoint_url,
        )

    def session(self) -> Any:
        """A boto3 Session with this emulator's credentials and region (no endpoint baked
        in)."""
        import boto3

        return boto3.Session(
            aws_access_key_id=self.credentials.access_key_id,
            aws_secret_access_key=self.credentials.secret_access_key,
            region_name=self.region,
        )

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for `service` talking to this server."""
        return self.session().client(service, endpoint_url=self.endpoint_url, **kwargs)

    def _install_patches(self) -> None:
        from moto.utilities.docker_utilities import DockerModel

        super()._install_patches()
        # moto runs Lambda functions (reachable through CloudFormation custom resources
        # and log subscriptions even though Lambda itself is not served) and Batch jobs
        # in Docker; its one way to Docker is this property.
        self._patch(DockerModel, "docker_client", property(_no_docker))


def _no_docker(_model: Any) -> Any:
    raise RuntimeError("the peagle emulator starts no Docker container (no Lambda, no Batch)")


def _listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound here: a port in use is an OSError to the caller
    (werkzeug would print its own text and exit)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart, TIME_WAIT
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def _start_without_signals(thread: threading.Thread) -> None:
    """Start `thread` (and every thread it starts: the per-request ones) with SIGINT and
    SIGTERM blocked. The kernel may deliver a process's signal to any thread that does
    not block it; Python runs handlers in the main thread only, so a signal taken by a
    request thread while the main thread sleeps in a lock (serve's wait) was never
    handled: the emulator kept serving. A new thread inherits its creator's mask."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no such delivery
        thread.start()
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class _QuietMotoServer:
    """moto's ThreadedMotoServer behind `Guard`, minus the per-request access log.

    Same parts (moto's DomainDispatcherApplication and request handler, werkzeug's
    threaded server); the server socket is bound before the constructor returns.
    """

    def __init__(self, host: str, port: int, credentials: EmulatorCredentials) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class Handler(MotoRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        sock = _listen(host, port)
        try:
            self.address: tuple[str, int] = (host, int(sock.getsockname()[1]))
            dispatcher = DomainDispatcherApplication(served_apps(create_backend_app))
            app = Guard(dispatcher, f"{host}:{self.address[1]}", credentials)
            self._server = make_server(
                host, self.address[1], app, threaded=True, request_handler=Handler, fd=sock.fileno()
            )
        finally:
            sock.close()  # werkzeug serves a duplicate of it
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="peagle-local-aws", daemon=True
        )
        _start_without_signals(self._thread)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
