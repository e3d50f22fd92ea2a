"""SageMaker's InferenceExperiment (shadow tests), which moto lacks: a stand-in.

Create / Describe / Update / Stop / Delete / List / Start, as the emulator plays them
(docs/platform-facts.md, "InferenceExperiment", for the sources):

- Create (type ShadowMode) checks the endpoint, the models, the variants named in
  `ShadowModeConfig` and the role, and answers `ResourceInUse` for a name in use. The
  experiment is Created, and starts at `Schedule.StartTime` (now when absent; it ends
  7 days later unless `Schedule.EndTime` says otherwise, at most 30 days).
- Starting: an endpoint config with the production variant and the shadow variant (from
  `ModelVariants`) is created and the endpoint updated onto it (the emulator's scripted
  update); Running once the endpoint serves it. The shadow variant gets a copy of
  `SamplingPercentage` percent of the requests (`sampling`, read by the router).
- Stop (or the scheduled end): Stopping while the endpoint is updated onto what the
  actions leave (`Retain` / `Remove` / `Promote`): the production variant retained and
  the shadow removed is the endpoint's config from before the experiment, which it
  reverts to; then Completed (or the `DesiredState`), with `Reason` as StatusReason, and
  the configs the experiment made are deleted unless the endpoint serves one.
- Update: a later end, or another sampling percentage; Delete only once it stopped.

State advances when the experiment or its endpoint's traffic is read (no thread), from
the extension's wall clock (the schedule) and its scripted endpoint updates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peagle_local.emulator.moto_ext import MotoExtensions

DEFAULT_DURATION = timedelta(days=7)
MAX_DURATION = timedelta(days=30)
ACTIVE = frozenset({"Creating", "Created", "Updating", "Starting", "Running", "Stopping"})


@dataclass
class Experiment:
    """One inference experiment and where it stands."""

    name: str
    arn: str
    account_id: str
    region: str
    request: dict[str, Any]
    start: datetime
    end: datetime
    status: str = "Created"
    status_reason: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))
    completed: datetime | None = None
    original_config: str = ""
    config: str | None = None
    target_config: str | None = None
    desired_state: str = "Completed"

    @property
    def endpoint(self) -> str:
        return str(self.request["EndpointName"])

    @property
    def source_variant(self) -> str:
        return str(self.request["ShadowModeConfig"]["SourceModelVariantName"])

    @property
    def shadow(self) -> dict[str, Any]:
        return dict(self.request["ShadowModeConfig"]["ShadowModelVariants"][0])

    def variant(self, name: str) -> dict[str, Any]:
        return next(v for v in self.request["ModelVariants"] if v["VariantName"] == name)


def _production_variant(variant: dict[str, Any], weight: float = 1.0) -> dict[str, Any]:
    infra = variant["InfrastructureConfig"]["RealTimeInferenceConfig"]
    return {
        "VariantName": variant["VariantName"],
        "ModelName": variant["ModelName"],
        "InstanceType": infra["InstanceType"],
        "InitialInstanceCount": infra["InstanceCount"],
        "InitialVariantWeight": weight,
    }


def _errors() -> Any:
    from moto.sagemaker import exceptions

    return exceptions


@dataclass
class InferenceExperiments:
    """The emulated account's inference experiments (every account and region)."""

    experiments: dict[tuple[str, str, str], Experiment] = field(default_factory=dict)

    def reset(self) -> None:
        """Forget every experiment (with moto's reset: the endpoints they ran on are gone,
        and a later test on the same endpoint name must not meet them)."""
        self.experiments.clear()

    # --- reads of the router ----------------------------------------------------------
    def sampling(
        self, ext: MotoExtensions, account: str, region: str, endpoint: str
    ) -> dict[str, int]:
        """shadow variant -> SamplingPercentage of the experiment running on `endpoint`."""
        for e in list(self.experiments.values()):
            if (e.account_id, e.region, e.endpoint) == (account, region, endpoint):
                self.advance(ext, e)
                if e.status in ("Running", "Starting", "Stopping"):
                    shadow = e.shadow
                    return {shadow["ShadowModelVariantName"]: int(shadow["SamplingPercentage"])}
        return {}

    # --- lifecycle --------------------------------------------------------------------
    def advance(self, ext: MotoExtensions, e: Experiment) -> None:
        """Move `e` on as far as its schedule and its endpoint allow."""
        backend = _backend(e)
        endpoint = backend.endpoints.get(e.endpoint)
        if endpoint is not None:
            ext._advance(endpoint)
        now = datetime.fromtimestamp(ext.wall(), UTC)
        if e.status == "Created" and now >= e.start:
            self._begin(ext, e, endpoint)
        if e.status == "Starting" and endpoint is not None:
            if endpoint.endpoint_status == "InService":
                if endpoint.endpoint_config_name == e.config:
                    self._set(e, "Running")
                else:  # the update rolled back
                    self._set(e, "Cancelled", endpoint.failure_reason or "the update failed")
            elif endpoint.endpoint_status == "Failed":
                self._set(e, "Cancelled", endpoint.failure_reason or "the endpoint failed")
        if e.status == "Running" and now >= e.end:
            shadow = e.shadow["ShadowModelVariantName"]
            actions = {e.source_variant: "Retain", shadow: "Remove"}
            self._stop(ext, e, actions, "Completed", "the scheduled end")
        if e.status == "Stopping":
            self._settle_stop(ext, e, endpoint)
        if endpoint is None and e.status in ACTIVE:
            self._set(e, "Cancelled", f"endpoint {e.endpoint} was deleted")

    def _settle_stop(self, ext: MotoExtensions, e: Experiment, endpoint: Any) -> None:
        """Stopping ends once the endpoint serves the target config (updated onto it as
        soon as it is InService)."""
        if endpoint is None or not e.target_config:
            self._finish(e)
            return
        ext._advance(endpoint)
        if endpoint.endpoint_status != "InService":
            return
        if endpoint.endpoint_config_name == e.target_config:
            self._finish(e)
        else:
            ext._update(_backend(e), e.endpoint, e.target_config, None)

    def _finish(self, e: Experiment) -> None:
        """Stopped; the configs the experiment made are gone unless the endpoint serves one
        (the docs: no resources to clean up after a test)."""
        self._set(e, e.desired_state, e.status_reason)
        e.completed = datetime.now(UTC)
        backend = _backend(e)
        endpoint = backend.endpoints.get(e.endpoint)
        serving = endpoint.endpoint_config_name if endpoint is not None else None
        for name in {e.config, e.target_config} - {serving, e.original_config, None, ""}:
            backend.endpoint_configs.pop(name, None)

    def _set(self, e: Experiment, status: str, reason: str | None = None) -> None:
        e.status = status
        e.status_reason = reason
        e.modified = datetime.now(UTC)

    def _begin(self, ext: MotoExtensions, e: Experiment, endpoint: Any) -> None:
        """Starting: the two-variant config, and the endpoint updated onto it."""
        if endpoint is None or endpoint.endpoint_status != "InService":
            status = endpoint.endpoint_status if endpoint is not None else "absent"
            self._set(e, "Cancelled", f"endpoint {e.endpoint} is {status}, not InService")
            return
        backend = _backend(e)
        e.original_config = endpoint.endpoint_config_name
        shadow = e.variant(e.shadow["ShadowModelVariantName"])
        e.config = self._config(
            backend,
            e,
            [_production_variant(e.variant(e.source_variant))],
            [_production_variant(shadow)],
        )
        self._set(e, "Starting")
        ext._update(backend, e.endpoint, e.config, None)

    def _config(
        self,
        backend: Any,
        e: Experiment,
        production: list[dict[str, Any]],
        shadows: list[dict[str, Any]],
    ) -> str:
        digest = hashlib.sha256(repr((e.name, production, shadows)).encode()).hexdigest()[:16]
        name = f"ie-{digest}"
        if name not in backend.endpoint_configs:
            config = backend.create_endpoint_config(
                endpoint_config_name=name,
                production_variants=production,
                data_capture_config=None,
                async_inference_config=None,
                tags=[],
                kms_key_id=e.request.get("KmsKey"),
            )
            config.shadow_production_variants = shadows or None
        return name

    def _stop(
        self,
        ext: MotoExtensions,
        e: Experiment,
        actions: dict[str, str],
        state: str,
        reason: str | None,
    ) -> None:
        """Stopping: the endpoint updated onto what the actions leave."""
        backend = _backend(e)
        source, shadow = e.source_variant, e.shadow["ShadowModelVariantName"]
        keep = actions.get(source, "Retain") == "Retain"
        fate = actions.get(shadow, "Remove")
        e.desired_state, e.status_reason = state, reason
        if e.status != "Running" or (keep and fate == "Remove"):
            target = e.original_config  # what the endpoint served before
        else:
            production = [_production_variant(e.variant(source))] if keep else []
            if fate == "Promote":
                production.append(_production_variant(e.variant(shadow)))
            shadows = [_production_variant(e.variant(shadow))] if fate == "Retain" else []
            target = self._config(backend, e, production, shadows)
        e.target_config = target
        self._set(e, "Stopping", reason)
        self._settle_stop(ext, e, backend.endpoints.get(e.endpoint))

    # --- the API ----------------------------------------------------------------------
    def create(
        self, ext: MotoExtensions, account: str, region: str, request: dict[str, Any]
    ) -> Experiment:
        errors = _errors()
        name = str(request["Name"])
        if (account, region, name) in self.experiments:
            raise errors.ResourceInUseException(f"Inference experiment {name} already exists.")
        _check(account, region, request)
        schedule = request.get("Schedule") or {}
        now = datetime.fromtimestamp(ext.wall(), UTC)
        start = _aware(schedule.get("StartTime")) or now
        end = min(_aware(schedule.get("EndTime")) or start + DEFAULT_DURATION, start + MAX_DURATION)
        arn = f"arn:aws:sagemaker:{region}:{account}:inference-experiment/{name}"
        e = Experiment(name, arn, account, region, dict(request), start, end)
        self.experiments[(account, region, name)] = e
        self.advance(ext, e)
        return e

    def get(self, ext: MotoExtensions, account: str, region: str, name: str) -> Experiment:
        e = self.experiments.get((account, region, name))
        if e is None:
            raise _errors().ResourceNotFound(f"Inference experiment {name} does not exist.")
        self.advance(ext, e)
        return e

    def stop(
        self, ext: MotoExtensions, account: str, region: str, params: dict[str, Any]
    ) -> Experiment:
        e = self.get(ext, account, region, str(params["Name"]))
        if e.status not in ("Created", "Running", "Starting"):
            raise _errors().ConflictException(
                f"Inference experiment {e.name} is {e.status}; it can be stopped when "
                "Created, Starting or Running."
            )
        self._stop(
            ext,
            e,
            dict(params["ModelVariantActions"]),
            params.get("DesiredState") or "Completed",
            params.get("Reason"),
        )
        return e

    def update(
        self, ext: MotoExtensions, account: str, region: str, params: dict[str, Any]
    ) -> Experiment:
        e = self.get(ext, account, region, str(params["Name"]))
        if e.status not in ("Created", "Running"):
            raise _errors().ConflictException(
                f"Inference experiment {e.name} is {e.status}; it can be updated when "
                "Created or Running."
            )
        if params.get("ModelVariants"):
            raise _errors().ValidationError(
                "the emulator does not change an experiment's variants (only its schedule, "
                "description and sampling percentage)"
            )
        schedule = params.get("Schedule") or {}
        if schedule.get("StartTime") is not None:
            if e.status != "Created":
                raise _errors().ValidationError("a running experiment may change only its end time")
            e.start = _aware(schedule["StartTime"]) or e.start
        if schedule.get("EndTime") is not None:
            e.end = min(_aware(schedule["EndTime"]) or e.end, e.start + MAX_DURATION)
        if params.get("ShadowModeConfig"):
            e.request["ShadowModeConfig"] = params["ShadowModeConfig"]
        if params.get("Description") is not None:
            e.request["Description"] = params["Description"]
        e.modified = datetime.now(UTC)
        self.advance(ext, e)
        return e

    def delete(self, ext: MotoExtensions, account: str, region: str, name: str) -> Experiment:
        e = self.get(ext, account, region, name)
        if e.status in ACTIVE:
            raise _errors().ConflictException(
                f"Inference experiment {name} is {e.status}: stop it before deleting it."
            )
        del self.experiments[(account, region, name)]
        return e

    def listed(
        self, ext: MotoExtensions, account: str, region: str, params: dict[str, Any]
    ) -> list[Experiment]:
        found = []
        for (a, r, _), e in sorted(self.experiments.items()):
            if (a, r) != (account, region):
                continue
            self.advance(ext, e)
            if params.get("NameContains") and params["NameContains"] not in e.name:
                continue
            if params.get("StatusEquals") and e.status != params["StatusEquals"]:
                continue
            found.append(e)
        return found


