"""The CloudFormation stand-in is checked against what it stands in for.

- The InferenceExperiment handler's port (cfn_inference_experiment.py) is given the
  scripted answers of the handler's own unit tests (CreateHandlerTest, UpdateHandlerTest,
  DeleteHandlerTest in aws-cloudformation-resource-providers-sagemaker@a9c8d47: each
  `describeInferenceExperiment` answer in order, the last one repeated as Mockito
  repeats it) and must end as each of them does (success, or the same failure and
  message). The stop requests are the ones TranslatorForRequest builds (those tests
  match any request, so the source is the reference).
- The stand-in's update order (cfn_harness.py) is the one CloudFormation documents:
  replacement creates the new resource, updates its dependents, deletes the old one in
  the cleanup pass; removed resources go in the cleanup pass, dependents first; a
  cleanup delete that fails leaves an orphan and the update succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cfn_inference_experiment as handler
import pytest
from botocore.exceptions import ClientError
from cfn_harness import Deployed, HarnessStack, StackFailedError, create_only

NAME = "testInferenceExperimentName"
PROD, SHADOW = "ProdVariant", "ShadowVariant"


def _variant(model: str, variant: str) -> dict[str, Any]:
    return {
        "ModelName": model,
        "VariantName": variant,
        "InfrastructureConfig": {
            "InfrastructureType": "RealTimeInference",
            "RealTimeInferenceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
        },
    }


SHADOW_CONFIG = {
    "SourceModelVariantName": PROD,
    "ShadowModelVariants": [{"ShadowModelVariantName": SHADOW, "SamplingPercentage": 100}],
}


def _model(**changes: Any) -> dict[str, Any]:
    """The tests' getRequestResourceModel (the fields the handlers read)."""
    model = {
        "Name": NAME,
        "Type": "ShadowMode",
        "RoleArn": "sampleRoleArn",
        "Description": "sampleDescription",
        "EndpointName": "testEndpointName",
        "ModelVariants": [_variant("ProdModel", PROD), _variant("ShadowModel", SHADOW)],
        "ShadowModeConfig": SHADOW_CONFIG,
    }
    return {**model, **changes}


def _error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Op")


@dataclass
class Scripted:
    """A SageMaker client answering DescribeInferenceExperiment with `statuses` in order
    (the last repeats), failing the calls named in `fail`, recording every call."""

    statuses: list[str]
    fail: dict[str, ClientError] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def _do(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((op, params))
        if op in self.fail:
            raise self.fail[op]
        return {"InferenceExperimentArn": "testInferenceExperimentArn"}

    def describe_inference_experiment(self, **params: Any) -> dict[str, Any]:
        self._do("describe", params)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {"Name": NAME, "Status": status, "ShadowModeConfig": SHADOW_CONFIG}

    def create_inference_experiment(self, **params: Any) -> dict[str, Any]:
        return self._do("create", params)

    def start_inference_experiment(self, **params: Any) -> dict[str, Any]:
        return self._do("start", params)

    def stop_inference_experiment(self, **params: Any) -> dict[str, Any]:
        return self._do("stop", params)

    def update_inference_experiment(self, **params: Any) -> dict[str, Any]:
        return self._do("update", params)

    def delete_inference_experiment(self, **params: Any) -> dict[str, Any]:
        return self._do("delete", params)

    def ops(self) -> list[str]:
        return [op for op, _ in self.calls if op != "describe"]

    def sent(self, op: str) -> dict[str, Any]:
        (params,) = [p for o, p in self.calls if o == op]
        return params


POLL = handler.Poll(budget=10)
IDENTIFIER = '{"/properties/Name":"testInferenceExperimentName"}'


# --- CreateHandlerTest ---------------------------------------------------------------
@pytest.mark.parametrize(
    "statuses",
    [["Created"], ["Creating", "Running"]],
    ids=["testCreateHandler_SimpleSuccess", "testCreateHandler_VerifyStabilization_Successful"],
)
def test_create_succeeds_on_created_or_running(statuses: list[str]) -> None:
    sm = Scripted(statuses)
    assert handler.create(sm, _model(DesiredState="Completed"), POLL) == NAME
    assert sm.ops() == ["create"]
    assert "DesiredState" not in sm.sent("create")  # create never sends it


def test_create_handler_verify_stabilization_failed() -> None:
    with pytest.raises(handler.GeneralServiceError) as failed:
        handler.create(Scripted(["Creating", "Cancelled"]), _model(), POLL)
    assert str(failed.value) == f"Stabilizing of {IDENTIFIER}"


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (_error("ResourceInUse", "test error message"), handler.AlreadyExistsError, None),
        (
            _error("ValidationException", "1 validation error detected: Value null at 'Name'"),
            handler.InvalidRequestError,
            "Failure reason: 1 validation error detected: Value null at 'Name'",
        ),
        (
            _error("InternalFailure", "test error message"),
            handler.GeneralServiceError,
            "Failure reason: test error message",
        ),
    ],
    ids=[
        "testCreateHandler_ResourceInUseException",
        "testCreateHandler_ValidationFailure",
        "testCreateHandler_ServiceInternalException",
    ],
)
def test_create_translates_sagemakers_errors(
    error: ClientError, kind: type[Exception], message: str | None
) -> None:
    with pytest.raises(kind) as failed:
        handler.create(Scripted(["Created"], fail={"create": error}), _model(), POLL)
    if message is not None:
        assert str(failed.value) == message


