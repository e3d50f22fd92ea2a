"""AWS::SageMaker::InferenceExperiment as AWS's published handler plays it, in Python.

A port, decision for decision, of the resource handler's create, update and delete in
aws-cloudformation/aws-cloudformation-resource-providers-sagemaker@a9c8d47
(`aws-sagemaker-inferenceexperiment/src/main/java/software/amazon/sagemaker/
inferenceexperiment/`: CreateHandler, UpdateHandler, DeleteHandler, TranslatorForRequest,
Translator), for the CloudFormation stand-in (`cfn_harness.py`) to play against the
emulator. `model` is the resource's properties as CloudFormation hands them to the
handler (tokens resolved). What the handlers do, in short:

- create: CreateInferenceExperiment with the model's fields (never `DesiredState`), then
  DescribeInferenceExperiment until `Created` or `Running`; `Creating` waits, any other
  status fails the resource ("Stabilizing of ...").
- update, by the status SageMaker reports: `Created` with DesiredState Running starts it,
  else UpdateInferenceExperiment with the model's variants and schedule; `Running` with
  DesiredState Completed or Cancelled stops it (each variant of the experiment named in
  the model's ModelVariants `Retain`, the others `Remove`, or `Promote` for the shadow
  when the source is not named), else UpdateInferenceExperiment of the running fields
  (description, schedule, ShadowModeConfig); `Updating` and `Stopping` wait; a finished
  experiment changes nothing (tags only).
- delete: a `Running` experiment is stopped with `Retain` for the source *and* every
  shadow variant, DesiredState Completed (`updateDefaultModelVariantActionToStopRequest`),
  then deleted; a `Stopping` one is waited for, then deleted; any other is deleted.

Left out: tags on update (TagHelper: the stacks here change no experiment tag), the
ReadHandler's model returned at the end, CloudFormation's retries and timeouts (a poll
budget here). `tests/infra/test_infra_cfn_harness.py` runs this port against the
handler's own unit tests' scripted answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

TYPE_NAME = "AWS::SageMaker::InferenceExperiment"
STOPPED = ("Completed", "Cancelled")


class CfnHandlerError(Exception):
    """A handler failure, as CloudFormation reports it (the resource fails)."""

    code = "GeneralServiceException"


class GeneralServiceError(CfnHandlerError):
    code = "GeneralServiceException"


class InvalidRequestError(CfnHandlerError):
    code = "InvalidRequest"


class NotFoundError(CfnHandlerError):
    code = "NotFound"


class AlreadyExistsError(CfnHandlerError):
    code = "AlreadyExists"


class AccessDeniedError(CfnHandlerError):
    code = "AccessDenied"


class ServiceInternalError(CfnHandlerError):
    code = "ServiceInternalError"


class ServiceLimitExceededError(CfnHandlerError):
    code = "ServiceLimitExceeded"


class ThrottlingError(CfnHandlerError):
    code = "Throttling"


# Translator.throwCfnException: the SageMaker error code -> the handler's failure.
_BY_CODE: dict[str, type[CfnHandlerError]] = {
    "UnauthorizedOperation": AccessDeniedError,
    "InvalidParameter": InvalidRequestError,
    "InvalidParameterValue": InvalidRequestError,
    "ValidationError": InvalidRequestError,
    "InternalError": ServiceInternalError,
    "ServiceUnavailable": ServiceInternalError,
    "ResourceLimitExceeded": ServiceLimitExceededError,
    "ResourceNotFound": NotFoundError,
    "ThrottlingException": ThrottlingError,
}


@dataclass
class Poll:
    """How often a stabilization reads the status before giving up, and what happens
    between two reads (a test moves the emulator's clock there)."""

    budget: int = 100
    between: Callable[[], None] = field(default=lambda: None)


def _identifier(name: str) -> str:
    return json.dumps({"/properties/Name": name}, separators=(",", ":"))


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _message(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Message", ""))


def _translated(e: ClientError) -> CfnHandlerError:
    return _BY_CODE.get(_code(e), GeneralServiceError)(f"Failure reason: {_message(e)}")


def _call(name: str, call: Callable[[], Any]) -> Any:
    """A service call as the handlers make it: not found and other errors translated."""
    try:
        return call()
    except ClientError as e:
        if _code(e) == "ResourceNotFound":
            raise NotFoundError(f"{TYPE_NAME} {name} not found") from None
        raise _translated(e) from None


@dataclass(frozen=True)
class Wait:
    """One stabilization: the statuses that end it, the one that waits, and the message
    of the failure (the handler's text)."""

    done: tuple[str, ...]
    waiting: str
    what: str


CREATED = Wait(("Created", "Running"), "Creating", "Stabilizing of")
STARTED = Wait(("Running",), "Starting", "Stabilizing during start of")
UPDATED = Wait(("Created", "Running"), "Updating", "Stabilizing during update of")
STOPPED_WAIT = Wait(STOPPED, "Stopping", "Stabilizing during stop of")


def _stabilize(sm: Any, name: str, poll: Poll, wait: Wait) -> None:
    """Read the status until it is one of `done`; `waiting` reads again; anything else
    fails the resource with the handler's message."""
    for _ in range(poll.budget):
        status = _call(name, lambda: sm.describe_inference_experiment(Name=name))["Status"]
        if status in wait.done:
            return
        if status != wait.waiting:
            raise GeneralServiceError(f"{wait.what} {_identifier(name)}")
        poll.between()
    raise GeneralServiceError(f"{wait.what} {_identifier(name)}: still {wait.waiting}")


# --- TranslatorForRequest ------------------------------------------------------------
def create_request(model: Mapping[str, Any]) -> dict[str, Any]:
    """translateToCreateRequest: the model's fields, and never DesiredState."""
    keys = (
        "Name",
        "Description",
        "Type",
        "RoleArn",
        "EndpointName",
        "Schedule",
        "KmsKey",
        "DataStorageConfig",
        "ModelVariants",
        "ShadowModeConfig",
        "Tags",
    )
    return {k: model[k] for k in keys if model.get(k) not in (None, [])}


def _present(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def stop_request(model: Mapping[str, Any], described: Mapping[str, Any]) -> dict[str, Any]:
    """translateToStopRequest + updateModelVariantActionToStopRequest: the experiment's
    variants named in the model's ModelVariants are kept, the others removed; a shadow is
    promoted when the source is not kept."""
    wanted = {v["VariantName"] for v in model.get("ModelVariants") or []}
    config = described["ShadowModeConfig"]
    source = config["SourceModelVariantName"]
    actions = {source: "Retain" if source in wanted else "Remove"}
    for shadow in config["ShadowModelVariants"]:
        name = shadow["ShadowModelVariantName"]
        kept = "Retain" if source in wanted else "Promote"
        actions[name] = kept if name in wanted else "Remove"
    return _present(
        Name=model["Name"],
        ModelVariantActions=actions,
        DesiredState=model.get("DesiredState"),
        DesiredModelVariants=model.get("ModelVariants") or None,
        Reason=model.get("StatusReason"),
    )


def default_stop_request(described: Mapping[str, Any]) -> dict[str, Any]:
    """updateDefaultModelVariantActionToStopRequest (the delete's stop): `Retain` for
    the source and for every shadow variant, DesiredState Completed."""
    config = described["ShadowModeConfig"]
    actions = {config["SourceModelVariantName"]: "Retain"}
    for shadow in config["ShadowModelVariants"]:
        actions[shadow["ShadowModelVariantName"]] = "Retain"
    return {"Name": described["Name"], "DesiredState": "Completed", "ModelVariantActions": actions}


# --- the handlers --------------------------------------------------------------------
def create(sm: Any, model: Mapping[str, Any], poll: Poll) -> str:
    """CreateHandler; returns the physical id (the name)."""
    name = str(model["Name"])
    try:
        sm.create_inference_experiment(**create_request(model))
    except ClientError as e:
        if _code(e) == "ResourceInUse":
            raise AlreadyExistsError(f"{TYPE_NAME} {name} already exists") from None
        if "validation error detected" in _message(e):
            raise InvalidRequestError(f"Failure reason: {_message(e)}") from None
        raise _translated(e) from None
    _stabilize(sm, name, poll, CREATED)
    return name


def update(sm: Any, model: Mapping[str, Any], poll: Poll) -> None:
    """UpdateHandler, by the status SageMaker reports."""
    name = str(model["Name"])
    status = _call(name, lambda: sm.describe_inference_experiment(Name=name))["Status"]
    desired = str(model.get("DesiredState") or "").lower()
    if status == "Created" and desired == "running":
        _call(name, lambda: sm.start_inference_experiment(Name=name))
        _stabilize(sm, name, poll, STARTED)
    elif status == "Created":
        _update_experiment(sm, name, poll, _created_update(model))
    elif status == "Running" and desired in ("completed", "cancelled"):
        described = _call(name, lambda: sm.describe_inference_experiment(Name=name))
        request = stop_request(model, described)
        _call(name, lambda: sm.stop_inference_experiment(**request))
        _stabilize(sm, name, poll, STOPPED_WAIT)
    elif status == "Running":
        _update_experiment(sm, name, poll, _running_update(model))
    elif status == "Updating":
        _stabilize(sm, name, poll, UPDATED)
    elif status == "Stopping":
        _stabilize(sm, name, poll, STOPPED_WAIT)
    # Completed or Cancelled: the handler changes tags only


def _created_update(model: Mapping[str, Any]) -> dict[str, Any]:
    """translateToUpdateRequest."""
    return _present(
        Name=model["Name"],
        Description=model.get("Description"),
        Schedule=model.get("Schedule"),
        DataStorageConfig=model.get("DataStorageConfig"),
        ModelVariants=model["ModelVariants"],
        ShadowModeConfig=model.get("ShadowModeConfig"),
    )


def _running_update(model: Mapping[str, Any]) -> dict[str, Any]:
    """translateToUpdateRunningResourceRequest: no variants, no data capture."""
    return _present(
        Name=model["Name"],
        Description=model.get("Description"),
        Schedule=model.get("Schedule"),
        ShadowModeConfig=model.get("ShadowModeConfig"),
    )


def _update_experiment(sm: Any, name: str, poll: Poll, request: dict[str, Any]) -> None:
    _call(name, lambda: sm.update_inference_experiment(**request))
    _stabilize(sm, name, poll, UPDATED)


def delete(sm: Any, model: Mapping[str, Any], poll: Poll) -> None:
    """DeleteHandler: stop a running experiment keeping both variants, then delete."""
    name = str(model["Name"])
    status = _call(name, lambda: sm.describe_inference_experiment(Name=name))["Status"]
    if status == "Running":
        described = _call(name, lambda: sm.describe_inference_experiment(Name=name))
        request = default_stop_request(described)
        _call(name, lambda: sm.stop_inference_experiment(**request))
        _stabilize(sm, name, poll, STOPPED_WAIT)
    elif status == "Stopping":
        _stabilize(sm, name, poll, STOPPED_WAIT)
    _call(name, lambda: sm.delete_inference_experiment(Name=name))