def _aware(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)


def _backend(e: Experiment) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[e.account_id][e.region]


def _check(account: str, region: str, request: dict[str, Any]) -> None:
    """What SageMaker checks before it accepts an experiment (as the emulator plays it)."""
    from moto.iam.models import iam_backends
    from moto.sagemaker.models import sagemaker_backends

    errors = _errors()
    backend = sagemaker_backends[account][region]
    if request.get("Type") != "ShadowMode":
        raise errors.ValidationError("Type must be ShadowMode")
    if request["EndpointName"] not in backend.endpoints:
        raise errors.ValidationError(f"Could not find endpoint {request['EndpointName']}.")
    names = {v["VariantName"] for v in request["ModelVariants"]}
    for v in request["ModelVariants"]:
        if v["ModelName"] not in backend._models:
            raise errors.ValidationError(f"Could not find model {v['ModelName']}.")
    shadow_config = request["ShadowModeConfig"]
    wanted = {shadow_config["SourceModelVariantName"]} | {
        s["ShadowModelVariantName"] for s in shadow_config["ShadowModelVariants"]
    }
    if not wanted <= names or len(wanted) != 2:
        raise errors.ValidationError(
            "ShadowModeConfig must name one production and one shadow variant of ModelVariants"
        )
    role = str(request["RoleArn"]).rpartition("/")[2]
    try:
        iam_backends[account]["global"].get_role(role)
    except Exception:
        raise errors.ValidationError(
            f"Could not assume role {request['RoleArn']}: no such role in the account."
        ) from None


