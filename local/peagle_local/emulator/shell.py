"""The emulator for a shell: serve it in one terminal, ready its account from another.

`serve` runs `LocalAWS` on loopback until interrupted and prints the `export` lines that
point another shell's AWS SDKs at it: a free port and an access key, both new on every
start, and the server answers only requests signed with that key (guard.py). Its
account starts like a new one: no hosting
instances granted (`AccountExtensions.new_account_endpoint_quotas`), so `peagle doctor`
names the quota to raise. `stage_account` then gives that running emulator, over HTTP
only, what one plan needs (`world.stage_world`, the same code the demo and the tests
stage with); it refuses any endpoint that is not on this machine's loopback, so it can
never write to a real account.
"""

from __future__ import annotations

import errno
import ipaddress
import math
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from peagle_deploy.errors import InputError, PeagleError
from peagle_local.emulator.chat import StreamSettings
from peagle_local.emulator.local import LocalAWS
from peagle_local.emulator.moto_ext import EndpointScript, known_instance_types
from peagle_local.emulator.sigv4 import EmulatorCredentials
from peagle_local.emulator.world import (
    EMULATED_ACCOUNT,
    StagedWorld,
    stage_world,
)

DEFAULT_PORT = 0
"""`peagle emulator start`'s port: any free one (the export lines say which), so another
program cannot count on finding the emulator at a known port."""
PORT_ALLOWED = "a free port, or none (--port 0, the default): any free one"
MAX_PHASE_S = 3600.0
"""Longest scripted Creating/Updating phase (a real endpoint takes minutes)."""
PHASE_ALLOWED = f"a number of seconds from 0 to {MAX_PHASE_S:g}"
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
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

    def __post_init__(self) -> None:
        for flag, seconds in (("--creating-s", self.creating_s), ("--updating-s", self.updating_s)):
            if not (math.isfinite(seconds) and 0 <= seconds <= MAX_PHASE_S):
                raise InputError(flag, f"{seconds!r} is out of range", PHASE_ALLOWED)


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
        problem = (
            "is in use (another `peagle emulator start`?)"
            if exc.errno == errno.EADDRINUSE
            else f"cannot be served ({exc.strerror or exc})"
        )
        raise InputError("--port", f"{settings.port} {problem}", PORT_ALLOWED) from None
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
        say(
            f"# peagle emulator on {aws.endpoint_url}, for requests signed with this key only: "
            "paste the lines above into another shell;"
        )
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
    try:
        port = parts.port
    except ValueError:  # not a number, or out of 0-65535
        port = 0
    if port == 0:
        raise InputError(
            ENDPOINT_VARIABLE,
            f"{url!r} has no port a server can listen on",
            "http://127.0.0.1:PORT with PORT from 1 to 65535, as `peagle emulator start` prints it",
        )
    return url


def emulator_credentials(environ: Mapping[str, str] | None = None) -> EmulatorCredentials:
    """The emulator's key, from the export lines pasted into this shell; else InputError."""
    env = os.environ if environ is None else environ
    for variable in KEY_VARIABLES:
        if not env.get(variable, "").strip():
            raise InputError(
                variable,
                "is not set: the emulator answers only requests signed with its own key",
                "the export lines `peagle emulator start` printed, pasted into this shell",
            )
    return EmulatorCredentials(env[KEY_VARIABLES[0]].strip(), env[KEY_VARIABLES[1]].strip())


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


def instances_to_stage(spec: Any) -> tuple[int, str]:
    """Instances the staged quota adds for `spec`, and why (the summary's words).

    What doctor asks before the deploy (`instances_for`) and before a later update of
    the same endpoint: a blue/green update runs the new fleet beside the old one, so
    twice the fleet; with an experiment, also what it asks before `peagle experiment
    start`: both fleets of the experiment beside the fleet the endpoint runs until the
    update has moved traffic (counted as in use).
    """
    from peagle_deploy.doctor.capacity import instances_for

    needed, why = instances_for(spec)
    if spec.experiment is None:
        return 2 * needed, f"+{2 * needed}: {why}, twice for a blue/green update"
    serving, _ = instances_for(spec.model_copy(update={"experiment": None}))
    return needed + serving, (
        f"+{needed + serving}: {why}, and the {serving} the endpoint runs until "
        "`peagle experiment start` has moved traffic"
    )


STAGED_LEDGER = "/peagle-emulator/staged"
"""Where the emulated account keeps what each staged endpoint needs (an SSM parameter
per instance type and endpoint), so staging again sets the same quota."""


def staged_total(ssm: Any, instance_type: str, endpoint_name: str, needed: int) -> int:
    """Record that `endpoint_name` needs `needed` instances of `instance_type` (replacing
    what an earlier staging of it said), and return what every staged endpoint needs
    together: the quota to set. Staging the same spec twice sets the same figure."""
    ssm.put_parameter(
        Name=f"{STAGED_LEDGER}/{instance_type}/{endpoint_name}",
        Value=str(needed),
        Type="String",
        Overwrite=True,
    )
    total = 0
    pages = ssm.get_paginator("get_parameters_by_path").paginate(
        Path=f"{STAGED_LEDGER}/{instance_type}"
    )
    for page in pages:
        total += sum(int(p["Value"]) for p in page.get("Parameters", []))
    return total


def stage_account(
    plan: Any, endpoint_url: str, credentials: EmulatorCredentials, needed: int
) -> StagedAccount:
    """Give the running emulator what `plan` needs to pass `peagle doctor`: model data,
    drafter, the execution role, the image, and a hosting quota that holds `needed`
    instances for this endpoint beside what the other staged endpoints need (`staged_total`:
    staging the same spec again changes nothing). No emulator at `endpoint_url`, or one
    that refuses `credentials`: PeagleError, one line."""
    import boto3

    check_emulator_role(plan.execution_role_arn)
    session = boto3.Session(
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        region_name=plan.region,
    )
    try:
        ssm = session.client("ssm", endpoint_url=endpoint_url)
        quota = float(staged_total(ssm, plan.instance_type, plan.endpoint_name, needed))
        world = stage_world(plan, session, None, endpoint_quota=quota, endpoint_url=endpoint_url)
    except Exception as exc:
        refused = _unreachable(exc, endpoint_url)
        if refused is None:
            raise
        raise refused from None
    return StagedAccount(world, plan.execution_role_arn, quota, needed)


REFUSED_KEY = frozenset(
    {"InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationToken"}
)


def _unreachable(exc: Exception, url: str) -> PeagleError | None:
    """The two expected failures of staging, in one line each (None: any other)."""
    if type(exc).__name__ == "EndpointConnectionError":
        return PeagleError(
            f"no emulator answers at {url}: start it with `peagle emulator start` "
            "(and paste its export lines into this shell)"
        )
    code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
    if code in REFUSED_KEY:
        return PeagleError(
            f"the emulator at {url} refuses this shell's AWS_ACCESS_KEY_ID ({code}): paste "
            "the export lines of its current start (a new key on every start)"
        )
    return None