# --- UpdateHandlerTest ---------------------------------------------------------------
def test_update_handler_update_resource_success() -> None:
    """Running, no DesiredState: the running fields only (no variants)."""
    sm = Scripted(["Running", "Updating", "Running"])
    handler.update(sm, _model(), POLL)
    assert sm.ops() == ["update"]
    assert set(sm.sent("update")) == {"Name", "Description", "ShadowModeConfig"}


def test_update_handler_start_resource_success() -> None:
    sm = Scripted(["Created", "Starting", "Running"])
    handler.update(sm, _model(DesiredState="Running"), POLL)
    assert sm.ops() == ["start"]


@pytest.mark.parametrize(
    ("variants", "actions"),
    [
        ([(PROD, "ProdModel"), (SHADOW, "ShadowModel")], {PROD: "Retain", SHADOW: "Retain"}),
        ([(SHADOW, "ShadowModel")], {PROD: "Remove", SHADOW: "Promote"}),
        ([(PROD, "ProdModel")], {PROD: "Retain", SHADOW: "Remove"}),
    ],
    ids=[
        "testUpdateHandler_StopResource_Success",
        "testUpdateHandler_StopResource_PromoteShadow_Success",
        "testUpdateHandler_StopResource_RemoveShadow_Success",
    ],
)
def test_update_stops_a_running_experiment_keeping_the_variants_it_names(
    variants: list[tuple[str, str]], actions: dict[str, str]
) -> None:
    sm = Scripted(["Running", "Running", "Stopping", "Completed"])
    model = _model(
        DesiredState="Completed",
        StatusReason="done",
        ModelVariants=[_variant(m, v) for v, m in variants],
    )
    handler.update(sm, model, POLL)
    assert sm.ops() == ["stop"]
    sent = sm.sent("stop")
    assert sent["ModelVariantActions"] == actions
    assert (sent["DesiredState"], sent["Reason"]) == ("Completed", "done")
    assert sent["DesiredModelVariants"] == model["ModelVariants"]


@pytest.mark.parametrize(
    ("statuses", "desired", "message"),
    [
        (["Running", "Updating", "Cancelled"], None, "Stabilizing during update of"),
        (["Created", "Starting", "Cancelled"], "Running", "Stabilizing during start of"),
        (["Running", "Running", "Stopping", "Running"], "Completed", "Stabilizing during stop of"),
    ],
    ids=[
        "testUpdateHandler_UpdateResource_VerifyStabilization_Failed",
        "testUpdateHandler_StartResource_VerifyStabilization_Failed",
        "testUpdateHandler_StopResource_VerifyStabilization_Failed",
    ],
)
def test_update_fails_on_an_unexpected_status(
    statuses: list[str], desired: str | None, message: str
) -> None:
    with pytest.raises(handler.GeneralServiceError) as failed:
        handler.update(Scripted(statuses), _model(DesiredState=desired), POLL)
    assert str(failed.value) == f"{message} {IDENTIFIER}"


def test_update_of_a_finished_experiment_changes_nothing() -> None:
    sm = Scripted(["Completed"])
    handler.update(sm, _model(DesiredState="Running"), POLL)
    assert sm.ops() == []


def test_update_handler_read_resource_not_found() -> None:
    sm = Scripted(["Running"], fail={"describe": _error("ResourceNotFound", "gone")})
    with pytest.raises(handler.NotFoundError):
        handler.update(sm, _model(), POLL)


# --- DeleteHandlerTest ---------------------------------------------------------------
def test_delete_handler_simple_success() -> None:
    sm = Scripted(["Completed"])
    handler.delete(sm, _model(), POLL)
    assert sm.ops() == ["delete"]


