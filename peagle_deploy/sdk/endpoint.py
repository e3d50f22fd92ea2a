"""`PeagleEndpoint`: a handle on one SageMaker endpoint: chat, stream, status, delete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import PeagleError
from peagle_deploy.naming import DerivedKind, derived_name_pattern, name_contains, sweepable
from peagle_deploy.records.paths import RecordPath
from peagle_deploy.streaming import ChatChunk, iter_chat_chunks

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan
    from peagle_deploy.records import DeploymentManifest
    from peagle_deploy.sdk.outcome import DeployOutcome
    from peagle_deploy.sdk.waiter import WaitResult


class InvokeError(PeagleError):
    """InvokeEndpoint / InvokeEndpointWithResponseStream failed; says which and why."""


class EndpointNotFoundError(PeagleError):
    """No endpoint of that name in the region."""


@dataclass(frozen=True)
class ChatResult:
    """A non-streamed chat completion."""

    text: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    raw: dict[str, Any]


class ChatStream(Iterator[str]):
    """Iterate for text deltas; afterwards `.usage`, `.finish_reason`, `.text` are set.

    Usage arrives in the final chunk (the SDK asks for it with
    `stream_options.include_usage` unless told otherwise).
    """

    def __init__(self, chunks: Iterator[ChatChunk], endpoint_name: str):
        self._chunks = chunks
        self._endpoint_name = endpoint_name
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.chunks = 0
        self._parts: list[str] = []

    @property
    def text(self) -> str:
        """Everything streamed so far."""
        return "".join(self._parts)

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        while True:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                raise
            except (ClientError, BotoCoreError) as exc:
                raise InvokeError(
                    f"stream from endpoint {self._endpoint_name} broke off: {exc}"
                ) from exc
            self.chunks += 1
            if chunk.usage:
                self.usage = chunk.usage
            if chunk.finish_reason:
                self.finish_reason = chunk.finish_reason
            if chunk.text:
                self._parts.append(chunk.text)
                return chunk.text


@dataclass
class DeleteResult:
    """What `PeagleEndpoint.delete()` removed (names), and what was already gone."""

    endpoint_name: str
    endpoint_deleted: bool
    endpoint_configs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    scalable_targets: list[str] = field(default_factory=list)
    manifest_parameter: str | None = None
    """The SSM manifest parameter deleted with the endpoint (None: there was none)."""
    manifest_error: str | None = None
    """Why the manifest could not be deleted (the endpoint and its resources were)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint_name": self.endpoint_name,
            "endpoint_deleted": self.endpoint_deleted,
            "endpoint_configs_deleted": self.endpoint_configs,
            "models_deleted": self.models,
            "scalable_targets_deregistered": self.scalable_targets,
            "manifest_deleted": self.manifest_parameter,
            "manifest_error": self.manifest_error,
        }


_DIMENSION = "sagemaker:variant:DesiredInstanceCount"