def describe(e: Experiment) -> dict[str, Any]:
    """DescribeInferenceExperiment's answer."""
    from moto.sagemaker.models import sagemaker_backends

    endpoint = sagemaker_backends[e.account_id][e.region].endpoints.get(e.endpoint)
    metadata: dict[str, Any] = {"EndpointName": e.endpoint}
    if endpoint is not None:
        metadata["EndpointConfigName"] = endpoint.endpoint_config_name
        metadata["EndpointStatus"] = endpoint.endpoint_status
        if endpoint.failure_reason:
            metadata["FailureReason"] = endpoint.failure_reason
    status = (
        "InService"
        if e.status == "Running"
        else "Creating"
        if e.status in ("Created", "Starting")
        else "Deleted"
    )
    out: dict[str, Any] = {
        "Arn": e.arn,
        "Name": e.name,
        "Type": e.request["Type"],
        "Schedule": {"StartTime": e.start, "EndTime": e.end},
        "Status": e.status,
        "CreationTime": e.created,
        "LastModifiedTime": e.modified,
        "RoleArn": e.request["RoleArn"],
        "EndpointMetadata": metadata,
        "ModelVariants": [{**v, "Status": status} for v in e.request["ModelVariants"]],
        "ShadowModeConfig": e.request["ShadowModeConfig"],
    }
    for key, value in (
        ("StatusReason", e.status_reason),
        ("Description", e.request.get("Description")),
        ("CompletionTime", e.completed),
        ("KmsKey", e.request.get("KmsKey")),
        ("DataStorageConfig", e.request.get("DataStorageConfig")),
    ):
        if value is not None:
            out[key] = value
    return out


