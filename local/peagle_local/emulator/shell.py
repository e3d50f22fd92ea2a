"""The emulator for a shell: serve it in one terminal, ready its account from another.

`serve` runs `LocalAWS` on loopback until interrupted and prints the `export` lines that
point another shell's AWS SDKs at it. Its account starts like a new one: no hosting
instances granted (`AccountExtensions.new_account_endpoint_quotas`), so `peagle doctor`
names the quota to raise. `stage_account` then gives that running emulator, over HTTP
only, what one plan needs (`world.stage_world`, the same code the demo and the tests
stage with); it refuses any endpoint that is not on this machine's loopback, so it can
never write to a real account.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from peagle_deploy.errors import InputError
from peagle_local.emulator.chat import StreamSettings
from peagle_local.emulator.local import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, LocalAWS
from peagle_local.emulator.moto_ext import EndpointScript, known_instance_types
from peagle_local.emulator.world import (
    EMULATED_ACCOUNT,
    StagedWorld,
    applied_endpoint_quota,
    stage_world,
)

DEFAULT_PORT = 5599
"""`peagle emulator start`'s port: fixed, so that the quickstart's export lines are the
same on every machine (--port 0 picks a free one)."""
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATED_ACCOUNT}:role/peagle-emulator"
"""The execution role `stage_account` creates when the spec names none."""


@dataclass(frozen=True)
class ServeSettings:
    """How the served emulator behaves (every endpoint gets the same script)."""

    port: int = DEFAULT_PORT
    region: str = "us-east-1"
    creating_s: float = 2.0
    updating_s: float = 2.0
    stream: StreamSettings = field(
        default_factory=lambda: StreamSettings(ttft_s=0.05, token_delay_s=0.005)
    )
    acceptance_rate: float | None = None
    """The draft acceptance the emulated containers report (None: no metric lines)."""
    num_speculative_tokens: int = 3


def export_lines(aws: LocalAWS) -> list[str]:
    """`export NAME=value` for each variable another shell needs."""
    return [f"export {key}={value}" for key, value in aws.env().items()]


def serve(
    settings: ServeSettings,
    say: Callable[[str], None],
    stop: threading.Event | None = None,
) -> None:
    """Serve until `stop` is set or the process is interrupted (KeyboardInterrupt, or
    SIGTERM raised as one by the CLI); the server is stopped cleanly either way."""
    aws = LocalAWS(
        region=settings.region,
        port=settings.port,
        default_script=EndpointScript(
            creating_s=settings.creating_s, updating_s=settings.updating_s
        ),
        stream=settings.stream,
        variants_from_models=True,  # containers report as their models say (experiments)
    )
    try:
        aws.__enter__()
    except OSError as exc:
        raise InputError(
            "--port", f"{settings.port} cannot be served ({exc.strerror or exc})", "a free port"
        ) from None
    try:
        aws.account.new_account_endpoint_quotas(known_instance_types())
        if settings.acceptance_rate is not None:
            aws.set_acceptance_metrics(
                None,
                acceptance_rate=settings.acceptance_rate,
                num_speculative_tokens=settings.num_speculative_tokens,
            )
        for line in export_lines(aws):
            say(line)
        say(f"# peagle emulator on {aws.endpoint_url}: paste the lines above into another shell;")
        say("# then: peagle emulator stage MODEL_OR_SPEC_FILE. Ctrl-C stops the emulator.")
        (stop or threading.Event()).wait()
    finally:
        aws.__exit__(None, None, None)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def emulator_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """AWS_ENDPOINT_URL, when it names a server on this machine's loopback; else InputError
    (before any request: staging writes roles, buckets and quotas)."""
    env = os.environ if environ is None else environ
    url = env.get(ENDPOINT_VARIABLE, "").strip()
    if not url:
        raise InputError(
            ENDPOINT_VARIABLE,
            "is not set: no emulator to stage",
            "the export lines `peagle emulator start` prints, pasted into this shell",
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not _is_loopback(parts.hostname or ""):
        raise InputError(
            ENDPOINT_VARIABLE,
            f"{url!r} is not on this machine's loopback; the emulator is never staged "
            "through another endpoint (it could be a real account)",
            "http://127.0.0.1:PORT, as `peagle emulator start` prints it",
        )
    return url


def check_emulator_role(role_arn: str) -> None:
    """The role must be one of the emulated account's: doctor reads it there."""
    parts = role_arn.split(":")
    if len(parts) < 6 or parts[4] != EMULATED_ACCOUNT or not parts[5].startswith("role/"):
        raise InputError(
            "execution_role_arn",
            f"{role_arn!r} is not a role of the emulated account {EMULATED_ACCOUNT}",
            f"arn:aws:iam::{EMULATED_ACCOUNT}:role/NAME (or none: {EMULATOR_ROLE_ARN})",
        )


@dataclass(frozen=True)
class StagedAccount:
    """What `stage_account` did, for the summary it prints."""

    world: StagedWorld
    role_arn: str
    quota: float
    needed: int


def stage_account(plan: Any, endpoint_url: str, needed: int) -> StagedAccount:
    """Give the running emulator what `plan` needs to pass `peagle doctor`: model data,
    drafter, the execution role, the image, and a hosting quota raised by `needed`
    instances (room for this endpoint beside what the account already runs)."""
    import boto3

    check_emulator_role(plan.execution_role_arn)
    session = boto3.Session(
        aws_access_key_id=FAKE_ACCESS_KEY,
        aws_secret_access_key=FAKE_SECRET_KEY,
        region_name=plan.region,
    )
    quotas = session.client("service-quotas", endpoint_url=endpoint_url)
    quota = applied_endpoint_quota(quotas, plan.instance_type) + needed
    world = stage_world(plan, session, None, endpoint_quota=quota, endpoint_url=endpoint_url)
    return StagedAccount(world, plan.execution_role_arn, quota, needed)