class PeagleEndpoint:
    """A handle on an endpoint. Cheap to make: no AWS call until a method needs one."""

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        boto_session: Any = None,
        plan: Plan | None = None,
        deployment: DeployOutcome | None = None,
    ):
        from peagle_deploy.aws import make_session
        from peagle_deploy.validation.aws_shapes import check_endpoint_name, check_region

        # botocore checks no patterns: a bad name would cost a round trip and come back
        # as a ValidationException (or, for DescribeEndpoint, as "not found").
        check_endpoint_name(endpoint_name)
        if region is not None:
            check_region(region)
        self.endpoint_name = endpoint_name
        self._session = make_session(region, boto_session)
        self.region: str = region or self._session.region_name or "us-east-1"
        self.plan = plan
        self.deployment = deployment
        self._clients: dict[str, Any] = {}

    @classmethod
    def from_name(
        cls,
        endpoint_name: str,
        *,
        region: str | None = None,
        boto_session: Any = None,
        check: bool = False,
    ) -> PeagleEndpoint:
        """Handle on an existing endpoint; `check=True` verifies it exists now."""
        handle = cls(endpoint_name, region=region, boto_session=boto_session)
        if check:
            handle.describe()
        return handle

    def __repr__(self) -> str:
        return f"PeagleEndpoint({self.endpoint_name!r}, region={self.region!r})"

    # --- clients --------------------------------------------------------------------
    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            from peagle_deploy.aws import make_client

            extra: dict[str, Any] = {}
            if service == "sagemaker-runtime":
                # A long generation can take minutes before the first byte (non-streamed).
                extra = {"read_timeout": 600, "connect_timeout": 10}
            client = make_client(service, region=self.region, boto_session=self._session, **extra)
            self._clients[service] = client
        return client

    @property
    def sagemaker(self) -> Any:
        return self._client("sagemaker")

    # --- control plane --------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """DescribeEndpoint, without ResponseMetadata. EndpointNotFoundError if absent."""
        from peagle_deploy.aws import describe_endpoint_or_none

        desc = describe_endpoint_or_none(self.sagemaker, self.endpoint_name)
        if desc is None:
            raise EndpointNotFoundError(f"endpoint {self.endpoint_name} not found in {self.region}")
        return desc

    def status(self) -> str:
        """EndpointStatus: Creating, InService, Updating, RollingBack, Failed, ..."""
        return str(self.describe()["EndpointStatus"])

    def wait(
        self,
        *,
        timeout_s: float = 3600.0,
        poll_interval_s: float = 2.0,
        progress: bool | None = None,
    ) -> WaitResult:
        """Wait until the endpoint settles (InService, Failed or OutOfService)."""
        from peagle_deploy.sdk.waiter import wait_for_endpoint

        return wait_for_endpoint(
            self.sagemaker,
            self.endpoint_name,
            timeout_s=timeout_s,
            poll_interval_s=poll_interval_s,
            progress=progress,
        )

    def tags(self) -> dict[str, str]:
        """The endpoint's tags (peagle:managed, peagle:stage, peagle:spec-hash, ...)."""
        arn = self.describe()["EndpointArn"]
        tags = self.sagemaker.list_tags(ResourceArn=arn).get("Tags", [])
        return {t["Key"]: t["Value"] for t in tags}

    def manifest(self) -> DeploymentManifest | None:
        """The deployment manifest recorded for this endpoint (None if none or untagged)."""
        from peagle_deploy.plan import STAGE_TAG
        from peagle_deploy.records import read_manifest

        stage = self.tags().get(STAGE_TAG)
        if stage is None:
            return None
        return read_manifest(stage, self.endpoint_name, ssm_client=self._client("ssm"))

    def logs(self, limit: int = 20) -> list[str]:
        """Last lines of the endpoint's newest CloudWatch log stream ([] if none)."""
        from peagle_deploy.sdk.waiter import log_tail

        return log_tail(self._client("logs"), self.endpoint_name, limit=limit)

    def delete(self) -> DeleteResult:
        """Delete the endpoint, its endpoint configs and their models, and its manifest.

        Tolerates anything already gone. Besides the current (and any pending) config,
        also removes configs and models whose names the planner derived for this
        endpoint (left over from earlier specs), and the deployment manifest in SSM (a
        later promotion must not read a manifest of an endpoint that is gone). Does not
        wait for SageMaker to finish deleting the endpoint. Ctrl-C raises `Interrupted`,
        whose message says how to finish.
        """
        from peagle_deploy.sdk.waiter import Interrupted

        try:
            return self._delete()
        except Interrupted:
            raise
        except KeyboardInterrupt:
            name = self.endpoint_name
            raise Interrupted(
                name,
                f"interrupted while deleting {name}: what was deleted stays deleted. Finish "
                f"with `peagle delete {name} --yes` (it skips what is already gone); "
                f"`peagle status {name} --wait` shows the endpoint meanwhile.",
            ) from None

    def _delete(self) -> DeleteResult:
        from botocore.exceptions import ClientError

        from peagle_deploy.aws import (
            delete_quietly,
            describe_endpoint_or_none,
            endpoint_config_models,
        )

        sm = self.sagemaker
        result = DeleteResult(self.endpoint_name, endpoint_deleted=False)
        desc = describe_endpoint_or_none(sm, self.endpoint_name)
        configs: list[str] = []
        stage: str | None = None
        if desc is not None:
            stage = self._stage_tag(desc["EndpointArn"])
            configs.append(desc["EndpointConfigName"])
            pending = (desc.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
            if pending:
                configs.append(pending)
            variants = [v["VariantName"] for v in desc.get("ProductionVariants", [])]
            result.scalable_targets = self._deregister_autoscaling(variants)
            result.endpoint_deleted = delete_quietly(
                sm.delete_endpoint, EndpointName=self.endpoint_name
            )
        configs += [
            name for name in derived_resources(sm, self.endpoint_name, "c") if name not in configs
        ]
        models: list[str] = []
        for config in configs:
            served = endpoint_config_models(sm, config)
            if served is None:
                continue
            models += served
            if delete_quietly(sm.delete_endpoint_config, EndpointConfigName=config):
                result.endpoint_configs.append(config)
        models += derived_resources(sm, self.endpoint_name, "m")
        for model in dict.fromkeys(models):
            if delete_quietly(sm.delete_model, ModelName=model):
                result.models.append(model)
        try:
            result.manifest_parameter = self._delete_manifest(stage)
        except (ClientError, PeagleError) as exc:  # no ssm:DeleteParameter, a stage tag
            # that is no path segment: the endpoint is gone anyway
            result.manifest_error = f"{type(exc).__name__}: {exc}"
        return result

    def _stage_tag(self, arn: str) -> str | None:
        from peagle_deploy.plan import STAGE_TAG

        tags = self.sagemaker.list_tags(ResourceArn=arn).get("Tags", [])
        return next((t["Value"] for t in tags if t["Key"] == STAGE_TAG), None)

    def _delete_manifest(self, stage: str | None) -> str | None:
        """Delete the endpoint's manifest; its parameter name, or None when there was none.

        The stage comes from the endpoint's tag; when the endpoint is already gone, the
        manifests of every stage are searched for this endpoint's.
        """
        from peagle_deploy.records import delete_record, find_records

        ssm = self._client("ssm")
        paths = (
            [RecordPath(stage, self.endpoint_name, "manifest")]
            if stage is not None
            else find_records(ssm, "manifest", endpoint_name=self.endpoint_name)
        )
        deleted = [path.name for path in paths if delete_record(ssm, path)]
        return deleted[0] if deleted else None

    def _deregister_autoscaling(self, variants: list[str]) -> list[str]:
        """Deregister the variants' Application Auto Scaling targets (if any).

        A target left behind after its endpoint is gone is an orphan that keeps its
        scaling policy and alarms. Only registered targets are deregistered: a target's
        IAM resource is its own (generated) id, with its tags, so a caller allowed only
        its stage's targets is refused a deregistration of a target that does not exist
        (docs/ci.md), where reading them is allowed everywhere.
        """
        aas = self._client("application-autoscaling")
        resources = [f"endpoint/{self.endpoint_name}/variant/{v}" for v in variants]
        if not resources:
            return []
        found = aas.describe_scalable_targets(
            ServiceNamespace="sagemaker", ResourceIds=resources, ScalableDimension=_DIMENSION
        ).get("ScalableTargets", [])
        removed: list[str] = []
        for resource in [r for r in resources if r in {t["ResourceId"] for t in found}]:
            try:
                aas.deregister_scalable_target(
                    ServiceNamespace="sagemaker", ResourceId=resource, ScalableDimension=_DIMENSION
                )
            except Exception as exc:
                from peagle_deploy.aws import error_code

                if error_code(exc) in ("ObjectNotFoundException", "ValidationException"):
                    continue
                raise
            removed.append(resource)
        return removed

    # --- data plane -----------------------------------------------------------------
    def _body(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> bytes:
        if not isinstance(messages, list) or not messages:
            raise InvokeError("messages must be a non-empty list of {'role', 'content'} dicts")
        return json.dumps({"messages": messages, **params}).encode("utf-8")

    def chat(self, messages: list[dict[str, Any]], **params: Any) -> ChatResult:
        """One OpenAI chat-completions request through InvokeEndpoint.

        `params` go into the payload as given (max_tokens, temperature, model, ...).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        body = self._body(messages, {k: v for k, v in params.items() if k != "stream"})
        try:
            resp = self._client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint_name,
                Body=body,
                ContentType="application/json",
                Accept="application/json",
            )
            raw = resp["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise InvokeError(f"invoking endpoint {self.endpoint_name} failed: {exc}") from exc
        try:
            doc = json.loads(raw)
        except ValueError:
            raise InvokeError(
                f"endpoint {self.endpoint_name} answered with non-JSON: {raw[:200]!r}"
            ) from None
        choices = doc.get("choices") or [{}]
        message = choices[0].get("message") or {}
        return ChatResult(
            text=str(message.get("content") or choices[0].get("text") or ""),
            finish_reason=choices[0].get("finish_reason"),
            usage=doc.get("usage"),
            raw=doc,
        )

    def stream_chunks(self, messages: list[dict[str, Any]], **params: Any) -> Iterator[ChatChunk]:
        """Every parsed `chat.completion.chunk` of a streamed answer (role, text, usage)."""
        from botocore.exceptions import BotoCoreError, ClientError

        payload = {"stream": True, **params}
        payload.setdefault("stream_options", {"include_usage": True})
        body = self._body(messages, payload)
        try:
            resp = self._client("sagemaker-runtime").invoke_endpoint_with_response_stream(
                EndpointName=self.endpoint_name,
                Body=body,
                ContentType="application/json",
                Accept="text/event-stream",
            )
        except (ClientError, BotoCoreError) as exc:
            raise InvokeError(f"streaming from {self.endpoint_name} failed: {exc}") from exc

        def parts() -> Iterator[bytes]:
            for event in resp["Body"]:
                part = event.get("PayloadPart")
                if part is not None:
                    yield part["Bytes"]

        return iter_chat_chunks(parts())

    def stream(self, messages: list[dict[str, Any]], **params: Any) -> ChatStream:
        """Text deltas of a streamed answer (InvokeEndpointWithResponseStream).

        SSE events split across PayloadParts (even mid-character) are reassembled. The
        returned iterator exposes `.usage` and `.finish_reason` once consumed.
        """
        return ChatStream(self.stream_chunks(messages, **params), self.endpoint_name)


def derived_resources(sagemaker: Any, endpoint_name: str, kind: DerivedKind) -> list[str]:
    """The models (`m`) or endpoint configs (`c`) that exist under names the planner
    derives for `endpoint_name`; none when such names do not identify it alone."""
    if not sweepable(endpoint_name):
        return []
    operation, key, field_name = {
        "c": ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
        "m": ("list_models", "Models", "ModelName"),
    }[kind]
    pattern = derived_name_pattern(endpoint_name, kind)
    pages = sagemaker.get_paginator(operation).paginate(NameContains=name_contains(endpoint_name))
    return [
        item[field_name]
        for page in pages
        for item in page.get(key, [])
        if pattern.match(item[field_name])
    ]
