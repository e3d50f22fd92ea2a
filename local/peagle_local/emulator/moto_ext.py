"""Stand-in extensions for moto's SageMaker (docs/platform-facts.md, moto): clearly a test double.

moto 5.2.5 lacks what a P-EAGLE deployment exercises. `MotoExtensions` patches moto's
classes in place (and undoes every patch on exit) to add:

- modern GPU instance types in CreateEndpointConfig (anything in botocore's enum);
- "already exists" errors on CreateModel / CreateEndpointConfig / CreateEndpoint (moto
  silently overwrites; SageMaker refuses), and CreateModel's EnableNetworkIsolation kept
  for DescribeModel (moto drops it);
- scripted endpoint lifecycles: Creating for N seconds -> InService, or -> Failed with
  a FailureReason and container log lines in CloudWatch Logs
  `/aws/sagemaker/Endpoints/<name>`;
- UpdateEndpoint: Updating -> InService on the new config, or a scripted rollback
  Updating -> RollingBack -> InService on the old config; RetainAllVariantProperties
  keeps the variants' instance counts and weights (`capacity`), an update that would
  change a scalable target's instance type fails, and `autoscale` moves a registered
  variant's count as its scaling policy would, honouring SuspendedState;
- InvokeEndpoint answering OpenAI chat completions, and InvokeEndpointWithResponseStream
  in the real event-stream framing (see `eventstream`), paced by `StreamSettings`;
- optional speculative-decoding metric lines (`peagle_serve.contract.format_metric_line`)
  written to the endpoint's log group after each invocation, like the container does;
- endpoint configs with several production variants or a shadow variant
  (`ShadowProductionVariants`, which moto drops): requests routed by weight, copies
  mirrored to the shadow, per-variant CloudWatch metrics and, for variants given a
  `VariantBehaviour` (`set_variant`), per-variant serving and metric lines (`variants`);
- InferenceExperiment (shadow tests), which moto lacks (`inference_experiments`), and
  SageMaker's detailed observability: vLLM's series per variant, answered through
  CloudWatch's PromQL QueryMetrics route (`observability`);
- training jobs with SageMaker's lifecycle, whose driver trains the emulator's table
  drafter on the job's data (`training_jobs`); an endpoint serving such a drafter
  reports, per answer, what that drafter accepts (`table_drafter`).

The same patches serve `moto.mock_aws()` in-process and a moto server in this process
(see `LocalAWS`). Transitions are evaluated lazily against a monotonic clock whenever
the endpoint is read, so no background thread is needed.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal
from urllib.parse import unquote

from peagle_local.emulator.capacity import Retention, autoscale, type_change_refused
from peagle_local.emulator.chat import (
    ChatRequest,
    ChatRequestError,
    StreamSettings,
    chat_completion,
    generate,
    sse_events,
)
from peagle_local.emulator.eventstream import model_stream_error, payload_part, split_awkwardly
from peagle_local.emulator.inference_experiments import InferenceExperiments
from peagle_local.emulator.inference_experiments import install as install_inference_experiments
from peagle_local.emulator.logs import log_group_name, write_endpoint_logs
from peagle_local.emulator.observability import QUERY_PATH, DetailedMetrics, query_handler
from peagle_local.emulator.patching import Installable, Patches, Slot
from peagle_local.emulator.table_drafter import endpoint_drafter, speculate
from peagle_local.emulator.traffic import VariantBehaviour
from peagle_local.emulator.training_jobs import TrainingJobs, TrainingScript
from peagle_local.emulator.training_jobs import install as install_training_jobs
from peagle_local.emulator.variants import (
    EndpointRef,
    Route,
    behaviour_from_model,
    route,
    serve_and_report,
    variant_images,
)

DEFAULT_VARIANT = "AllTraffic"
STREAM_PATH = "{0}/endpoints/(?P<name>[^/]+)/invocations-response-stream$"


@dataclass(frozen=True)
class EndpointScript:
    """How an endpoint of a given name behaves in the emulator.

    `creating_s`: time in Creating; then Failed with `fail_reason` if set, else InService.
    `updating_s`: time in Updating after UpdateEndpoint; then InService on the new config,
    or, with `rollback_on_update`, RollingBack for `rolling_back_s` and InService on the old
    config with `rollback_reason` as FailureReason. `log_lines` are written to the
    endpoint's log group when a create or update finishes (the container's start-up output).
    """

    creating_s: float = 0.0
    fail_reason: str | None = None
    updating_s: float = 0.0
    rollback_on_update: bool = False
    rolling_back_s: float = 0.0
    rollback_reason: str = (
        "Blue/green update rolled back: the new fleet did not pass health checks "
        "(emulated rollback)."
    )
    log_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class AcceptanceMetrics:
    """Speculative-decoding figures the emulated container reports per invocation."""

    acceptance_rate: float
    num_speculative_tokens: int
    per_position: tuple[float, ...] | None = None

    def per_position_rates(self) -> list[float]:
        if self.per_position is not None:
            return list(self.per_position)
        k = self.num_speculative_tokens
        if k <= 1:
            return [self.acceptance_rate] * k
        # Decreasing by position with (unclamped) mean equal to the acceptance rate.
        return [max(0.0, min(1.0, self.acceptance_rate * (1.5 - i / (k - 1)))) for i in range(k)]


@dataclass(frozen=True)
class Transition:
    """A scripted status change: which endpoint, to what, at which `clock()` time."""

    endpoint_name: str
    status: str
    at: float


@dataclass
class _Phase:
    until: float
    then: Callable[[], None]


@dataclass
class _Tracked:
    endpoint: Any
    phase: _Phase | None = None


_SLOT: Slot[MotoExtensions] = Slot("peagle emulator extensions")


def _active() -> MotoExtensions:
    return _SLOT.get()


def installed() -> MotoExtensions | None:
    """The installed extensions, if any."""
    return _SLOT.active


@dataclass
class MotoExtensions(Installable):
    """Install with `with MotoExtensions() as ext:` (inside or outside `mock_aws`).

    Only one instance can be installed at a time in a process.
    """

    stream: StreamSettings = field(default_factory=StreamSettings)
    default_script: EndpointScript = field(default_factory=EndpointScript)
    clock: Callable[[], float] = time.monotonic
    _scripts: dict[str, EndpointScript] = field(default_factory=dict, init=False)
    _streams: dict[str, StreamSettings] = field(default_factory=dict, init=False)
    _metrics: dict[str, AcceptanceMetrics] = field(default_factory=dict, init=False)
    _variants: dict[tuple[str, str], VariantBehaviour] = field(default_factory=dict, init=False)
    seed: int = 0
    """Seeds the routing and the variants' serving draws (reproducible runs)."""
    wall: Callable[[], float] = time.time
    """Wall-clock seconds stamped on the variants' metric lines and CloudWatch metrics."""
    _rng: random.Random = field(default_factory=random.Random, init=False)
    _tracked: dict[int, _Tracked] = field(default_factory=dict, init=False)
    _patches: Patches = field(default_factory=Patches, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)
    _slot: ClassVar[Slot[MotoExtensions]] = _SLOT
    variants_from_models: bool = False
    """Variants with no `set_variant` serve as their model's speculative config says
    (K from SM_VLLM_SPECULATIVE_CONFIG, `VariantBehaviour`'s other defaults), so their
    containers report: what `peagle emulator start` serves."""
    inference_experiments: InferenceExperiments = field(
        default_factory=InferenceExperiments, init=False
    )
    detailed: DetailedMetrics = field(default_factory=DetailedMetrics, init=False)
    training_jobs: TrainingJobs = field(default_factory=TrainingJobs, init=False)
    """Training jobs, which moto completes on creation (`training_jobs`)."""
    """The vLLM series SageMaker's detailed observability would publish."""
    invocations: int = field(default=0, init=False)
    history: list[Transition] = field(default_factory=list, init=False)
    """Every scripted transition, stamped with the time it was due (not when it was read)."""

    # --- control API ------------------------------------------------------------------
    def script_endpoint(
        self,
        name: str,
        *,
        creating_s: float = 0.0,
        fail_reason: str | None = None,
        updating_s: float = 0.0,
        rollback_on_update: bool = False,
        rolling_back_s: float = 0.0,
        rollback_reason: str | None = None,
        log_lines: Iterable[str] = (),
    ) -> EndpointScript:
        """Script the lifecycle of the endpoint called `name` (creates and updates after now)."""
        script = EndpointScript(
            creating_s=creating_s,
            fail_reason=fail_reason,
            updating_s=updating_s,
            rollback_on_update=rollback_on_update,
            rolling_back_s=rolling_back_s,
            log_lines=tuple(log_lines),
        )
        if rollback_reason is not None:
            script = replace(script, rollback_reason=rollback_reason)
        with self._lock:
            self._scripts[name] = script
        return script

    def script_training_job(self, name: str | None = None, **durations: Any) -> TrainingScript:
        """How long the training job `name` (None: every job without its own script)
        spends Starting, Downloading, Training, Uploading and Stopping (`starting_s`...,
        `stopping_s`), and an optional `fail_reason` at the end of Starting."""
        script = TrainingScript(**durations)
        with self._lock:
            if name is None:
                self.training_jobs.default_script = script
            else:
                self.training_jobs.scripts[name] = script
        return script

    def set_stream(
        self,
        *,
        ttft_s: float | None = None,
        token_delay_s: float | None = None,
        tokens_per_chunk: int | None = None,
        split: Literal["awkward", "event"] | None = None,
        default_max_tokens: int | None = None,
        fail_after_tokens: int | None = None,
        endpoint_name: str | None = None,
    ) -> StreamSettings:
        """Change stream pacing for every endpoint, or only for `endpoint_name`.

        `fail_after_tokens` breaks streams off with a ModelStreamError (0 disables it).
        """
        with self._lock:
            base = self._streams.get(endpoint_name, self.stream) if endpoint_name else self.stream
            changes: dict[str, Any] = {
                k: v
                for k, v in {
                    "ttft_s": ttft_s,
                    "token_delay_s": token_delay_s,
                    "tokens_per_chunk": tokens_per_chunk,
                    "split": split,
                    "default_max_tokens": default_max_tokens,
                    "fail_after_tokens": fail_after_tokens,
                }.items()
                if v is not None
            }
            if changes.get("fail_after_tokens") == 0:
                changes["fail_after_tokens"] = None
            new = replace(base, **changes)
            if endpoint_name:
                self._streams[endpoint_name] = new
            else:
                self.stream = new
            return new

    def set_acceptance_metrics(
        self,
        endpoint_name: str | None,
        *,
        acceptance_rate: float,
        num_speculative_tokens: int,
        per_position: Iterable[float] | None = None,
    ) -> AcceptanceMetrics:
        """Make the endpoint's emulated container log a metric line after each invocation.

        `endpoint_name=None` sets the default for every endpoint without its own figures.
        """
        if not 0.0 <= acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must be within [0, 1]")
        if num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        metrics = AcceptanceMetrics(
            acceptance_rate,
            num_speculative_tokens,
            tuple(per_position) if per_position is not None else None,
        )
        with self._lock:
            self._metrics[endpoint_name or ""] = metrics
        return metrics

    def set_variant(
        self, endpoint_name: str, variant_name: str, behaviour: VariantBehaviour | None = None
    ) -> VariantBehaviour:
        """How one variant of an endpoint serves (its true speed, acceptance, errors).

        Requests it answers are paced by it; every request it handles (answered or
        mirrored) writes its container's metric line and its CloudWatch metrics.
        """
        chosen = behaviour or VariantBehaviour()
        with self._lock:
            self._variants[(endpoint_name, variant_name)] = chosen
        return chosen

    def autoscale(
        self,
        endpoint_name: str,
        count: int,
        *,
        variant: str = DEFAULT_VARIANT,
        region: str = "us-east-1",
        account_id: str | None = None,
    ) -> int:
        """Scale a registered variant towards `count` as its policy would (not while its
        scaling is suspended that way); returns the count it runs after."""
        from moto.core import DEFAULT_ACCOUNT_ID

        with self._lock:
            return autoscale(
                account_id or DEFAULT_ACCOUNT_ID, region, endpoint_name, count, variant
            )

    def variant_behaviour(self, endpoint_name: str, variant_name: str) -> VariantBehaviour | None:
        with self._lock:
            return self._variants.get((endpoint_name, variant_name))

    def stream_settings(self, endpoint_name: str) -> StreamSettings:
        with self._lock:
            return self._streams.get(endpoint_name, self.stream)

    def script_for(self, endpoint_name: str) -> EndpointScript:
        with self._lock:
            return self._scripts.get(endpoint_name, self.default_script)

    def log_lines(
        self, endpoint_name: str, *, region: str = "us-east-1", account_id: str | None = None
    ) -> list[str]:
        """Every message in the endpoint's log group, oldest first (for tests and demos)."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.logs.models import logs_backends

        backend = logs_backends[account_id or DEFAULT_ACCOUNT_ID][region]
        group = backend.groups.get(log_group_name(endpoint_name))
        if group is None:
            return []
        events = [e for s in group.streams.values() for e in s.events]
        return [e.message for e in sorted(events, key=lambda e: e.timestamp)]

    # --- install (see patching.Installable) -------------------------------------------
    def __post_init__(self) -> None:
        self._rng.seed(self.seed)

    def reset_state(self) -> None:
        """Forget what the extensions hold about moto's resources (with moto's reset)."""
        with self._lock:
            self.inference_experiments.reset()
            self.training_jobs.reset()
            self._tracked.clear()

    def _after_uninstall(self) -> None:
        with self._lock:
            self._tracked.clear()

    def _install_patches(self) -> None:
        from moto.sagemaker import models as sm_models

        self._patch(sm_models.FakeEndpointConfig, "validate_instance_type", _validate_instance_type)
        self._patch_creates()
        self._patch_lifecycle()
        self._patch_runtime()

    def _patch_creates(self) -> None:
        """Creates: "already exists" as SageMaker says it, shadow variants, a scripted
        lifecycle for each new endpoint."""
        from moto.sagemaker.models import SageMakerModelBackend
        from moto.sagemaker.responses import SageMakerResponse

        backend_cls = SageMakerModelBackend
        orig_create_model = backend_cls.create_model
        orig_create_config = backend_cls.create_endpoint_config
        orig_create_endpoint = backend_cls.create_endpoint
        orig_response_create_config = SageMakerResponse.create_endpoint_config

        def create_model(backend: Any, model_name: str, *args: Any, **kwargs: Any) -> Any:
            if model_name in backend._models:
                _already_exists(backend, "model", "model", model_name)
            return orig_create_model(backend, model_name, *args, **kwargs)

        def create_endpoint_config(
            backend: Any, endpoint_config_name: str, *args: Any, **kwargs: Any
        ) -> Any:
            if endpoint_config_name in backend.endpoint_configs:
                _already_exists(
                    backend, "endpoint-config", "endpoint configuration", endpoint_config_name
                )
            return orig_create_config(backend, endpoint_config_name, *args, **kwargs)

        def create_endpoint(backend: Any, endpoint_name: str, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                if endpoint_name in backend.endpoints:
                    _already_exists(backend, "endpoint", "endpoint", endpoint_name)
                endpoint = orig_create_endpoint(backend, endpoint_name, *args, **kwargs)
                config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
                _set_shadow_variants(endpoint, config)
                self._start_create(backend, endpoint)
                return endpoint

        def response_create_endpoint_config(response: Any) -> Any:
            shadows = response._get_param("ShadowProductionVariants") or []
            if shadows:
                _check_shadow_config(
                    response.sagemaker_backend,
                    response._get_param("ProductionVariants") or [],
                    shadows,
                )
            result = orig_response_create_config(response)
            name = response._get_param("EndpointConfigName")
            response.sagemaker_backend.endpoint_configs[name].shadow_production_variants = (
                shadows or None
            )
            return result

        self._patch(backend_cls, "create_model", create_model)
        self._patch(backend_cls, "create_endpoint_config", create_endpoint_config)
        self._patch(backend_cls, "create_endpoint", create_endpoint)
        self._patch(SageMakerResponse, "create_endpoint_config", response_create_endpoint_config)
        # moto drops EnableNetworkIsolation from CreateModel; adoption compares it
        self._patch(SageMakerResponse, "create_model", _keep_network_isolation(SageMakerResponse))

    def _patch_lifecycle(self) -> None:
        """Reads advance scripted transitions; UpdateEndpoint runs its scripted update."""
        from moto.sagemaker.models import SageMakerModelBackend
        from moto.sagemaker.responses import SageMakerResponse

        backend_cls = SageMakerModelBackend
        orig_describe = backend_cls.describe_endpoint
        orig_delete = backend_cls.delete_endpoint
        orig_list = backend_cls.list_endpoints

        def describe_endpoint(backend: Any, endpoint_name: str) -> Any:
            with self._lock:
                self._advance_named(backend, endpoint_name)
                return orig_describe(backend, endpoint_name)

        def delete_endpoint(backend: Any, endpoint_name: str) -> None:
            with self._lock:
                endpoint = backend.endpoints.get(endpoint_name)
                orig_delete(backend, endpoint_name)
                if endpoint is not None:
                    self._tracked.pop(id(endpoint), None)

        def list_endpoints(backend: Any, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                for name in list(backend.endpoints):
                    self._advance_named(backend, name)
                return orig_list(backend, *args, **kwargs)

        def update_endpoint(
            backend: Any,
            endpoint_name: str,
            endpoint_config_name: str,
            deployment_config: dict[str, Any] | None = None,
            retain: Retention | None = None,
        ) -> Any:
            with self._lock:
                return self._update(
                    backend, endpoint_name, endpoint_config_name, deployment_config, retain
                )

        self._patch(backend_cls, "describe_endpoint", describe_endpoint)
        self._patch(backend_cls, "delete_endpoint", delete_endpoint)
        self._patch(backend_cls, "list_endpoints", list_endpoints)
        self._patch(backend_cls, "update_endpoint", update_endpoint)
        self._patch(SageMakerResponse, "update_endpoint", _response_update_endpoint)

    def _patch_runtime(self) -> None:
        """InvokeEndpoint and InvokeEndpointWithResponseStream answered by the emulator."""
        from moto.sagemaker import urls as sm_urls
        from moto.sagemakerruntime import urls as rt_urls
        from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

        def response_invoke_endpoint(response: Any) -> Any:
            name = response._get_param("EndpointName") or _name_from_path(response.path)
            status, headers, body = self._invoke(
                response.current_account, response.region, name, response.body
            )
            headers["status"] = status
            return status, headers, body

        self._patch(SageMakerRuntimeResponse, "invoke_endpoint", response_invoke_endpoint)
        # In-process requests reach the runtime backend by host name; a moto *server*
        # routes every SigV4 "sagemaker" request whose path does not end in
        # "invocations" to the control-plane app, so the stream route goes in both.
        self._patch(rt_urls.url_paths, STREAM_PATH, _stream_handler)
        self._patch(sm_urls.url_paths, STREAM_PATH, _stream_handler)
        install_inference_experiments(self)
        install_training_jobs(self)
        from moto.cloudwatch import urls as cw_urls

        self._patch(cw_urls.url_paths, QUERY_PATH, query_handler(lambda: _active().detailed))

    # --- lifecycle --------------------------------------------------------------------
    def _schedule(self, endpoint: Any, delay_s: float, then: Callable[[], None]) -> None:
        tracked = self._tracked.setdefault(id(endpoint), _Tracked(endpoint))
        tracked.phase = _Phase(self.clock() + max(0.0, delay_s), then)

    def _advance_named(self, backend: Any, endpoint_name: str) -> None:
        endpoint = backend.endpoints.get(endpoint_name)
        if endpoint is not None:
            self._advance(endpoint)

    def _advance(self, endpoint: Any) -> None:
        tracked = self._tracked.get(id(endpoint))
        while tracked is not None and tracked.phase is not None:
            phase = tracked.phase
            if self.clock() < phase.until:
                return
            tracked.phase = None
            phase.then()
            self.history.append(
                Transition(
                    tracked.endpoint.endpoint_name, tracked.endpoint.endpoint_status, phase.until
                )
            )

    def _start_create(self, backend: Any, endpoint: Any) -> None:
        from moto.core.utils import utcnow

        script = self.script_for(endpoint.endpoint_name)
        endpoint.endpoint_status = "Creating"

        def done() -> None:
            endpoint.last_modified_time = utcnow()
            if script.fail_reason:
                endpoint.endpoint_status = "Failed"
                endpoint.failure_reason = script.fail_reason
            else:
                endpoint.endpoint_status = "InService"
            if script.log_lines:
                self._write_logs(backend, endpoint.endpoint_name, script.log_lines)

        self._schedule(endpoint, script.creating_s, done)

    def _update(
        self,
        backend: Any,
        endpoint_name: str,
        endpoint_config_name: str,
        deployment_config: dict[str, Any] | None,
        retain: Retention | None = None,
    ) -> Any:
        """UpdateEndpoint as scripted; `retain` (RetainAllVariantProperties) keeps the
        instance counts and weights of the variants the new config names too."""
        from moto.core.utils import utcnow
        from moto.sagemaker.exceptions import ValidationError
        from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig

        endpoint = backend.endpoints.get(endpoint_name)
        if endpoint is None:
            arn = FakeEndpoint.arn_formatter(endpoint_name, backend.account_id, backend.region_name)
            raise ValidationError(message=f"Could not find endpoint '{arn}'.")
        self._advance(endpoint)
        if endpoint.endpoint_status != "InService":
            raise ValidationError(
                message=(
                    f'Cannot update endpoint "{endpoint.arn}" with status '
                    f"{endpoint.endpoint_status}: only InService endpoints can be updated."
                )
            )
        new_config = backend.endpoint_configs.get(endpoint_config_name)
        if new_config is None:
            arn = FakeEndpointConfig.arn_formatter(
                endpoint_config_name, backend.account_id, backend.region_name
            )
            raise ValidationError(message=f"Could not find endpoint configuration '{arn}'.")
        serving = backend.endpoint_configs.get(endpoint.endpoint_config_name)
        refused = type_change_refused(
            backend.account_id,
            backend.region_name,
            endpoint_name,
            serving.production_variants if serving else None,
            new_config.production_variants,
        )
        if refused:
            raise ValidationError(message=refused)
        script = self.script_for(endpoint_name)
        endpoint.endpoint_status = "Updating"
        endpoint.failure_reason = None
        endpoint.last_modified_time = utcnow()
        endpoint.pending_deployment_summary = {
            "EndpointConfigName": endpoint_config_name,
            "StartTime": utcnow(),
        }
        if deployment_config:
            endpoint.last_deployment_config = deployment_config

        def rolled_back() -> None:
            endpoint.endpoint_status = "InService"
            endpoint.failure_reason = script.rollback_reason
            endpoint.last_modified_time = utcnow()

        def done() -> None:
            endpoint.pending_deployment_summary = None
            endpoint.last_modified_time = utcnow()
            if script.log_lines:
                self._write_logs(backend, endpoint_name, script.log_lines)
            if script.rollback_on_update:
                endpoint.endpoint_status = "RollingBack"
                self._schedule(endpoint, script.rolling_back_s, rolled_back)
                return
            endpoint.endpoint_config_name = endpoint_config_name
            before = endpoint.production_variants
            endpoint.production_variants = endpoint._process_production_variants(
                new_config.production_variants
            )
            if retain is not None:
                retain.apply(before, endpoint.production_variants)
            _set_shadow_variants(endpoint, new_config)
            endpoint.endpoint_status = "InService"

        self._schedule(endpoint, script.updating_s, done)
        return endpoint

    # --- logs -------------------------------------------------------------------------
    def _write_logs(self, backend: Any, endpoint_name: str, lines: Iterable[str]) -> None:
        write_endpoint_logs(backend.account_id, backend.region_name, endpoint_name, lines)

    # --- runtime ----------------------------------------------------------------------
    def _lookup_serving(
        self, account_id: str, region: str, endpoint_name: str
    ) -> tuple[int, str, str] | None:
        """None when the endpoint can serve, else (status, error code, message)."""
        from moto.sagemaker.models import sagemaker_backends

        backend = sagemaker_backends[account_id][region]
        with self._lock:
            endpoint = backend.endpoints.get(endpoint_name)
            if endpoint is None:
                return (
                    400,
                    "ValidationError",
                    f"Endpoint {endpoint_name} of account {account_id} not found.",
                )
            self._advance(endpoint)
            status = endpoint.endpoint_status
        # An endpoint being updated or rolled back still serves from its current fleet.
        if status not in ("InService", "Updating", "RollingBack", "SystemUpdating"):
            return (
                400,
                "ValidationError",
                f"Endpoint {endpoint_name} of account {account_id} is not in service "
                f"(status {status}).",
            )
        return None

    def _invoke(
        self, account_id: str, region: str, endpoint_name: str, body: Any
    ) -> tuple[int, dict[str, Any], str]:
        problem = self._lookup_serving(account_id, region, endpoint_name)
        if problem is not None:
            return _error(*problem)
        try:
            request = ChatRequest.parse(body if body is not None else b"")
        except ChatRequestError as exc:
            return _model_error(account_id, region, endpoint_name, str(exc))
        started = self.clock()
        sent = self._dispatch(account_id, region, endpoint_name, request, streamed=False)
        if not sent.ok:
            return _model_error(
                account_id, region, endpoint_name, _VARIANT_FAILURE, original_status=500
            )
        doc = chat_completion(request, sent.settings.default_max_tokens)
        with self._lock:
            self.invocations += 1
        if not sent.reported:
            self._after_invocation(
                account_id,
                region,
                endpoint_name,
                generate(request, sent.settings.default_max_tokens)[0],
                self.clock() - started,
            )
        headers = {
            "Content-Type": "application/json",
            "x-Amzn-Invoked-Production-Variant": sent.variant,
        }
        return 200, headers, json.dumps(doc, ensure_ascii=False)

    def _stream(
        self, account_id: str, region: str, endpoint_name: str, body: Any
    ) -> tuple[int, dict[str, Any], Iterator[bytes] | str]:
        problem = self._lookup_serving(account_id, region, endpoint_name)
        if problem is not None:
            return _error(*problem)
        try:
            request = ChatRequest.parse(body if body is not None else b"")
        except ChatRequestError as exc:
            return _model_error(account_id, region, endpoint_name, str(exc))
        sent = self._dispatch(account_id, region, endpoint_name, request, streamed=True)
        if not sent.ok:
            return _model_error(
                account_id, region, endpoint_name, _VARIANT_FAILURE, original_status=500
            )
        settings = replace(sent.settings, fail_after_tokens=1) if sent.broken else sent.settings
        with self._lock:
            self.invocations += 1
        started = self.clock()

        def done(completion_tokens: int) -> None:
            if not sent.reported:
                answer = generate(request, settings.default_max_tokens)[0][:completion_tokens]
                self._after_invocation(
                    account_id, region, endpoint_name, answer, self.clock() - started
                )

        def frames() -> Iterator[bytes]:
            for event in sse_events(request, settings, on_done=done):
                if settings.split == "event":
                    yield payload_part(event)
                else:
                    yield b"".join(payload_part(piece) for piece in split_awkwardly(event))
            limit = settings.fail_after_tokens
            if limit is not None and len(generate(request, settings.default_max_tokens)[0]) > limit:
                yield model_stream_error(
                    "Model stream broke off: the container closed the connection "
                    "(emulated failure).",
                    "StreamBroken",
                )

        headers = {
            "Content-Type": "application/vnd.amazon.eventstream",
            "X-Amzn-SageMaker-Content-Type": "text/event-stream",
            "x-Amzn-Invoked-Production-Variant": sent.variant,
        }
        return 200, headers, frames()

    def _dispatch(
        self,
        account_id: str,
        region: str,
        endpoint_name: str,
        request: ChatRequest,
        *,
        streamed: bool,
    ) -> _Sent:
        """Route one request over the endpoint's variants and report what each handled.

        The production variant that answers paces the stream by its `VariantBehaviour`;
        shadow copies are served and reported, their answers dropped.
        """
        from moto.sagemaker.models import sagemaker_backends

        settings = self.stream_settings(endpoint_name)
        where = EndpointRef(account_id, region, endpoint_name)
        tokens = len(generate(request, settings.default_max_tokens)[0])
        difficulty = random.Random(request.seed).gauss(0.0, 1.0)  # the prompt's, shared
        with self._lock:
            backend = sagemaker_backends[account_id][region]
            endpoint = backend.endpoints.get(endpoint_name)
            chosen: Route | None = None
            if endpoint is not None:
                sampling = self.inference_experiments.sampling(
                    self, account_id, region, endpoint_name
                )
                images = variant_images(backend, endpoint)
                chosen = route(endpoint, self._rng, sampling=sampling, images=images)
            if chosen is None:
                return _Sent(DEFAULT_VARIANT, settings, ok=True, reported=False)
            behaviours = {
                v.name: self._behaviour(backend, endpoint, v.name)
                for v in (chosen.production, *chosen.shadows)
            }
            behaviour = behaviours[chosen.production.name]
            served = None
            for variant in (chosen.production, *chosen.shadows):
                result = serve_and_report(
                    where,
                    variant,
                    behaviours[variant.name],
                    self._rng,
                    output_tokens=tokens,
                    difficulty=difficulty,
                    at=self.wall(),
                    streamed=streamed,
                    detailed=self.detailed,
                )
                served = result if variant is chosen.production else served
        if behaviour is not None:
            settings = replace(
                settings,
                ttft_s=behaviour.ttft_s,
                token_delay_s=behaviour.step_s / behaviour.tokens_per_step,
                tokens_per_chunk=max(1, round(behaviour.tokens_per_step)),
            )
        broken = served is not None and served.broken
        return _Sent(
            chosen.production.name,
            settings,
            ok=served is None or (served.ok and (streamed or not broken)),
            reported=behaviour is not None,
            broken=broken and streamed,
        )

    def _behaviour(self, backend: Any, endpoint: Any, variant: str) -> VariantBehaviour | None:
        found = self._variants.get((endpoint.endpoint_name, variant))
        if found is None and self.variants_from_models:
            where = (backend.account_id, backend.region_name, endpoint.endpoint_name)
            if endpoint_drafter(*where) is not None:
                return None  # it reports what its trained drafter accepts, per answer
            found = behaviour_from_model(backend, endpoint, variant)
        return found

    def _after_invocation(
        self,
        account_id: str,
        region: str,
        endpoint_name: str,
        answer: list[str],
        elapsed_s: float,
    ) -> None:
        """The container's metric line for one answer: the figures set for the endpoint,
        else what the emulator's trained drafter it serves accepts on this answer, else
        the default figures."""
        completion_tokens = len(answer)
        with self._lock:
            metrics = self._metrics.get(endpoint_name)
            if metrics is None:
                metrics = _drafted(account_id, region, endpoint_name, answer)
            if metrics is None:
                metrics = self._metrics.get("")
        if metrics is None or completion_tokens <= 0:
            return
        from peagle_serve.contract import METRIC_DIMENSION, format_metric_line

        k = metrics.num_speculative_tokens
        mean_len = 1.0 + metrics.acceptance_rate * k
        drafts = completion_tokens / mean_len
        elapsed = max(elapsed_s, 1e-3)
        values = {
            "acceptance_rate": metrics.acceptance_rate,
            "mean_acceptance_length": mean_len,
            "draft_tokens_per_s": drafts * k / elapsed,
            "accepted_tokens_per_s": drafts * k * metrics.acceptance_rate / elapsed,
        }
        line = format_metric_line(
            values,
            per_position_acceptance=metrics.per_position_rates(),
            timestamp_ms=int(time.time() * 1000),
            dimensions={METRIC_DIMENSION: endpoint_name},  # as peagle-serve writes it
        )
        write_endpoint_logs(account_id, region, endpoint_name, [line])


_VARIANT_FAILURE = "the model container failed (emulated variant error rate)"


def _drafted(
    account_id: str, region: str, endpoint_name: str, answer: list[str]
) -> AcceptanceMetrics | None:
    """What the emulator's drafter (trained by an emulated job) the endpoint serves
    accepts when it drafts for `answer`; None when it serves another drafter."""
    from peagle_local.emulator.chat import token_ids

    served = endpoint_drafter(account_id, region, endpoint_name)
    if served is None or len(answer) < 2:
        return None
    drafter, k = served
    counts = speculate(drafter, [token_ids(answer)], k)
    return AcceptanceMetrics(counts.acceptance_rate, k, counts.per_position)


@dataclass(frozen=True)
class _Sent:
    """How one request was dispatched: the answering variant and its stream pacing."""

    variant: str
    settings: StreamSettings
    ok: bool
    reported: bool
    """Whether the variants wrote their own metric lines (else the endpoint's SpecMetrics do)."""
    broken: bool = False
    """A streamed answer the engine fails after its first token."""


def _response_update_endpoint(response: Any) -> Any:
    """SageMakerResponse.update_endpoint, passing DeploymentConfig and the retention of
    variant properties on (moto drops both)."""
    from moto.core.responses import ActionResult

    endpoint = response.sagemaker_backend.update_endpoint(
        endpoint_name=response._get_param("EndpointName"),
        endpoint_config_name=response._get_param("EndpointConfigName"),
        deployment_config=response._get_param("DeploymentConfig"),
        retain=Retention.of(
            response._get_param("RetainAllVariantProperties"),
            response._get_param("ExcludeRetainedVariantProperties"),
        ),
    )
    return ActionResult({"EndpointArn": endpoint.arn})


def _set_shadow_variants(endpoint: Any, config: Any) -> None:
    """Give a moto endpoint its config's shadow variants (DescribeEndpoint shows them)."""
    shadows = getattr(config, "shadow_production_variants", None) if config else None
    endpoint.shadow_production_variants = (
        endpoint._process_production_variants(shadows) if shadows else None
    )


def _check_shadow_config(
    backend: Any, production: list[dict[str, Any]], shadows: list[dict[str, Any]]
) -> None:
    """SageMaker's rule (botocore's CreateEndpointConfig doc): with a shadow variant, one
    production variant and one shadow variant; and the shadow's model must exist."""
    from moto.sagemaker.exceptions import ValidationError

    if len(production) != 1 or len(shadows) != 1:
        raise ValidationError(
            message=(
                "With ShadowProductionVariants, the endpoint config can have only one "
                "production variant and one shadow variant."
            )
        )
    for shadow in shadows:
        if "InstanceType" in shadow:
            _validate_instance_type(None, shadow["InstanceType"])
    backend.validate_production_variants(shadows)


def _validate_instance_type(self: Any, instance_type: str) -> None:
    """Accept every instance type botocore's SageMaker model knows (g6e, g7e, p5, p6...)."""
    from moto.sagemaker.exceptions import ValidationError

    allowed = known_instance_types()
    if instance_type not in allowed:
        raise ValidationError(
            message=(
                f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
                f"Member must satisfy enum value set: {sorted(allowed)}"
            )
        )


@functools.cache
def known_instance_types() -> frozenset[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.shape_for("ProductionVariantInstanceType")
    return frozenset(shape.enum)  # type: ignore[attr-defined]


def _already_exists(backend: Any, arn_kind: str, label: str, name: str) -> None:
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.utils import arn_formatter

    arn = arn_formatter(arn_kind, name, backend.account_id, backend.region_name)
    raise ValidationError(message=f'Cannot create already existing {label} "{arn}".')


def _keep_network_isolation(response_cls: Any) -> Callable[[Any], Any]:
    """SageMakerResponse.create_model that keeps EnableNetworkIsolation (moto drops it and
    DescribeModel says false), which an adopting deploy compares."""
    original = response_cls.create_model

    def create_model(response: Any) -> Any:
        result = original(response)
        model = response.sagemaker_backend._models[response._get_param("ModelName")]
        model.enable_network_isolation = bool(response._get_param("EnableNetworkIsolation"))
        return result

    return create_model


def _name_from_path(path: str) -> str:
    parts = path.split("/")
    return unquote(parts[2]) if len(parts) > 2 else ""


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, Any], str]:
    headers = {"x-amzn-ErrorType": code, "Content-Type": "application/json"}
    return status, headers, json.dumps({"__type": code, "message": message})