def summary(e: Experiment) -> dict[str, Any]:
    """One entry of ListInferenceExperiments."""
    full = describe(e)
    keys = (
        "Name",
        "Type",
        "Schedule",
        "Status",
        "StatusReason",
        "Description",
        "CreationTime",
        "CompletionTime",
        "LastModifiedTime",
        "RoleArn",
    )
    return {k: full[k] for k in keys if k in full}


def install(ext: MotoExtensions) -> None:
    """Add the InferenceExperiment actions to moto's SageMaker responses (undone on exit)."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse

    store = ext.inference_experiments

    def arn(e: Experiment) -> Any:
        return ActionResult({"InferenceExperimentArn": e.arn})

    def where(r: Any) -> tuple[str, str]:
        return r.current_account, r.region

    def create(r: Any) -> Any:
        with ext._lock:
            return arn(store.create(ext, *where(r), r._get_params()))

    def describe_(r: Any) -> Any:
        with ext._lock:
            return ActionResult(describe(store.get(ext, *where(r), r._get_param("Name"))))

    def stop(r: Any) -> Any:
        with ext._lock:
            return arn(store.stop(ext, *where(r), r._get_params()))

    def update(r: Any) -> Any:
        with ext._lock:
            return arn(store.update(ext, *where(r), r._get_params()))

    def delete(r: Any) -> Any:
        with ext._lock:
            return arn(store.delete(ext, *where(r), r._get_param("Name")))

    def start(r: Any) -> Any:
        with ext._lock:
            e = store.get(ext, *where(r), r._get_param("Name"))
            e.start = datetime.fromtimestamp(ext.wall(), UTC)
            store.advance(ext, e)
            return arn(e)

    def list_(r: Any) -> Any:
        with ext._lock:
            found = store.listed(ext, *where(r), r._get_params())
            return ActionResult({"InferenceExperiments": [summary(e) for e in found]})

    for action, handler in (
        ("create_inference_experiment", create),
        ("describe_inference_experiment", describe_),
        ("stop_inference_experiment", stop),
        ("update_inference_experiment", update),
        ("delete_inference_experiment", delete),
        ("start_inference_experiment", start),
        ("list_inference_experiments", list_),
    ):
        ext._patch(SageMakerResponse, action, handler)
