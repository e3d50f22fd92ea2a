"""Run the model custom resource's handler as Lambda runs it, from a synthesized stack.

- `model_properties`: the custom resource's ResourceProperties from the template, with
  the execution role's `Fn::GetAtt` resolved to a given ARN (what CloudFormation sends).
- `handler_asset`: the directory CDK staged as the handler's Lambda code (cdk.out
  `asset.<hash>`, found through the function's S3Key in the template).
- `load_handler`: that asset's handler.py as a fresh module.
- `event`: a CloudFormation custom-resource event as the Provider framework passes it.
- `FakeContext`: the part of Lambda's context the handler reads.
- `fail_first`: makes the first N CreateModel calls of a botocore client answer with a
  SageMaker error, through botocore's own response path (a ClientError as on the wire).
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from cdk_helpers import Synthesized, decode_json_property

from infra.model import HANDLER, MODEL_RESOURCE_TYPE
from infra.model_provider.handler import PROPERTY

_loaded = itertools.count()
ASSUME_ROLE_MESSAGE = (
    "Could not assume role arn:aws:iam::123456789012:role/peagle-test-execution-role. "
    "Please ensure that the role exists and allows principal 'sagemaker.amazonaws.com' "
    "to assume the role."
)


def execution_role_id(synth: Synthesized, stack: str) -> str:
    roles = synth.resources(stack, "AWS::IAM::Role")
    (role_id,) = [lid for lid in roles if "ExecutionRole" in lid]
    return role_id


def model_resource(synth: Synthesized, stack: str) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = synth.resources(stack, MODEL_RESOURCE_TYPE).items()
    return logical_id, resource


def model_properties(synth: Synthesized, stack: str, role_arn: str) -> dict[str, Any]:
    """ResourceProperties as CloudFormation delivers them (tokens resolved)."""
    _, resource = model_resource(synth, stack)
    props = resource["Properties"]
    request = decode_json_property(props[PROPERTY], {execution_role_id(synth, stack): role_arn})
    return {
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:framework-onEvent",
        PROPERTY: json.dumps(request, separators=(",", ":")),
    }


def handler_function(synth: Synthesized, stack: str) -> dict[str, Any]:
    functions = synth.resources(stack, "AWS::Lambda::Function")
    (function,) = [f for f in functions.values() if f["Properties"]["Handler"] == HANDLER]
    return function


def handler_asset(synth: Synthesized, stack: str) -> Path:
    key = handler_function(synth, stack)["Properties"]["Code"]["S3Key"]
    asset = synth.outdir / f"asset.{key.removesuffix('.zip')}"
    assert (asset / "handler.py").is_file(), f"no handler.py in {asset}"
    return asset


def template_handler(template: Mapping[str, Any], outdir: Path) -> ModuleType:
    """The model provider's handler of one synthesized template in `outdir`."""
    functions = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == HANDLER
    ]
    key = functions[0]["Properties"]["Code"]["S3Key"]
    return load_handler(outdir / f"asset.{key.removesuffix('.zip')}")


def load_handler(asset: Path) -> ModuleType:
    """handler.py from the asset directory, as a module of its own."""
    spec = importlib.util.spec_from_file_location(
        f"peagle_model_handler_{next(_loaded)}", asset / "handler.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(kind: str, properties: dict[str, Any], physical_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "RequestType": kind,
        "ServiceToken": properties["ServiceToken"],
        "ResponseURL": "...",  # the framework replaces it before calling the handler
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/PeagleEndpoint-dev/1",
        "RequestId": f"req-{kind.lower()}",
        "LogicalResourceId": "EndpointModelModel",
        "ResourceType": MODEL_RESOURCE_TYPE,
        "ResourceProperties": properties,
    }
    if physical_id is not None:
        body["PhysicalResourceId"] = physical_id
    return body


class FakeContext:
    def __init__(self, remaining_ms: int = 480_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def fail_first(
    client: Any, count: int, code: str, message: str, requests: list[dict[str, Any]]
) -> None:
    """The first `count` CreateModel calls of `client` get `code`/`message` back (as a
    ClientError through botocore's normal response path); every call's params are
    appended to `requests`."""
    left = [count]

    def record(params: dict[str, Any], **_: Any) -> None:
        requests.append(copy.deepcopy(params))

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if left[0] <= 0:
            return None
        left[0] -= 1
        response = AWSResponse(
            "https://api.sagemaker.us-east-1.amazonaws.com", 400, HTTPHeaders(), None
        )
        parsed = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return response, parsed

    client.meta.events.register("provide-client-params.sagemaker.CreateModel", record)
    client.meta.events.register("before-call.sagemaker.CreateModel", answer)


def recording_handler(
    synth: Synthesized, stack: str, monkeypatch: pytest.MonkeyPatch, sent: list[dict[str, Any]]
) -> ModuleType:
    """The stack's handler (from its Lambda asset) whose SageMaker clients append the
    params of every CreateModel they send to `sent`."""
    module = load_handler(handler_asset(synth, stack))
    original = module.sagemaker_client

    def recording_client() -> Any:
        client = original()
        fail_first(client, 0, "", "", sent)
        return client

    monkeypatch.setattr(module, "sagemaker_client", recording_client)
    return module


def framework_asset(synth: Synthesized, stack: str) -> Path:
    """The directory CDK staged as the Provider framework's Lambda code (framework.js)."""
    functions = synth.resources(stack, "AWS::Lambda::Function")
    (function,) = [
        f for f in functions.values() if f["Properties"]["Handler"] == "framework.onEvent"
    ]
    key = function["Properties"]["Code"]["S3Key"]
    asset = synth.outdir / f"asset.{key.removesuffix('.zip')}"
    assert (asset / "framework.js").is_file(), f"no framework.js in {asset}"
    return asset


def run_framework(asset: Path, event: dict[str, Any], result: dict[str, Any], tmp: Path) -> str:
    """What the real framework.js logs for `event` (stdout), with the user handler
    answering `result`; see tests/infra/provider_framework.cjs."""
    import os
    import shutil
    import subprocess

    node = shutil.which("node")
    assert node, "node is needed to run the CDK provider framework"
    stubs = tmp / "node_modules" / "@aws-sdk"
    for name, cls in (("client-lambda", "Lambda"), ("client-sfn", "SFN")):
        (stubs / name).mkdir(parents=True, exist_ok=True)
        (stubs / name / "index.js").write_text(
            f"exports.{cls} = class {{}}; exports.waitUntilFunctionActiveV2 = async () => {{}};\n"
        )
    done = subprocess.run(
        [
            node,
            str(Path(__file__).with_name("provider_framework.cjs")),
            str(asset),
            json.dumps(result),
        ],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env={**os.environ, "NODE_PATH": str(tmp / "node_modules")},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