def _model_error(
    account_id: str,
    region: str,
    endpoint_name: str,
    message: str,
    *,
    original_status: int = 400,
) -> tuple[int, dict[str, Any], str]:
    """What SageMaker returns when the container answers 4xx or 5xx: ModelError (HTTP 424)."""
    kind = "client" if original_status < 500 else "server"
    body = {
        "__type": "ModelError",
        "Message": (
            f"Received {kind} error ({original_status}) from primary with message "
            f'"{message}". See the endpoint\'s CloudWatch logs.'
        ),
        "OriginalStatusCode": original_status,
        "OriginalMessage": message,
        "LogStreamArn": (
            f"arn:aws:logs:{region}:{account_id}:log-group:{log_group_name(endpoint_name)}"
        ),
    }
    return (
        424,
        {"x-amzn-ErrorType": "ModelError", "Content-Type": "application/json"},
        json.dumps(body),
    )


def _stream_handler(request: Any, full_url: str, headers: Any) -> Any:
    """moto URL handler for InvokeEndpointWithResponseStream (in-process and server)."""
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    helper = SageMakerRuntimeResponse()
    helper.setup_class(request, full_url, headers)
    name = _name_from_path(helper.parsed_url.path)
    status, out_headers, body = _active()._stream(
        helper.get_current_account(), helper.region, name, helper.body
    )
    if isinstance(body, str) or request.from_wsgi_server:
        return status, out_headers, body
    # In-process moto hands botocore one byte buffer: the pacing still happens (the
    # generator sleeps), but arrives at once.
    return status, out_headers, b"".join(body)
