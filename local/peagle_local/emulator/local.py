"""`LocalAWS`: a moto server on loopback with the peagle extensions, for demos and tests.

Real HTTP (so AWS_ENDPOINT_URL, retries, streaming and event-stream parsing all run as
they would against AWS), in this process, on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from peagle_local.emulator.account_ext import AccountExtensions
from peagle_local.emulator.moto_ext import MotoExtensions
from peagle_local.emulator.world import StagedWorld, stage_world

FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"  # moto accepts any credentials


def reset_moto_state() -> None:
    """Forget every resource moto holds in this process (all services, all regions)."""
    from moto.moto_api._internal.models import moto_api_backend

    moto_api_backend.reset()


@dataclass
class LocalAWS(MotoExtensions):
    """Start with `with LocalAWS() as aws:`; point clients at `aws.endpoint_url`.

    Inherits the control API of `MotoExtensions` (`script_endpoint`, `set_stream`,
    `set_acceptance_metrics`, `log_lines`); `account` holds the Service Quotas and IAM
    simulation double (`AccountExtensions`). `reset=True` clears moto's state on entry
    and exit.
    """

    region: str = "us-east-1"
    port: int = 0
    reset: bool = True
    account: AccountExtensions = field(default_factory=AccountExtensions)
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
            self._server = _QuietMotoServer("127.0.0.1", self.port)
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
            "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
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
        """A boto3 Session with the fake credentials and region (no endpoint baked in)."""
        import boto3

        return boto3.Session(
            aws_access_key_id=FAKE_ACCESS_KEY,
            aws_secret_access_key=FAKE_SECRET_KEY,
            region_name=self.region,
        )

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for `service` talking to this server."""
        return self.session().client(service, endpoint_url=self.endpoint_url, **kwargs)


class _QuietMotoServer:
    """moto's ThreadedMotoServer, minus the per-request access log on stderr.

    Same parts (moto's DomainDispatcherApplication and request handler, werkzeug's
    threaded server); the server socket is bound before the constructor returns.
    """

    def __init__(self, host: str, port: int) -> None:
        import threading

        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        class Handler(MotoRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(host, port, app, threaded=True, request_handler=Handler)
        self.address: tuple[str, int] = (
            str(self._server.server_address[0]),
            int(self._server.server_address[1]),
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="peagle-local-aws", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
