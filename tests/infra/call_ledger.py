"""The call ledger's recorder: every AWS call a run makes, with who made it.

`Recorder.recording()` wraps botocore's `BaseClient._make_api_call` (every boto3 and
botocore client of the process, on every thread) and the one AWS request that is not a
botocore operation, the CloudWatch PromQL query of detailed observability
(`experiment.detailed.sigv4_post`, recorded as `cloudwatch` `QueryMetrics`). Calls are
kept only while `recorder.on(stage, role, command)` says whose run it is, so the test's
own set-up and checks stay out of the ledger.

`asks_for` turns one call into the IAM requests AWS authorizes, through the product's
map (`peagle_deploy.catalog.iam_calls`, from the Service Authorization Reference; an
unknown operation raises there), adding what no parameter carries but IAM evaluates:
the tags of the resource the call acts on (`aws:ResourceTag/*` of a scalable target,
known from the call that registered it, and of a role being passed, known from the
emulated account).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from iam_oracle import ACCOUNT, Ask

from peagle_deploy.catalog.iam_calls import IamRequest, Where, iam_requests

PROMQL = ("cloudwatch", "QueryMetrics")
"""How the ledger names CloudWatch's PromQL query (an HTTP API, not a botocore operation)."""


@dataclass(frozen=True)
class Who:
    """Whose run a call belongs to: the stage, the role kind that makes it, the command."""

    stage: str
    role: str
    """`ci` (the stage's CI role), `provider` (the stage stack's model handler)."""
    command: str
    doctor: bool = False
    """Made by the `peagle doctor` run that goes before the command."""


@dataclass(frozen=True)
class Call:
    who: Who
    service: str
    operation: str
    params: Mapping[str, Any]
    region: str

    @property
    def stage(self) -> str:
        return self.who.stage


@dataclass
class Recorder:
    """Every AWS call made while `on(...)` says whose run it is (all threads)."""

    calls: list[Call] = field(default_factory=list)
    promql: Callable[[str, dict[str, str]], Any] | None = None
    """Answers the PromQL query in-process (the emulator's store) instead of over HTTP."""
    _who: Who | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, service: str, operation: str, params: Mapping[str, Any], region: str) -> None:
        who = self._who
        if who is None:
            return
        with self._lock:
            self.calls.append(Call(who, service, operation, dict(params), region))

    @contextlib.contextmanager
    def on(self, stage: str, role: str, command: str) -> Iterator[None]:
        before, self._who = self._who, Who(stage, role, command)
        try:
            yield
        finally:
            self._who = before

    @contextlib.contextmanager
    def doctor(self) -> Iterator[None]:
        """Calls the block makes are the doctor's, before the command's own."""
        before = self._who
        if before is not None:
            self._who = dataclasses.replace(before, doctor=True)
        try:
            yield
        finally:
            self._who = before

    @property
    def who(self) -> Who | None:
        return self._who

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        """Calls the block makes are nobody's run (a caller's traffic)."""
        before, self._who = self._who, None
        try:
            yield
        finally:
            self._who = before

    @contextlib.contextmanager
    def recording(self) -> Iterator[Recorder]:
        from botocore.client import BaseClient

        from peagle_deploy.experiment import detailed

        original = BaseClient._make_api_call
        original_post = detailed.sigv4_post
        recorder = self

        def record(client: Any, operation: str, params: Mapping[str, Any]) -> Any:
            recorder._add(
                client.meta.service_model.service_name,
                operation,
                params,
                str(client.meta.region_name),
            )
            return original(client, operation, params)

        def recorded_post(clients: Any) -> Any:
            post = recorder.promql or original_post(clients)

            def send(path: str, fields: dict[str, str]) -> Any:
                recorder._add(*PROMQL, {"path": path, **fields}, str(clients.region))
                return post(path, fields)

            return send

        BaseClient._make_api_call = record  # type: ignore[method-assign]
        detailed.sigv4_post = recorded_post  # type: ignore[assignment]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]
            detailed.sigv4_post = original_post  # type: ignore[assignment]


@dataclass
class Tags:
    """What IAM knows of a resource and no call's parameters say: its tags."""

    roles: dict[str, dict[str, str]] = field(default_factory=dict)
    """role ARN -> its tags (of the roles a call passes, reads or simulates)."""
    targets: dict[str, dict[str, str]] = field(default_factory=dict)
    """scalable target ResourceId -> the tags it was registered with."""

    def follow(self, call: Call) -> None:
        """Keep the scalable targets' tags as the calls register and remove them."""
        if call.operation == "RegisterScalableTarget":  # tags only a new target
            self.targets.setdefault(
                str(call.params["ResourceId"]), dict(call.params.get("Tags") or {})
            )
        elif call.operation == "DeregisterScalableTarget":
            self.targets.pop(str(call.params["ResourceId"]), None)

    def of(self, call: Call, request: IamRequest) -> dict[str, str]:
        if request.action.startswith("application-autoscaling:"):
            tags = self.targets.get(str(call.params.get("ResourceId")), {})
        elif request.action.startswith("iam:"):
            tags = self.roles.get(request.resource, {})
        else:
            return {}
        return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}


def requests_of(call: Call) -> list[IamRequest]:
    """The product map's IAM requests of one call (UnmappedCallError when it cannot)."""
    return iam_requests(call.service, call.operation, call.params, Where(call.region, ACCOUNT))


def asks_for(call: Call, tags: Tags | None = None) -> list[Ask]:
    """What IAM authorizes for one call, as the outside evaluator's questions."""
    out = []
    for r in requests_of(call):
        context: dict[str, str | list[str]] = {
            k: list(v) if isinstance(v, tuple) else v for k, v in r.context.items()
        }
        if tags is not None:
            context |= tags.of(call, r)
        out.append(Ask(r.action, r.resource, context))
    return out


def ask_key(ask: Ask) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A value equal for equal asks."""
    return (
        ask.action,
        ask.resource,
        tuple(sorted((k, repr(v)) for k, v in ask.context.items())),
    )