def test_delete_handler_stop_and_delete_keeps_both_variants() -> None:
    """testDeleteHandler_StopAndDeleteResource_Successful; the stop is
    updateDefaultModelVariantActionToStopRequest's: Retain for source and shadow."""
    sm = Scripted(["Running", "Running", "Stopping", "Completed"])
    handler.delete(sm, _model(DesiredState="Completed"), POLL)
    assert sm.ops() == ["stop", "delete"]
    assert sm.sent("stop") == {
        "Name": NAME,
        "DesiredState": "Completed",
        "ModelVariantActions": {PROD: "Retain", SHADOW: "Retain"},
    }


def test_delete_handler_stop_resource_verify_stabilization_failed() -> None:
    sm = Scripted(["Running", "Running", "Stopping", "Failed"])
    with pytest.raises(handler.GeneralServiceError) as failed:
        handler.delete(sm, _model(DesiredState="Completed"), POLL)
    assert str(failed.value) == f"Stabilizing during stop of {IDENTIFIER}"
    assert sm.ops() == ["stop"]


def test_delete_handler_delete_resource_not_found() -> None:
    sm = Scripted(["Completed"], fail={"delete": _error("ResourceNotFound", "gone")})
    with pytest.raises(handler.NotFoundError):
        handler.delete(sm, _model(), POLL)


def test_the_ports_create_only_fields_are_the_handlers_schema() -> None:
    """cfn-lint's schema (what the stand-in reads) says what the handler's own
    aws-sagemaker-inferenceexperiment.json says."""
    assert create_only(handler.TYPE_NAME) == {"Name", "Type", "RoleArn", "EndpointName", "KmsKey"}


# --- the stand-in's order ------------------------------------------------------------
@dataclass
class Recorder:
    """A player that records what it is asked, by the value of its `Name` property."""

    log: list[str]
    fail_delete: set[str] = field(default_factory=set)

    def create(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        name = str(props.get("EndpointName") or props.get("EndpointConfigName"))
        self.log.append(f"create {name}")
        return name, {"EndpointConfigName": name, "EndpointName": name}

    def update(self, res: Deployed, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        self.log.append(f"update {res.physical_id} -> {props.get('EndpointConfigName')}")
        return res.physical_id, res.attributes

    def delete(self, res: Deployed) -> None:
        if res.physical_id in self.fail_delete:
            raise RuntimeError("in use")
        self.log.append(f"delete {res.physical_id}")


def _template(config: str, *, extra: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "Config": {
            "Type": "AWS::SageMaker::EndpointConfig",
            "Properties": {"EndpointConfigName": config},
        },
        "Endpoint": {
            "Type": "AWS::SageMaker::Endpoint",
            "Properties": {
                "EndpointName": "ep",
                "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            },
        },
    }
    if extra:
        resources["Extra"] = {
            "Type": "AWS::SageMaker::EndpointConfig",
            "Properties": {"EndpointConfigName": "extra"},
            "DependsOn": "Endpoint",
        }
    return {"Resources": resources}


def _stack(log: list[str], **kwargs: Any) -> HarnessStack:
    player = Recorder(log, **kwargs)
    return HarnessStack(
        "s",
        players={"AWS::SageMaker::EndpointConfig": player, "AWS::SageMaker::Endpoint": player},
    )


def test_a_replacement_is_created_first_its_dependents_updated_and_the_old_one_deleted_last() -> (
    None
):
    log: list[str] = []
    stack = _stack(log)
    stack.deploy(_template("c1", extra=True))
    log.clear()
    stack.deploy(_template("c2"))  # a create-only change, and Extra removed
    assert log == ["create c2", "update ep -> c2", "delete extra", "delete c1"]
    assert [(e.action, e.logical_id) for e in stack.events[-4:]] == [
        ("replace", "Config"),
        ("update", "Endpoint"),
        ("delete", "Extra"),
        ("delete", "Config"),
    ]


def test_a_cleanup_delete_that_fails_leaves_an_orphan_and_the_update_succeeds() -> None:
    log: list[str] = []
    stack = _stack(log, fail_delete={"c1"})
    stack.deploy(_template("c1"))
    stack.deploy(_template("c2"))
    assert [(lid, res.physical_id) for lid, res, _ in stack.orphans] == [("Config", "c1")]
    assert stack.resources["Config"].physical_id == "c2"


def test_an_unknown_resource_type_fails_the_play() -> None:
    template = {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {}}}}
    with pytest.raises(StackFailedError, match="no player for AWS::SQS::Queue"):
        _stack([]).deploy(template)
