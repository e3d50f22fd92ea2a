"""The model custom resource's handler with a credential in the model environment.

Called as Lambda calls it, `on_event(event, context)`, with CloudFormation's Create event
(the request JSON-encoded in ResourceProperties, as the CDK stack sends it), against moto.
Whatever fails, the message it raises (which becomes the stack event) and every line it
prints (the log) must not contain the value: botocore's parameter validation quotes it
(`..., value: ['hf_...'], type: <class 'list'>, ...`), and so does SageMaker's
ValidationException (`Value '{HF_TOKEN=hf_...}' at 'primaryContainer.environment' ...`).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from hostile_kit import HF_TOKEN, MODEL, ROLE
from moto import mock_aws

HANDLER = Path(__file__).resolve().parents[2] / "infra" / "model_provider" / "handler.py"
OTHER_SECRET = "s3cr3t-Pa55word-value"


class LambdaContext:
    def __init__(self, remaining_ms: int = 480_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """handler.py as a module of its own (as Lambda loads it), against moto."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec = importlib.util.spec_from_file_location("peagle_model_handler_hostile", HANDLER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "SLEEP", lambda _s: None)
    with mock_aws():
        yield module


def _request(environment: dict[str, Any]) -> dict[str, Any]:
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import load_spec

    request = build_plan(load_spec(model=MODEL, execution_role_arn=ROLE)).create_model
    request["PrimaryContainer"]["Environment"].update(environment)
    return request


def _create_event(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "RequestType": "Create",
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
        "ResponseURL": "...",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/PeagleEndpoint-dev/1",
        "RequestId": "req-create",
        "LogicalResourceId": "EndpointModelModel",
        "ResourceType": "Custom::PeagleModel",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
            "CreateModel": json.dumps(request, separators=(",", ":")),
        },
    }


def _answer_create_model(module: ModuleType, monkeypatch: pytest.MonkeyPatch, answers: list[str]):  # type: ignore[no-untyped-def]
    """The first CreateModel calls get ValidationException with `answers`, in order,
    through botocore's own response path."""
    original = module.sagemaker_client

    def client() -> Any:
        c = original()

        def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            if not answers:
                return None
            message = answers.pop(0)
            response = AWSResponse("https://api.sagemaker", 400, HTTPHeaders(), None)
            parsed = {
                "Error": {"Code": "ValidationException", "Message": message},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            return response, parsed

        c.meta.events.register("before-call.sagemaker.CreateModel", answer)
        return c

    monkeypatch.setattr(module, "sagemaker_client", client)


def _fails_masked(
    module: ModuleType, event: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> str:
    capsys.readouterr()
    with pytest.raises(Exception) as info:  # any failure: its text is the point
        module.on_event(event, LambdaContext())
    out, err = capsys.readouterr()
    text = str(info.value)
    for secret in (HF_TOKEN, OTHER_SECRET):
        assert secret not in text and secret not in out + err, text
    assert info.value.__cause__ is None and info.value.__suppress_context__, "original kept"
    assert "<redacted>" in text
    return text


def test_botocore_parameter_validation_quotes_no_value(
    handler: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    request = _request({"HF_TOKEN": [HF_TOKEN], "DB_PASSWORD": {"v": OTHER_SECRET}})
    text = _fails_masked(handler, _create_event(request), capsys)
    assert "Invalid type for parameter PrimaryContainer.Environment.HF_TOKEN" in text
    assert "PrimaryContainer.Environment.DB_PASSWORD" in text


def test_sagemaker_validation_exception_quotes_no_value(
    handler: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = _request({"HF_TOKEN": HF_TOKEN})
    _answer_create_model(
        handler,
        monkeypatch,
        [
            f"1 validation error detected: Value '{{HF_TOKEN={HF_TOKEN}}}' at "
            "'primaryContainer.environment' failed to satisfy constraint: Map value must "
            "satisfy constraint: [Member must have length less than or equal to 1024]"
        ],
    )
    text = _fails_masked(handler, _create_event(request), capsys)
    assert "CreateModel" in text and "'primaryContainer.environment'" in text


def test_a_value_quoted_anywhere_else_is_masked_in_the_retry_log_and_the_error(
    handler: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retryable answer that happens to carry the value: the retry's log line and the
    final error are both masked (the value is not quoted in botocore's or AWS's form)."""
    request = _request({"HF_TOKEN": HF_TOKEN})
    message = f"Could not access model data at s3://b/{HF_TOKEN}/. Please ensure ..."
    _answer_create_model(handler, monkeypatch, [message] * 40)
    capsys.readouterr()
    with pytest.raises(RuntimeError) as info:
        handler.on_event(_create_event(request), LambdaContext(remaining_ms=480_000))
    out, _ = capsys.readouterr()
    assert '"peagle_model_provider": "retry"' in out
    assert HF_TOKEN not in out and HF_TOKEN not in str(info.value)
    assert "s3://b/<redacted>/" in str(info.value)


def test_a_clean_create_still_works(handler: ModuleType) -> None:
    request = _request({"HF_TOKEN": HF_TOKEN})
    result = handler.on_event(_create_event(request), LambdaContext())
    assert result["PhysicalResourceId"] == request["ModelName"]
