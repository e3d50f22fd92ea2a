"""What every check shares: the plan, AWS clients, the caller's account, error triage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from peagle_deploy.doctor.coming import DEPLOY, ComingRun
from peagle_deploy.doctor.result import CheckResult, warned
from peagle_deploy.plan import Plan
from peagle_deploy.validation.aws_shapes import partition_of

T = TypeVar("T")

# Error codes that mean "you may not look", not "it is broken": the check becomes a
# warning, never a failure.
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "AuthorizationErrorException",
        "UnauthorizedOperation",
        "Forbidden",
        "403",
    }
)


def error_code(exc: BaseException) -> str:
    from peagle_deploy.aws import error_code as code

    return code(exc)


def is_access_denied(exc: BaseException) -> bool:
    return error_code(exc) in ACCESS_DENIED_CODES


def short_error(exc: BaseException) -> str:
    """`Code: message` of an AWS error, else the exception's own text (one line)."""
    from peagle_deploy.aws import error_message

    code = error_code(exc)
    text = error_message(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{code}: {text}" if code else f"{type(exc).__name__}: {text}"


def could_not_check(
    check: str, resource: str, exc: BaseException, *, denied: str, fix: str, failed: str
) -> CheckResult:
    """The warning for a check that an AWS error stopped: a caller without the right
    (`denied`, with the `fix` to grant it) or a call that failed (`failed`)."""
    if is_access_denied(exc):
        return warned(check, resource, f"could not check: {denied} ({short_error(exc)})", fix)
    return warned(check, resource, f"could not check: {failed} ({short_error(exc)})")


@dataclass
class DoctorContext:
    """Shared by the checks, which run in parallel threads.

    boto3 clients are thread-safe but creating them from one Session is not, so clients
    are made under a lock and cached per (service, region).
    """

    plan: Plan
    session: Any
    role: Any = None
    """The role SageMaker will run as (doctor.role.RoleView); None: the plan's role, asked
    of the IAM policy simulator."""
    coming: ComingRun = DEPLOY
    """The run after the doctor, whose calls `caller.permissions` asks about."""
    _clients: dict[tuple[str, str], Any] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _account_id: str | None = field(default=None, init=False)
    _memo: dict[Hashable, Any] = field(default_factory=dict, init=False)
    _memo_locks: dict[Hashable, threading.Lock] = field(default_factory=dict, init=False)

    @property
    def region(self) -> str:
        return self.plan.region

    @property
    def partition(self) -> str:
        return partition_of(self.plan.region)

    def client(self, service: str, region: str | None = None) -> Any:
        from peagle_deploy.aws import client_config

        where = region or self.plan.region
        with self._lock:
            cached = self._clients.get((service, where))
            if cached is None:
                # Few attempts: a read that throttles is better reported than waited for.
                cached = self.session.client(
                    service,
                    region_name=where,
                    config=client_config(retries={"mode": "standard", "total_max_attempts": 3}),
                )
                self._clients[(service, where)] = cached
            return cached

    def bucket_owner(self, bucket: str) -> str | None:
        """The account that must own `bucket`: the spec's `expected_bucket_owner`, else the
        deploying account; None for JumpStart's own buckets (`access.bucket_owner`) or
        when the caller's identity cannot be read (the reads then fail and say so)."""
        from peagle_deploy.access import bucket_owner
        from peagle_deploy.catalog.buckets import is_jumpstart_bucket

        expected = self.plan.spec.expected_bucket_owner
        if expected is None and not is_jumpstart_bucket(bucket):
            try:
                expected = self.account_id
            except Exception:
                return None
        return bucket_owner(bucket, expected)

    @property
    def account_id(self) -> str:
        """The caller's account (sts:GetCallerIdentity needs no permission)."""
        if self._account_id is None:
            identity = self.client("sts").get_caller_identity()
            self._account_id = str(identity["Account"])
        return self._account_id

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per doctor run for `key` (checks in other threads wait for it):
        a bucket's policy serves the model data and the drafter lines alike."""
        with self._lock:
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = compute()
            value: T = self._memo[key]
            return value
